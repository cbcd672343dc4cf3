package replay

import (
	"reflect"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// block is what a read found of one block: every record with an offset in [from, to], in offset order
// (offsets in that span without a record hold transaction markers or were compacted away). Its records are
// copies in memory of their own (see own), never the records a fetch decoded. A block is never changed once
// made.
type block struct {
	from, to int64
	recs     []*kgo.Record
	size     int64 // bytes the block holds: its records' copies (own) and recs
}

// covers says the block holds every offset in [from, to].
func (b *block) covers(from, to int64) bool { return b.from <= from && b.to >= to }

// What a copy takes besides the bytes of its keys, values, header keys and header values: the record, its
// pointer in a block's recs, each header.
var (
	recordSize = int64(reflect.TypeFor[kgo.Record]().Size())
	ptrSize    = int64(reflect.TypeFor[*kgo.Record]().Size())
	headerSize = int64(reflect.TypeFor[kgo.RecordHeader]().Size())
)

// own copies recs into memory of their own and returns the copies with the bytes they hold (counting a
// pointer to each in a block's recs). franz-go decodes a record batch into one slice of records whose keys and
// values point into the batch's bytes (an uncompressed batch's: into the whole fetch answer), so one record
// kept keeps the batch, or the answer, alive: a block of kept records could hold many times its records'
// size. A copy keeps only what a stream reads of a record (key, value, headers, timestamp, partition, offset,
// and the record's other scalars), in three allocations for all of recs: the records, their headers, and one
// buffer of every key, value and header value. Header keys are shared by the records that have the same.
// A nil key or value stays nil (a nil value is a tombstone); an empty one stays empty.
func own(recs []*kgo.Record) ([]kgo.Record, int64) {
	if len(recs) == 0 {
		return nil, 0
	}
	n, nh := 0, 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
		nh += len(r.Headers)
		for _, h := range r.Headers {
			n += len(h.Value)
		}
	}
	buf := make([]byte, 0, n) // never grows: the copies point into it
	var hs []kgo.RecordHeader
	var keys map[string]string
	if nh > 0 {
		hs = make([]kgo.RecordHeader, 0, nh)
		keys = map[string]string{}
	}
	size := int64(len(recs))*(recordSize+ptrSize) + int64(nh)*headerSize + int64(n)
	out := make([]kgo.Record, len(recs))
	for i, r := range recs {
		c := &out[i]
		c.Timestamp, c.Topic, c.Partition, c.Offset = r.Timestamp, r.Topic, r.Partition, r.Offset
		c.Attrs, c.ProducerEpoch, c.ProducerID, c.LeaderEpoch = r.Attrs, r.ProducerEpoch, r.ProducerID, r.LeaderEpoch
		c.Key, buf = appendOwned(buf, r.Key)
		c.Value, buf = appendOwned(buf, r.Value)
		if len(r.Headers) == 0 {
			continue
		}
		start := len(hs)
		for _, h := range r.Headers {
			k, ok := keys[h.Key]
			if !ok {
				k = strings.Clone(h.Key)
				keys[k] = k
				size += int64(len(k))
			}
			var v []byte
			v, buf = appendOwned(buf, h.Value)
			hs = append(hs, kgo.RecordHeader{Key: k, Value: v})
		}
		c.Headers = hs[start:len(hs):len(hs)]
	}
	return out, size
}

// appendOwned appends b to buf, which has room for it, and returns buf's copy of b (nil for nil) and buf.
func appendOwned(buf, b []byte) (owned, grown []byte) {
	if b == nil {
		return nil, buf
	}
	start := len(buf)
	buf = append(buf, b...)
	return buf[start:len(buf):len(buf)], buf
}
