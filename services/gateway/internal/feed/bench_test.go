package feed_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
)

// BenchmarkAppendFrame frames one record into a reused buffer, as the fetch loop does for every record: a
// JSON value in each format, and a binary value in auto. None may allocate.
func BenchmarkAppendFrame(b *testing.B) {
	json := &kgo.Record{
		Key:     []byte("o-0042"),
		Value:   []byte(`{"id":"o-0042","status":"paid","amount":1299,"currency":"EUR","items":[{"sku":"A-1","n":2}]}`),
		Headers: hdr("event", "order.paid"),
	}
	binary := &kgo.Record{Key: []byte("o-0042"), Value: append(allBytes[:0:0], allBytes[:128]...)}
	for _, bc := range []struct {
		name string
		rec  *kgo.Record
		vf   feed.ValueFormat
	}{
		{"json/text", json, feed.ValueText},
		{"json/auto", json, feed.ValueAuto},
		{"json/base64", json, feed.ValueBase64},
		{"binary/auto", binary, feed.ValueAuto},
	} {
		b.Run(bc.name, func(b *testing.B) {
			id := []byte(frameID)
			buf := feed.AppendFrame(nil, id, bc.rec, feed.Plain(bc.vf))
			b.SetBytes(int64(len(bc.rec.Value)))
			b.ReportAllocs()
			for b.Loop() {
				buf = feed.AppendFrame(buf[:0], id, bc.rec, feed.Plain(bc.vf))
			}
		})
	}
}
