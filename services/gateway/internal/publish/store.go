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
// the one it gets) or the result. A request that finds:
//   - no entry claims it and produces;
//   - a result answers it, as a duplicate;
//   - a claim still held waits for the result (its owner is producing);
//   - a claim no longer held (its owner died, or its produce failed and it let go) takes it over, keeping the
//     partition and offset, and reads that partition from that offset for a record carrying the key: found,
//     that record is the result; not found, it produces.
//
// The owner holds a claim longer than a produce may take (a record not acknowledged in time fails), so a live
// owner's record is in the log, or will never be, by the time another takes over.

// Entry is what the store holds for an idempotency key.
type Entry struct {
	State     State
	Partition int32 // the partition of the claim or of the result
	From      int64 // a claim's: the record is at or after this offset
	Offset    int64 // a result's
	Time      time.Time
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
)

// Store keeps idempotency entries: Redis, shared by the pods and outliving them, or this process's memory.
type Store interface {
	// Claim claims key for owner for lease, with the record going to partition at or after from, unless it
	// is held or done (see State). A claim taken over keeps the partition and from of the first.
	Claim(ctx context.Context, key, owner string, lease time.Duration, partition int32, from int64) (Entry, error)
	// Complete records the result of owner's claim; false when owner no longer held it.
	Complete(ctx context.Context, key, owner string, partition int32, offset int64, ts time.Time) (bool, error)
	// Release ends owner's claim at once (its produce failed), leaving its partition and from for the next.
	Release(ctx context.Context, key, owner string) error
}

// entry values: "c|owner|until-ms|partition|from" for a claim, "d|partition|offset|time-ms" for a result.

func claimValue(owner string, until time.Time, partition int32, from int64) string {
	return fmt.Sprintf("c|%s|%d|%d|%d", owner, until.UnixMilli(), partition, from)
}

func doneValue(partition int32, offset int64, ts time.Time) string {
	return fmt.Sprintf("d|%d|%d|%d", partition, offset, ts.UnixMilli())
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
}

func parseValue(v string) (parsed, error) {
	f := strings.Split(v, "|")
	num := func(s string) int64 {
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	switch {
	case len(f) == 5 && f[0] == "c":
		return parsed{claim: true, owner: f[1], until: num(f[2]), partition: int32(num(f[3])), from: num(f[4])}, nil
	case len(f) == 4 && f[0] == "d":
		return parsed{partition: int32(num(f[1])), offset: num(f[2]), ts: num(f[3])}, nil
	}
	return parsed{}, fmt.Errorf("publish: malformed idempotency entry %q", v)
}

func (p parsed) entry(state State) Entry {
	if !p.claim {
		return Entry{State: Done, Partition: p.partition, Offset: p.offset, Time: time.UnixMilli(p.ts)}
	}
	return Entry{State: state, Partition: p.partition, From: p.from}
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
func (s *MemoryStore) Claim(_ context.Context, key, owner string, lease time.Duration, partition int32, from int64) (Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	v, ok := s.entries.Get(key)
	if !ok {
		s.entries.Add(key, claimValue(owner, now.Add(lease), partition, from))
		return Entry{State: Claimed, Partition: partition, From: from}, nil
	}
	p, err := parseValue(v)
	if err != nil {
		return Entry{}, err
	}
	switch {
	case !p.claim:
		return p.entry(Done), nil
	case p.until > now.UnixMilli():
		return p.entry(Held), nil
	}
	s.replace(key, claimValue(owner, now.Add(lease), p.partition, p.from))
	return p.entry(TakenOver), nil
}

// replace sets key's value. The LRU starts an entry's window again on Add (Redis keeps it: KEEPTTL), which only
// keeps a key longer than the window.
func (s *MemoryStore) replace(key, value string) { s.entries.Add(key, value) }

// Complete implements Store.
func (s *MemoryStore) Complete(_ context.Context, key, owner string, partition int32, offset int64, ts time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.entries.Get(key)
	if !ok {
		return false, nil
	}
	p, err := parseValue(v)
	if err != nil || !p.claim || p.owner != owner {
		return false, err
	}
	s.replace(key, doneValue(partition, offset, ts))
	return true, nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, key, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.entries.Get(key)
	if !ok {
		return nil
	}
	p, err := parseValue(v)
	if err != nil || !p.claim || p.owner != owner {
		return err
	}
	s.replace(key, claimValue(owner, time.UnixMilli(0), p.partition, p.from))
	return nil
}
