package memlog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// ErrDown is what every call answers while the cluster is down (SetDown).
var ErrDown = errors.New("memlog: cluster unreachable")

// fetchWait is how long Fetch waits for a partition with nothing stable at the offset asked, as a broker's
// fetch max wait.
const fetchWait = 50 * time.Millisecond

// maxFetch bounds the offsets one Fetch or Poll covers, so that readers fetch more than once.
const maxFetch = 100

// Cluster is an in-memory Kafka cluster. The zero value is not usable; make one with New.
type Cluster struct {
	mu         sync.Mutex
	changed    chan struct{} // closed and replaced on every change
	topics     map[string]*topic
	ids        byte // the last topic id handed out
	down       bool
	paused     bool           // Poll returns nothing
	hide       map[hidden]int // partitions ListOffsets leaves out, and how many more times
	fetchDelay time.Duration  // how long Fetch takes before it answers
	fetches    int
}

type hidden struct {
	topic     string
	partition int32
}

type topic struct {
	id    [16]byte
	parts []*partition
}

// Client is one reader of the cluster, as a gateway pod's Kafka client: it has its own assigned partitions
// and offsets. It is a feed.Cluster.
type Client struct {
	c        *Cluster
	assigned map[string]map[int32]int64 // next offset to read, per assigned partition; guarded by c.mu
	closed   bool                       // guarded by c.mu
}

type partition struct {
	log []entry // log[i] holds offset i
	low int64
}

type entry struct {
	rec    *kgo.Record // nil for a transaction marker
	txn    *Txn        // the transaction the record belongs to; nil when produced outside one
	marker bool
	// milli is the entry's timestamp in Unix milliseconds, what Kafka keeps: the record's, or for a marker
	// the time the transaction ended (Kafka stamps a marker when it writes it).
	milli int64
}

// New returns an empty cluster.
func New() *Cluster {
	return &Cluster{changed: make(chan struct{}), topics: map[string]*topic{}, hide: map[hidden]int{}}
}

// Client returns a new reader of the cluster.
func (c *Cluster) Client() *Client { return &Client{c: c, assigned: map[string]map[int32]int64{}} }

var (
	_ feed.Cluster = (*Client)(nil)
	_ replay.Log   = (*Cluster)(nil)
)

// change wakes every waiter. It needs c.mu held.
func (c *Cluster) change() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// CreateTopic creates a topic with n empty partitions (again, after DeleteTopic).
func (c *Cluster) CreateTopic(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids++
	t := &topic{id: [16]byte{c.ids}}
	for range n {
		t.parts = append(t.parts, &partition{})
	}
	c.topics[name] = t
	c.change()
}

// DeleteTopic deletes a topic.
func (c *Cluster) DeleteTopic(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.topics, name)
	c.change()
}

// AddPartitions adds n empty partitions to a topic.
func (c *Cluster) AddPartitions(name string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.mustTopic(name)
	for range n {
		t.parts = append(t.parts, &partition{})
	}
	c.change()
}

// Partitions returns the number of partitions of a topic.
func (c *Cluster) Partitions(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mustTopic(name).parts)
}

func (c *Cluster) mustTopic(name string) *topic {
	t := c.topics[name]
	if t == nil {
		panic("memlog: no topic " + name)
	}
	return t
}

// Produce appends a record outside any transaction to its partition (rec.Partition, or the partition Kafka's
// default partitioner gives rec.Key when KeyPartition is set) and returns its offset. A zero Timestamp
// becomes now; the Timestamp is cut to the millisecond, as Kafka stores it; rec.Topic and Offset are set.
func (c *Cluster) Produce(name string, rec *kgo.Record) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.append(name, rec, nil)
}

// KeyPartition returns the partition Kafka's default partitioner (murmur2) puts key in, at the topic's
// current partition count.
func (c *Cluster) KeyPartition(name string, key string) int32 {
	n := c.Partitions(name)
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic(name).Partition(&kgo.Record{Key: []byte(key)}, n))
}

func (c *Cluster) append(name string, rec *kgo.Record, txn *Txn) int64 {
	t := c.mustTopic(name)
	if int(rec.Partition) >= len(t.parts) || rec.Partition < 0 {
		panic(fmt.Sprintf("memlog: topic %s has no partition %d", name, rec.Partition))
	}
	p := t.parts[rec.Partition]
	rec.Topic = name
	rec.Offset = int64(len(p.log))
	if rec.Timestamp.IsZero() {
		rec.Timestamp = time.Now()
	}
	rec.Timestamp = time.UnixMilli(rec.Timestamp.UnixMilli())
	p.log = append(p.log, entry{rec: rec, txn: txn, milli: rec.Timestamp.UnixMilli()})
	c.change()
	return rec.Offset
}

