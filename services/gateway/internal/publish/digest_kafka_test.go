package publish

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// TestDigestThroughKafka: a record read back from a real broker has the digest of the record that was produced,
// null and empty keys and values and empty header values included, so that a takeover's look finds it.
func TestDigestThroughKafka(t *testing.T) {
	topic := kafkatest.NewTopic(t, 1, nil)
	recs := []Record{
		{Key: []byte("k"), Value: []byte("v"), Headers: []Header{{"a", []byte("1")}, {"b", []byte{}}}, IdemKey: "one"},
		{Key: []byte{}, Value: []byte{}, IdemKey: "empty"},
		{Value: nil, IdemKey: "null"},
	}
	cl := kafkatest.Client(t)
	for _, r := range recs {
		kr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: IdemHeader, Value: []byte(r.IdemKey)})
		kafkatest.Produce(t, cl, kr)
	}
	got := kafkatest.ReadAll(t, topic)[0]
	if len(got) != len(recs) {
		t.Fatalf("%d records read, want %d", len(got), len(recs))
	}
	for i, r := range recs {
		if !carries(got[i], topic, r.IdemKey, r.Digest(topic)) {
			t.Errorf("record %d read back (key %q nil %v, value %q nil %v) does not carry its key and digest", i, got[i].Key, got[i].Key == nil, got[i].Value, got[i].Value == nil)
		}
		for j, other := range recs {
			if j != i && carries(got[i], topic, r.IdemKey, other.Digest(topic)) {
				t.Errorf("record %d read back carries record %d's digest", i, j)
			}
		}
	}
}
