package publish

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// An idempotency key is claimed before its record is produced, and its entry holds, for the window, either the
// claim (its owner, until when the owner holds it, the partition the record goes to and an offset at or before
// the one it gets) or the result, and in both the digest of the record (Record.Digest). A request that finds:
//   - no entry claims it and produces;
//   - an entry of another digest is refused (Conflict): the key was used for another record;
//   - a result answers it, as a duplicate;
//   - a claim still held waits for the result (its owner is producing);
//   - a claim no longer held (its owner died, or its produce failed and it let go) takes it over, keeping the
//     partition and offset, and reads that partition from that offset for a record carrying the key and the
//     digest: found, that record is the result; not found, it produces.
//
// The owner holds a claim for a lease, and extends it while its produce is in flight (Extend), so that a live
// owner's claim is not taken over however long Kafka takes to answer. A look that stops before the partition's
// end (a bound, an error) moves the claim's offset to where it stopped (Release), so that the next one goes on
// from there.

// Entry is what the store holds for an idempotency key.
type Entry struct {
	State     State
	Partition int32 // the partition of the claim or of the result
	From      int64 // a claim's: the record is at or after this offset
	Offset    int64 // a result's
	Time      time.Time
	Digest    string // the digest of the record the key was claimed for
}

// State is an entry's state, from the point of view of the request that asked.
type State int

// States of an entry, as Claim returns them.
const (
	// Claimed: the caller now holds the claim (new, or taken over from an owner that let go); it produces.
	Claimed State = iota
	// TakenOver: the caller holds a claim another owner had: it must look for the record before producing.
	TakenOver
	// Held: another owner holds the claim now; wait.
	Held
	// Done: the record was published; the entry is its result.
	Done
	// Conflict: the key was claimed for another record (another digest); the entry is left as it is.
	Conflict
)

// Store keeps idempotency entries: Redis, shared by the pods and outliving them, or this process's memory.
type Store interface {
	// Claim claims key for owner for lease, for the record of digest going to partition at or after from,
	// unless it is held, done or another record's (see State). A claim taken over keeps the partition and from
	// of the first.
	Claim(ctx context.Context, key, owner string, lease time.Duration, digest string, partition int32, from int64) (Entry, error)
	// Extend holds owner's claim for lease from now; false when owner no longer has it (it was taken over, or
	// completed).
	Extend(ctx context.Context, key, owner string, lease time.Duration) (bool, error)
	// Complete records the result of owner's claim; false when owner no longer held it.
	Complete(ctx context.Context, key, owner string, partition int32, offset int64, ts time.Time) (bool, error)
	// Release ends owner's claim at once (its produce failed, or its look stopped), leaving its partition for
	// the next, and from raised to from when that is later: the next owner looks from there.
	Release(ctx context.Context, key, owner string, from int64) error
}

// entry values: "c|owner|until-ms|partition|from|digest" for a claim, "d|partition|offset|time-ms|digest" for a
// result. The digest is hex, so that it never holds the separator.

func claimValue(owner string, until time.Time, partition int32, from int64, digest string) string {
	return fmt.Sprintf("c|%s|%d|%d|%d|%s", owner, until.UnixMilli(), partition, from, digest)
}

func doneValue(partition int32, offset int64, ts time.Time, digest string) string {
	return fmt.Sprintf("d|%d|%d|%d|%s", partition, offset, ts.UnixMilli(), digest)
}

// parsed is an entry value read back.
type parsed struct {
	claim     bool
	owner     string
	until     int64 // ms
	partition int32
	from      int64
	offset    int64
	ts        int64 // ms
	digest    string
}

func parseValue(v string) (parsed, error) {
	f := strings.Split(v, "|")
	num := func(s string) int64 {
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	switch {
	case len(f) == 6 && f[0] == "c":
		return parsed{claim: true, owner: f[1], until: num(f[2]), partition: int32(num(f[3])), from: num(f[4]), digest: f[5]}, nil
	case len(f) == 5 && f[0] == "d":
		return parsed{partition: int32(num(f[1])), offset: num(f[2]), ts: num(f[3]), digest: f[4]}, nil
	}
	return parsed{}, fmt.Errorf("publish: malformed idempotency entry %q", v)
}

func (p parsed) entry(state State) Entry {
	if !p.claim {
		return Entry{State: state, Partition: p.partition, Offset: p.offset, Time: time.UnixMilli(p.ts), Digest: p.digest}
	}
	return Entry{State: state, Partition: p.partition, From: p.from, Digest: p.digest}
}

// MemoryStore keeps entries in this process: duplicates are caught within the process's life, not across
// pods or restarts (use Redis for those), and for the most recent keys only when more than its size come
// within the window.
type MemoryStore struct {
	mu      sync.Mutex
	entries *expirable.LRU[string, string]
	now     func() time.Time
}

// NewMemoryStore returns a store keeping at most size entries, each for window.
func NewMemoryStore(size int, window time.Duration) *MemoryStore {
	return &MemoryStore{entries: expirable.NewLRU[string, string](size, nil, window), now: time.Now}
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, key, owner string, lease time.Duration, digest string, partition int32, from int64) (Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	v, ok := s.entries.Get(key)
	if !ok {
		s.entries.Add(key, claimValue(owner, now.Add(lease), partition, from, digest))
		return Entry{State: Claimed, Partition: partition, From: from, Digest: digest}, nil
	}
	p, err := parseValue(v)
	if err != nil {
		return Entry{}, err
	}
	switch {
	case p.digest != digest:
		return p.entry(Conflict), nil
	case !p.claim:
		return p.entry(Done), nil
	case p.until > now.UnixMilli():
		return p.entry(Held), nil
	}
	s.replace(key, claimValue(owner, now.Add(lease), p.partition, p.from, p.digest))
	return p.entry(TakenOver), nil
}

// replace sets key's value. The LRU starts an entry's window again on Add (Redis keeps it: KEEPTTL), which only
// keeps a key longer than the window.
func (s *MemoryStore) replace(key, value string) { s.entries.Add(key, value) }

// owned returns key's claim when owner has it. It needs s.mu.
func (s *MemoryStore) owned(key, owner string) (parsed, bool, error) {
	v, ok := s.entries.Get(key)
	if !ok {
		return parsed{}, false, nil
	}
	p, err := parseValue(v)
	if err != nil || !p.claim || p.owner != owner {
		return parsed{}, false, err
	}
	return p, true, nil
}

// Extend implements Store.
func (s *MemoryStore) Extend(_ context.Context, key, owner string, lease time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok, err := s.owned(key, owner)
	if ok {
		s.replace(key, claimValue(owner, s.now().Add(lease), p.partition, p.from, p.digest))
	}
	return ok, err
}

// Complete implements Store.
func (s *MemoryStore) Complete(_ context.Context, key, owner string, partition int32, offset int64, ts time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok, err := s.owned(key, owner)
	if ok {
		s.replace(key, doneValue(partition, offset, ts, p.digest))
	}
	return ok, err
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, key, owner string, from int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok, err := s.owned(key, owner)
	if ok {
		s.replace(key, claimValue(owner, time.UnixMilli(0), p.partition, max(p.from, from), p.digest))
	}
	return err
}
