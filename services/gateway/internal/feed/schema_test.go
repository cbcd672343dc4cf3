package feed_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/schema"
)

// TestSchemaFrames: a topic of a schema format frames a decoded value as one data line of JSON, a tombstone's
// key in the key format, and a value it cannot decode as auto writes it after an undecodable field naming the
// reason, which is also counted.
func TestSchemaFrames(t *testing.T) {
	dir := t.TempDir()
	avsc := `{"type":"record","name":"T","fields":[{"name":"n","type":"long"},{"name":"s","type":"string"}]}`
	if err := os.WriteFile(filepath.Join(dir, "7.avsc"), []byte(avsc), 0o600); err != nil {
		t.Fatal(err)
	}
	var reasons []schema.Reason
	f := &feed.Format{
		Value: feed.ValueAvro, Key: feed.ValueAuto,
		Schemas:     schema.NewDecoders(schema.Files(dir), schema.Options{}),
		Undecodable: func(r schema.Reason) { reasons = append(reasons, r) },
	}
	header := []byte{0, 0, 0, 0, 7}
	ev := []kgo.RecordHeader{{Key: "event", Value: []byte("trade")}}
	cases := []struct {
		name string
		rec  *kgo.Record
		want string
	}{
		{
			"decoded", &kgo.Record{Value: append(header, 0x54, 0x04, 'h', '\n')},
			"id: v1:0-1\ndata: {\"n\":42,\"s\":\"h\\n\"}\n\n",
		},
		{
			"decoded, with its event type", &kgo.Record{Value: append(header, 0x02, 0x00), Headers: ev},
			"id: v1:0-1\nevent: trade\ndata: {\"n\":1,\"s\":\"\"}\n\n",
		},
		{
			"tombstone: the key as auto writes it", &kgo.Record{Key: []byte("k-1")},
			"id: v1:0-1\nevent: delete\ndata: k-1\n\n",
		},
		{
			"not framed, text", &kgo.Record{Value: []byte("{\"n\":1}\nx"), Headers: ev},
			"id: v1:0-1\nevent: trade\nundecodable: not-framed\ndata: {\"n\":1}\ndata: x\n\n",
		},
		{
			"unknown schema, binary", &kgo.Record{Value: []byte{0, 0, 0, 0, 9, 0xff}},
			"id: v1:0-1\nundecodable: unknown-schema\ndata: base64:AAAAAAn/\n\n",
		},
		{
			"mismatch", &kgo.Record{Value: append(header, 0x54)},
			"id: v1:0-1\nundecodable: mismatch\ndata: base64:AAAAAAdU\n\n",
		},
	}
	for _, tc := range cases {
		got := feed.AppendFrame([]byte("before"), []byte("v1:0-1"), tc.rec, f)
		if string(got) != "before"+tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got[len("before"):], tc.want)
		}
	}
	want := []schema.Reason{schema.NotFramed, schema.UnknownSchema, schema.Mismatch}
	if len(reasons) != len(want) || reasons[0] != want[0] || reasons[1] != want[1] || reasons[2] != want[2] {
		t.Errorf("counted %v, want %v", reasons, want)
	}
}
