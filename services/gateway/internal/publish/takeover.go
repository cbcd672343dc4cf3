package publish

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// find reads partition from offset from for a record carrying the idempotency key and the digest, up to the
// partition's end or MaxScan records, whichever comes first (ErrLooking). It returns the offset it reached:
// nothing before it is the record, so the next look starts there.
func (p *Publisher) find(ctx context.Context, topic string, partition int32, from int64, idemKey, digest string) (Result, bool, int64, error) {
	off := from
	for scanned := 0; ; {
		if scanned >= p.cfg.MaxScan {
			return Result{}, false, off, ErrLooking
		}
		recs, next, err := p.cfg.Log.Fetch(ctx, topic, partition, off)
		if err != nil {
			var oor *replay.OutOfRangeError
			if errors.As(err, &oor) {
				return Result{}, false, off, fmt.Errorf("publish: looking for the record of a claim taken over: %w", err)
			}
			return Result{}, false, off, fmt.Errorf("publish: looking for the record of a claim taken over: kafka: %w", err)
		}
		for _, rec := range recs {
			if carries(rec, topic, idemKey, digest) {
				return Result{Partition: partition, Offset: rec.Offset, Time: rec.Timestamp}, true, off, nil
			}
		}
		if len(recs) == 0 && next == off {
			return Result{}, false, off, nil
		}
		scanned += len(recs)
		off = next
	}
}

// carries says whether rec is the record of idemKey and digest: it has the key's header and, without that
// header, the digest. Another publisher's record with the same idempotency key is another record.
func carries(rec *kgo.Record, topic, idemKey, digest string) bool {
	found := false
	r := Record{Key: rec.Key, Value: rec.Value}
	for _, h := range rec.Headers {
		if h.Key == IdemHeader {
			found = found || string(h.Value) == idemKey
			continue
		}
		r.Headers = append(r.Headers, Header{Key: h.Key, Value: h.Value})
	}
	return found && r.Digest(topic) == digest
}

// storeKey is the store's key of an idempotency key of a publisher in a topic: a hash, so that any key fits.
func storeKey(topic, publisher, idemKey string) string {
	h := sha256.New()
	for _, s := range []string{topic, publisher, idemKey} {
		writeField(h, []byte(s), true)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeField writes b to h with its length (-1 for a nil b when nilSeen), so that fields cannot run into each
// other.
func writeField(h interface{ Write([]byte) (int, error) }, b []byte, nilSeen bool) {
	n := int64(len(b))
	if b == nil && nilSeen {
		n = -1
	}
	_, _ = h.Write(binary.BigEndian.AppendUint64(nil, uint64(n)))
	_, _ = h.Write(b)
}

// Digest is what tells the record of an idempotency key from another: a hash of topic, key, value (a null key
// or value is not an empty one) and headers, in their order. A repeat of a key must carry the same record.
func (r Record) Digest(topic string) string {
	h := sha256.New()
	writeField(h, []byte(topic), false)
	writeField(h, r.Key, true)
	writeField(h, r.Value, true)
	for _, hd := range r.Headers {
		writeField(h, []byte(hd.Key), false)
		writeField(h, hd.Value, false)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