// Txn is a transaction of one producer: its records hold every partition's last stable offset back until
// Commit or Abort writes a marker to each partition it wrote to.
type Txn struct {
	c      *Cluster
	topic  string
	parts  map[int32]bool
	ended  bool
	commit bool
}

// Begin starts a transaction on a topic.
func (c *Cluster) Begin(name string) *Txn { return &Txn{c: c, topic: name, parts: map[int32]bool{}} }

// Produce appends a record of the transaction and returns its offset.
func (x *Txn) Produce(rec *kgo.Record) int64 {
	x.c.mu.Lock()
	defer x.c.mu.Unlock()
	x.parts[rec.Partition] = true
	return x.c.append(x.topic, rec, x)
}

// Commit ends the transaction: its records become visible.
func (x *Txn) Commit() { x.end(true) }

// Abort ends the transaction: its records are never visible.
func (x *Txn) Abort() { x.end(false) }

func (x *Txn) end(commit bool) {
	x.c.mu.Lock()
	defer x.c.mu.Unlock()
	x.ended, x.commit = true, commit
	t := x.c.mustTopic(x.topic)
	now := time.Now().UnixMilli()
	for _, p := range slices.Sorted(maps.Keys(x.parts)) {
		t.parts[p].log = append(t.parts[p].log, entry{marker: true, milli: now})
	}
	x.c.change()
}

// DeleteRecords moves a partition's low watermark up to before, as Kafka's DeleteRecords (or retention) does.
func (c *Cluster) DeleteRecords(name string, partition int32, before int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.mustTopic(name).parts[partition]
	p.low = max(p.low, min(before, int64(len(p.log))))
	c.change()
}

// SetDown makes every call fail with ErrDown (down) or work again.
func (c *Cluster) SetDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
	c.change()
}

// PausePolls makes Poll return nothing (paused) or work again: what the feed reads is held back, as a broker
// that has not answered the first fetch yet.
func (c *Cluster) PausePolls(paused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = paused
	c.change()
}

// HideOffsets makes the next n ListOffsets calls leave the partition out, as Kafka does for a partition whose
// leader is not available.
func (c *Cluster) HideOffsets(name string, partition int32, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hide[hidden{name, partition}] = n
}

// SetFetchDelay makes every Fetch take d before it answers, as a slow broker.
func (c *Cluster) SetFetchDelay(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fetchDelay = d
}

// Fetches returns how many Fetch calls were answered.
func (c *Cluster) Fetches() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fetches
}

// lso is the partition's last stable offset: the first offset of an open transaction, else its high
// watermark. An open transaction whose first records were deleted holds it at the low watermark, even when
// all of its records were and records follow them: Kafka keeps the first offset of every open transaction,
// and answers the later of that and the log start.
func (p *partition) lso() int64 {
	for i, e := range p.log {
		if e.txn != nil && !e.txn.ended {
			return max(int64(i), p.low)
		}
	}
	return int64(len(p.log))
}

// visible says a read_committed reader gets e as a record.
func (e entry) visible() bool { return e.rec != nil && (e.txn == nil || e.txn.commit) }

// read returns what a read_committed fetch at offset off (at least the low watermark) gets: the visible
// records, the first and the next offset of what it covered that a reader sees (records and markers;
// -1 when none), and the offset to read next.
func (p *partition) read(off int64) (recs []*kgo.Record, first, last, next int64) {
	first, last = -1, -1
	end := min(p.lso(), off+maxFetch)
	for i := off; i < end; i++ {
		e := p.log[i]
		if e.visible() {
			recs = append(recs, e.rec)
		}
		if e.visible() || e.marker {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	return recs, first, last, max(end, off)
}

// Metadata implements feed.Cluster.
func (cl *Client) Metadata(_ context.Context, topics []string) (map[string]feed.TopicMeta, error) {
	c := cl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, ErrDown
	}
	out := map[string]feed.TopicMeta{}
	for _, name := range topics {
		if t := c.topics[name]; t != nil && len(t.parts) > 0 {
			ps := make([]int32, len(t.parts))
			for i := range ps {
				ps[i] = int32(i)
			}
			out[name] = feed.TopicMeta{ID: t.id, Partitions: ps}
		}
	}
	return out, nil
}

// ListOffsets implements feed.Cluster.
func (cl *Client) ListOffsets(_ context.Context, kind feed.OffsetKind, topics ...string) (map[string]map[int32]int64, error) {
	c := cl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, ErrDown
	}
	out := map[string]map[int32]int64{}
	for _, name := range topics {
		t := c.topics[name]
		if t == nil {
			return nil, fmt.Errorf("memlog: list offsets: unknown topic %s", name)
		}
		m := map[int32]int64{}
		for i, p := range t.parts {
			if h := (hidden{name, int32(i)}); c.hide[h] > 0 {
				c.hide[h]--
				continue
			}
			switch kind {
			case feed.LogStart:
				m[int32(i)] = p.low
			case feed.LastStable:
				m[int32(i)] = p.lso()
			default:
				m[int32(i)] = int64(len(p.log))
			}
		}
		out[name] = m
	}
	return out, nil
}

