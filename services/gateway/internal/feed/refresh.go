package feed

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// refreshLoop refreshes the topics' metadata every MetadataInterval (every second while a configured topic is
// missing, or until the first refresh succeeds), until ctx ends.
func (f *Feed) refreshLoop(ctx context.Context) {
	wait := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		missing, err := f.refresh(ctx)
		if err == nil {
			f.checkStalls()
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			f.log.Warn("kafka metadata refresh failed", "err", err)
			wait = min(max(2*wait, time.Second), f.cfg.MetadataInterval)
		case missing:
			// Streams of a configured topic that does not exist yet are open and waiting for it.
			wait = min(time.Second, f.cfg.MetadataInterval)
		default:
			wait = f.cfg.MetadataInterval
		}
	}
}

// refresh looks for new topics and partitions and assigns them, records end offsets for the lag metric, and
// trims the rings to the low watermarks. It reports whether a topic is still missing (or has partitions not
// assigned yet).
func (f *Feed) refresh(ctx context.Context) (missing bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, max(f.cfg.MetadataInterval, 10*time.Second))
	defer cancel()
	md, err := f.kc.Metadata(rctx, f.names)
	if err != nil {
		return false, err
	}
	var present []string
	for _, name := range f.names {
		t := f.topics[name]
		if _, ok := md[name]; ok {
			present = append(present, name)
			t.setAbsent(false)
			continue
		}
		missing = true
		switch {
		case t.Exists():
			f.log.Warn("topic no longer exists in kafka", "topic", name)
		case f.first:
			f.log.Warn("topic does not exist in kafka yet; it is read from its start once it does", "topic", name)
		}
		t.setAbsent(true)
	}
	var lso, starts map[string]map[int32]int64
	if len(present) > 0 {
		if lso, err = f.kc.ListOffsets(rctx, LastStable, present...); err != nil {
			return false, fmt.Errorf("list last stable offsets: %w", err)
		}
		if starts, err = f.kc.ListOffsets(rctx, LogStart, present...); err != nil {
			return false, fmt.Errorf("list start offsets: %w", err)
		}
	}
	add, again := map[string]map[int32]int64{}, map[string]map[int32]int64{}
	for _, name := range present {
		t := f.topics[name]
		if ps := t.recreated(md[name].ID, md[name].Partitions); ps != nil {
			f.log.Warn("topic was deleted and created again; reading it from its start", "topic", name)
			again[name] = ps
		}
		ps, pending := t.assign(md[name].Partitions, lso[name], starts[name], f.first, f.cfg.Prefill)
		missing = missing || pending
		if len(ps) > 0 {
			add[name] = ps
			f.log.Info("reading partitions", "topic", name, "partitions", len(ps), "from_start", !f.first)
		}
	}
	if len(again) > 0 {
		f.kc.Reassign(again)
	}
	if len(add) > 0 {
		f.kc.Assign(add)
	}
	for _, name := range present {
		f.topics[name].setID(md[name].ID)
	}
	f.first = false
	f.refreshed.Store(true)
	return missing, nil
}

// assign records the topic's partitions that are new to the feed and returns where to read them from: the
// partitions that existed at the feed's first refresh (first: this is it) start prefill records before the
// last stable offset (not before the low watermark in starts), even when their first try fails and they are
// assigned on a later refresh; the others (partitions added later, and every partition of a topic that
// appeared later) start at their log start, so no record in them is missed. It also trims the ring to the
// low watermarks. pending reports partitions that could not be assigned yet.
func (t *Topic) assign(parts []int32, lso, starts map[int32]int64, first bool, prefill int64) (add map[int32]int64, pending bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if first {
		for _, p := range parts {
			t.atEnd[p] = true
		}
	}
	served := len(t.parts) > 0
	added := false
	add = map[int32]int64{}
	for _, p := range parts {
		lo, ok := lso[p]
		if low, ok := starts[p]; ok && low > 0 {
			t.ring.Trim(p, low)
		}
		if ps := t.parts[p]; ps != nil {
			if ok && lo >= 0 {
				ps.end.Store(lo)
			}
			continue
		}
		ps := &partition{start: -1, ready: -1}
		ps.next.Store(-1)
		if t.atEnd[p] {
			if !ok || lo < 0 {
				pending = true
				continue // try again on the next refresh, still at the end
			}
			start := lo
			if so, ok := starts[p]; ok {
				switch {
				case t.fromStart:
					start = so // a key index needs every retained record
				case prefill > 0:
					start = max(so, lo-prefill)
				}
			}
			ps.start, ps.ready = start, lo
			if lo > 0 {
				t.latest.Set(p, lo-1)
			}
			if start == lo {
				// Nothing to read back: the ring holds the partition from here on. (With records to read
				// back, the first fetch tells whether reading really began at start.)
				t.ring.SetLow(p, start)
				if so, ok := starts[p]; ok && start <= so {
					t.ring.IndexFrom(p, start) // empty, and read from its log start
					ps.indexed = true
				}
				ps.seen = true
			}
			ps.next.Store(start)
			ps.end.Store(lo)
			if start > 0 {
				t.pos.Set(p, start-1)
			}
			add[p] = start
		} else {
			if ok && lo >= 0 {
				ps.end.Store(lo)
			}
			add[p] = AtLogStart
			added = added || served
		}
		t.parts[p] = ps
	}
	if len(add) > 0 {
		t.id, _ = t.pos.AppendText(t.id[:0])
		var empty ring.Batch
		t.ring.Publish(&empty, t.id)
	}
	if added {
		t.gen.Add(1)
	}
	// Streams are served once the ring carries the position of at least one assigned partition.
	if !t.exists && len(t.parts) > 0 {
		t.exists = true
		close(t.appeared)
	}
	t.storeView()
	return add, pending
}

// recreated checks the topic's id against the one its partitions were read under. When it changed (the topic
// was deleted and created again), every partition starts again from its log start, the ring forgets them,
// the position vector drops them (the new topic's records enter it as they come), and the generation moves
// so that every stream re-joins: a stream whose position is past the new topic's end gets an ahead resync
// instead of skipping the new records as ones it already has. Partitions the new topic does not have (it may
// have fewer) are dropped: the feed stops reading them and ids naming them become invalid. It returns the
// partitions to read again.
func (t *Topic) recreated(id [16]byte, parts []int32) map[int32]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kid == ([16]byte{}) || id == ([16]byte{}) || id == t.kid || len(t.parts) == 0 {
		return nil
	}
	again := map[int32]int64{}
	for p, ps := range t.parts {
		t.ring.Forget(p)
		if !slices.Contains(parts, p) {
			delete(t.parts, p)
			delete(t.atEnd, p)
			continue
		}
		again[p] = AtLogStart
		ps.start, ps.ready, ps.seen, ps.lowSeen = -1, -1, false, 0
	}
	// The view first, without ready offsets, then the counters: Ready never finds them behind a ready offset
	// of the old topic (but for one that loaded the old view just before).
	t.storeView()
	for p := range again {
		t.parts[p].next.Store(-1)
		t.parts[p].caught.Store(false)
	}
	t.pos = t.pos.Restrict(nil)
	t.kid = id                   // checkpoints from now on are of the new topic (their epoch is the new one too)
	t.latest = position.Vector{} // the new topic's records are all new to every stream
	t.id, _ = t.pos.AppendText(t.id[:0])
	t.ring.Touch(t.id) // the new head first: a stream that sees the new epoch must not join the old head
	t.epoch.Add(1)
	return again
}
