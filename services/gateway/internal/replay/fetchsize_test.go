package replay

import "testing"

// TestPartitionBytes: a fetch asks for about a block's worth of the topic's records as the last fetch found
// them, within bounds; a topic not fetched yet gets the first size.
func TestPartitionBytes(t *testing.T) {
	l := &KafkaLog{}
	if got := l.partitionBytes("t"); got != fetchPartitionFirst {
		t.Fatalf("a topic not fetched yet: %d, want %d", got, fetchPartitionFirst)
	}
	for _, c := range []struct {
		bytes, records int
		want           int32
	}{
		{230 * 500, 500, 231 * fetchRecords}, // 230-byte records: a block of them
		{10 * 100, 100, fetchPartitionMin},   // tiny records: not below the floor
		{50 << 10 * 3, 3, fetchPartitionMax}, // 50 KiB records: not above the ceiling
		{0, 0, fetchPartitionMax},            // an empty answer teaches nothing: the last size stays
	} {
		l.learn("t", c.bytes, c.records)
		if got := l.partitionBytes("t"); got != c.want {
			t.Errorf("after %d bytes of %d records: %d, want %d", c.bytes, c.records, got, c.want)
		}
	}
}
