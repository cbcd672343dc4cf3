package position

import (
	"encoding/binary"
	"errors"
	"math"
)

// ErrCheckpoint reports a checkpoint record that does not decode.
var ErrCheckpoint = errors.New("position: malformed checkpoint record")

// MaxCheckpointLen is the longest checkpoint record ParseCheckpoint accepts, in bytes.
const MaxCheckpointLen = 1 << 20

// checkpointFormat is the first byte of a checkpoint record: its format version.
const checkpointFormat = 1

// Checkpoint is what a checkpoint record in the position topic holds: a gateway's position vector of one
// data topic at one moment, and what a resolver checks before it applies a compact id to it.
type Checkpoint struct {
	// Topic is the data topic's name.
	Topic string
	// TopicID is the data topic's id in Kafka: a topic deleted and created again has a new one, and a
	// checkpoint of the old one must not be applied to it.
	TopicID [16]byte
	// Writer names the gateway that wrote the record.
	Writer string
	// Vector is the position.
	Vector Vector
	// Sum is the record's CheckpointSum: ParseCheckpoint sets it, AppendCheckpoint does not write it.
	Sum uint8
}

// AppendCheckpoint appends the record of c to dst: a format byte, the topic's name (length-prefixed), its
// id (16 bytes), the writer (length-prefixed), the number of entries, then per entry the partition's
// distance from the previous one minus one (the first as it is) and the offset, all as unsigned varints.
func AppendCheckpoint(dst []byte, c Checkpoint) []byte {
	dst = append(dst, checkpointFormat)
	dst = binary.AppendUvarint(dst, uint64(len(c.Topic)))
	dst = append(dst, c.Topic...)
	dst = append(dst, c.TopicID[:]...)
	dst = binary.AppendUvarint(dst, uint64(len(c.Writer)))
	dst = append(dst, c.Writer...)
	dst = binary.AppendUvarint(dst, uint64(len(c.Vector.e)))
	prev := int32(-1)
	for _, e := range c.Vector.e {
		dst = binary.AppendUvarint(dst, uint64(e.Partition-prev-1))
		dst = binary.AppendUvarint(dst, uint64(e.Offset))
		prev = e.Partition
	}
	return dst
}

// ParseCheckpoint decodes a record AppendCheckpoint wrote, and sets its Sum. Anything else, including trailing bytes, is an
// error wrapping ErrCheckpoint. It never panics and allocates no more than the record's size justifies.
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	if len(b) > MaxCheckpointLen || len(b) == 0 || b[0] != checkpointFormat {
		return Checkpoint{}, ErrCheckpoint
	}
	at := 1
	num := func(limit uint64) (uint64, bool) {
		x, k := binary.Uvarint(b[at:])
		if k <= 0 || k != uvarintLen(x) || x > limit {
			return 0, false
		}
		at += k
		return x, true
	}
	str := func() (string, bool) {
		n, ok := num(uint64(len(b)))
		if !ok || uint64(len(b)-at) < n {
			return "", false
		}
		s := string(b[at : at+int(n)])
		at += int(n)
		return s, true
	}
	var c Checkpoint
	var ok bool
	if c.Topic, ok = str(); !ok || len(b)-at < 16 {
		return Checkpoint{}, ErrCheckpoint
	}
	copy(c.TopicID[:], b[at:at+16])
	at += 16
	if c.Writer, ok = str(); !ok {
		return Checkpoint{}, ErrCheckpoint
	}
	n, ok := num(uint64(len(b)-at) / 2)
	if !ok {
		return Checkpoint{}, ErrCheckpoint
	}
	if n > 0 {
		c.Vector.e = make([]Entry, 0, n)
	}
	prev := int64(-1)
	for range n {
		gap, ok1 := num(math.MaxInt32)
		off, ok2 := num(math.MaxInt64)
		if !ok1 || !ok2 || prev+1+int64(gap) > math.MaxInt32 {
			return Checkpoint{}, ErrCheckpoint
		}
		prev += 1 + int64(gap)
		c.Vector.e = append(c.Vector.e, Entry{Partition: int32(prev), Offset: int64(off)})
	}
	if at != len(b) {
		return Checkpoint{}, ErrCheckpoint
	}
	c.Sum = CheckpointSum(b)
	return c, nil
}