// OffsetsAfter implements feed.Cluster, as Kafka lists offsets by time for kadm (read_uncommitted): the first
// offset from the low watermark on whose timestamp is at or after t's millisecond, counting records of open
// and aborted transactions, and transaction markers (stamped when their transaction ended, so a marker can
// come before records stamped earlier). A partition with no such offset answers its high watermark, as kadm
// does.
func (cl *Client) OffsetsAfter(_ context.Context, name string, at time.Time) (map[int32]int64, error) {
	c := cl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return nil, ErrDown
	}
	t := c.topics[name]
	if t == nil {
		return nil, fmt.Errorf("memlog: offsets after: unknown topic %s", name)
	}
	out := map[int32]int64{}
	milli := at.UnixMilli()
	for i, p := range t.parts {
		out[int32(i)] = int64(len(p.log))
		for j := p.low; j < int64(len(p.log)); j++ {
			if p.log[j].milli >= milli {
				out[int32(i)] = j
				break
			}
		}
	}
	return out, nil
}

// Assign implements feed.Cluster. A partition already assigned keeps its offset, as franz-go's
// AddConsumePartitions does.
func (cl *Client) Assign(parts map[string]map[int32]int64) { cl.assign(parts, false) }

// Reassign implements feed.Cluster.
func (cl *Client) Reassign(parts map[string]map[int32]int64) { cl.assign(parts, true) }

func (cl *Client) assign(parts map[string]map[int32]int64, again bool) {
	c := cl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, ps := range parts {
		if cl.assigned[name] == nil {
			cl.assigned[name] = map[int32]int64{}
		}
		for p, off := range ps {
			if _, ok := cl.assigned[name][p]; !ok || again {
				cl.assigned[name][p] = off
			}
		}
	}
	c.change()
}

// Poll implements feed.Cluster: it waits until an assigned partition has something stable past its next
// offset, and returns what it has. An offset below the low watermark reads from the low watermark, as
// franz-go does when a fetch is out of range (TestMemlogTellsTheTruth/retention).
func (cl *Client) Poll(ctx context.Context) ([]feed.Fetched, error) {
	c := cl.c
	for {
		c.mu.Lock()
		if cl.closed {
			c.mu.Unlock()
			return nil, feed.ErrClosed
		}
		var out []feed.Fetched
		if !c.down && !c.paused {
			for name, ps := range cl.assigned {
				t := c.topics[name]
				if t == nil {
					continue
				}
				for pn, off := range ps {
					if int(pn) >= len(t.parts) {
						continue
					}
					p := t.parts[pn]
					if off == feed.AtLogStart || off < p.low {
						off = p.low
					}
					if off >= p.lso() {
						ps[pn] = off
						continue
					}
					recs, first, last, next := p.read(off)
					ps[pn] = next
					f := feed.Fetched{Topic: name, Partition: pn, Records: recs, First: first, Next: -1, LastStable: p.lso(), LogStart: p.low}
					if last >= 0 {
						f.Next = last + 1
					}
					if first < 0 {
						// Nothing a reader sees (aborted records only): Kafka answers no records either.
						continue
					}
					out = append(out, f)
				}
			}
		}
		wait := c.changed
		c.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close implements feed.Cluster.
func (cl *Client) Close() {
	cl.c.mu.Lock()
	defer cl.c.mu.Unlock()
	cl.closed = true
	cl.c.change()
}

// Fetch implements replay.Log.
func (c *Cluster) Fetch(ctx context.Context, name string, partition int32, offset int64) ([]*kgo.Record, int64, error) {
	c.mu.Lock()
	delay := c.fetchDelay
	c.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, offset, ctx.Err()
		}
	}
	deadline := time.NewTimer(fetchWait)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		c.fetches++
		if c.down {
			c.mu.Unlock()
			return nil, offset, ErrDown
		}
		t := c.topics[name]
		if t == nil || int(partition) >= len(t.parts) {
			c.mu.Unlock()
			return nil, offset, fmt.Errorf("memlog: fetch: unknown partition %s/%d", name, partition)
		}
		p := t.parts[partition]
		if offset < p.low {
			c.mu.Unlock()
			return nil, offset, &replay.OutOfRangeError{Partition: partition, Offset: offset}
		}
		if offset < p.lso() {
			recs, _, _, next := p.read(offset)
			c.mu.Unlock()
			return recs, next, nil
		}
		wait := c.changed
		c.mu.Unlock()
		select {
		case <-wait:
		case <-deadline.C:
			return nil, offset, nil
		case <-ctx.Done():
			return nil, offset, ctx.Err()
		}
	}
}
