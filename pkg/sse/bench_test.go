package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func BenchmarkAppendEvent(b *testing.B) {
	// A 200-byte single-line JSON value: a typical record, padded to size.
	json := []byte(`{"order_id":"9f1c2e7a-3b4d-4e5f-8a9b-0c1d2e3f4a5b","customer":"ada","status":"shipped",` +
		`"total_cents":12999,"ts":"2025-01-01T00:00:00Z","note":"`)
	json = append(json, bytes.Repeat([]byte("x"), 200-len(json)-2)...)
	json = append(json, `"}`...)
	tenLines := bytes.Repeat([]byte("line of a multi-line value, twenty-ish bytes\n"), 10)
	tenLines = tenLines[:len(tenLines)-1]
	cases := []struct {
		name string
		data []byte
	}{
		{"json-200B", json},
		{"10-lines", tenLines},
	}
	id, typ := "v1:0-5812.1-5790.2-5833", "order"
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 1024)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.data)))
			for b.Loop() {
				buf = AppendEvent(buf[:0], id, typ, bc.data)
			}
		})
	}
}

func BenchmarkParser(b *testing.B) {
	var stream []byte
	for i := range 1000 {
		stream = AppendEvent(stream, "v1:0-"+strings.Repeat("1", i%7+1), "order",
			[]byte(`{"order_id":"9f1c2e7a-3b4d-4e5f","status":"shipped","total_cents":12999}`))
		if i%10 == 0 {
			stream = AppendComment(stream, "keep-alive")
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	r := bytes.NewReader(stream)
	for b.Loop() {
		r.Reset(stream)
		p := NewParser(r)
		for {
			if _, err := p.Next(); err != nil {
				if !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
				break
			}
		}
	}
}
