package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/services/gateway/internal/checkpoint"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
	"github.com/ssegate/ssegate/services/gateway/internal/ring"
)

// Topic is what a stream reads: the topic's ring, and Kafka for what the ring does not hold.
type Topic struct {
	// Name is the Kafka topic.
	Name string
	// Ring is the topic's ring. Required.
	Ring *ring.Ring
	// Partitions returns the topic's partitions, to reject ids naming others. Nil means any partition.
	Partitions func() []int32
	// Watermarks returns the partitions' low and high watermarks, from a cache no older than maxAge. Nil
	// means positions the ring does not hold cannot be served.
	Watermarks func(ctx context.Context, maxAge time.Duration) (map[int32]feed.Watermarks, error)
	// OffsetsAfter returns, per partition, the first offset at or after a time, for from=<time>.
	OffsetsAfter func(ctx context.Context, t time.Time) (map[int32]int64, error)
	// Replay reads what the ring does not hold back from Kafka. Nil means it cannot be served.
	Replay *replay.Pool
	// KeysAnyPartition says records of one key may be in any partition (the topic is produced with a
	// partitioner other than Kafka's default), so key-filtered streams cover every partition. By default a
	// key-filtered stream reads, and lists in its ids, only the partitions Kafka's default partitioner
	// (murmur2) puts its keys in.
	KeysAnyPartition bool
	// Conflate, when not zero, conflates every stream of the topic at least at this interval (the
	// topic-conflate setting; a stream's conflate parameter may ask for a longer one), see conflate.go.
	Conflate time.Duration
	// SlowConflate, when not zero, is the interval a stream of the topic that is not conflated goes on
	// conflated at once it falls behind the ring (the topic-slow-conflate setting): it then catches up with
	// the latest record of each key rather than every record it missed, and keeps up from then on.
	SlowConflate time.Duration
	// Format is how the topic's values are written into frames read back from Kafka; it must be the feed's,
	// so that those frames are the bytes the ring's were. Nil means feed.Plain(feed.ValueAuto).
	Format *feed.Format
	// Newest returns the ring's head sequence after the latest publish of records and the Unix-millisecond
	// timestamp of its newest record (feed.Topic.Newest), for the delivery lag. Nil means it is not measured.
	Newest func() (seq uint64, ts int64)
	// sampled is the last publish whose delivery lag was reported (see conn.sampleDelivery).
	sampled sampled
	// Feed is the feed's view of the topic: whether it exists yet, and its partitions' generation. Nil means
	// the topic exists and its partitions never change.
	Feed *feed.Topic

	// Resolve returns the position a compact (v2) id says, reading its checkpoint from Kafka when needed
	// (checkpoint.Resolver.Resolve); a checkpoint of a topic whose Kafka id is not topicID is invalid (zero:
	// not checked). Nil means compact ids are invalid here.
	Resolve func(ctx context.Context, id string, topicID [16]byte) (position.Vector, error)
	// Cached is Resolve without Kafka and without the topic id check, for the ring's own frames: false when
	// the checkpoint is not at hand (checkpoint.Resolver.Cached). Nil means never.
	Cached func(id string) (position.Vector, bool)
}

// kafkaID returns the topic's Kafka id as the feed knows it (zero without a feed).
func (t *Topic) kafkaID() [16]byte {
	if t.Feed == nil {
		return [16]byte{}
	}
	return t.Feed.ID()
}

// parseID returns the position of a client's id, v1 or compact. A compact id that cannot be resolved is an
// error wrapping checkpoint.ErrInvalid or checkpoint.ErrGone, or errReplay when Kafka could not be read.
func (t *Topic) parseID(ctx context.Context, id string, topicID [16]byte) (position.Vector, error) {
	if !position.IsCompact(id) {
		return position.Parse(id)
	}
	if t.Resolve == nil {
		return position.Vector{}, fmt.Errorf("%w: this gateway does not read compact ids", checkpoint.ErrInvalid)
	}
	v, err := t.Resolve(ctx, id, topicID)
	if err != nil && !errors.Is(err, checkpoint.ErrInvalid) && !errors.Is(err, checkpoint.ErrGone) {
		return position.Vector{}, fmt.Errorf("%w: %w", errReplay, err)
	}
	return v, err
}

// frameIDOf returns the position in the id line of a frame of this topic's ring: v1, or compact (this pod's
// own checkpoints are at hand; one evicted from the cache is read back from Kafka). The frame may be of the
// topic before it was deleted and created again: its position is still what the client has, and the resume
// that follows tells the client what that means (an ahead resync), as for a v1 id.
func (t *Topic) frameIDOf(ctx context.Context, frame []byte) (position.Vector, error) {
	line := frame[len("id: "):bytes.IndexByte(frame, '\n')]
	if !position.IsCompact(string(line)) {
		return frameID(frame), nil
	}
	if t.Cached != nil {
		if v, ok := t.Cached(string(line)); ok {
			return v, nil
		}
	}
	v, err := t.parseID(ctx, string(line), [16]byte{})
	if err != nil && !errors.Is(err, errReplay) {
		return position.Vector{}, fmt.Errorf("%w: the ring's id %s: %w", errReplay, line, err)
	}
	return v, err
}

// NewTopic returns what streams of topic name read: f's ring and partitions, Kafka through f and rp.
func NewTopic(f *feed.Feed, name string, rp *replay.Pool, keysAnyPartition bool) *Topic {
	ft := f.Topic(name)
	return &Topic{
		Name:       name,
		Ring:       ft.Ring(),
		Partitions: ft.Partitions,
		Watermarks: func(ctx context.Context, maxAge time.Duration) (map[int32]feed.Watermarks, error) {
			return f.Watermarks(ctx, name, maxAge)
		},
		OffsetsAfter: func(ctx context.Context, at time.Time) (map[int32]int64, error) {
			return f.OffsetsAfter(ctx, name, at)
		},
		Replay:           rp,
		KeysAnyPartition: keysAnyPartition,
		Feed:             ft,
		Newest:           ft.Newest,
	}
}

// epoch returns the topic's recreation epoch (see feed.Topic.Epoch).
func (t *Topic) epoch() uint64 {
	if t.Feed == nil {
		return 0
	}
	return t.Feed.Epoch()
}

// generation returns the topic's partition generation (see feed.Topic.Generation).
func (t *Topic) generation() uint64 {
	if t.Feed == nil {
		return 0
	}
	return t.Feed.Generation()
}

// keyPartitions returns the partitions a key-filtered stream covers, ascending, or nil when p has no key
// filter.
func keyPartitions(t *Topic, p *kept) []int32 {
	if len(p.Keys) == 0 {
		return nil
	}
	var parts []int32
	if t.Partitions != nil {
		parts = t.Partitions()
	}
	if t.KeysAnyPartition || len(parts) == 0 {
		return parts
	}
	kp := kgo.StickyKeyPartitioner(nil).ForTopic(t.Name)
	var out []int32
	for k := range p.Keys {
		out = append(out, int32(kp.Partition(&kgo.Record{Key: []byte(k)}, len(parts))))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// keyPartitionsOf returns the partitions of ids (ascending) that a key of p can be in: with Kafka's default
// partitioner, the partitions a key goes to under some partition count up to the topic's (or past the highest
// partition in ids: a partition this pod has not discovered yet). Every partition of ids with
// KeysAnyPartition.
func keyPartitionsOf(t *Topic, p *kept, ids []int32) []int32 {
	if t.KeysAnyPartition || len(ids) == 0 {
		return ids
	}
	n := int32(0)
	if t.Partitions != nil {
		n = int32(len(t.Partitions()))
	}
	n = max(n, ids[len(ids)-1]+1)
	kp := kgo.StickyKeyPartitioner(nil).ForTopic(t.Name)
	var out []int32
	for _, q := range ids {
	keys:
		for k := range p.Keys {
			rec := &kgo.Record{Key: []byte(k)}
			for count := q + 1; count <= n; count++ {
				if int32(kp.Partition(rec, int(count))) == q {
					out = append(out, q)
					break keys
				}
			}
		}
	}
	return out
}

// partitionsOf returns v's partitions, ascending.
func partitionsOf(v position.Vector) []int32 {
	out := make([]int32, 0, v.Len())
	for i := range v.Len() {
		out = append(out, v.At(i).Partition)
	}
	return out
}

// unionParts returns the partitions in a or b, ascending; a and b are ascending.
func unionParts(a, b []int32) []int32 {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// union returns the partitions of a and b, ascending.
func union(a, b position.Vector) []int32 {
	var out []int32
	for _, v := range []position.Vector{a, b} {
		for i := range v.Len() {
			out = append(out, v.At(i).Partition)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// setOrDrop sets p's offset in v, or removes p when off is -1 (nothing there).
func setOrDrop(v position.Vector, p int32, off int64) position.Vector {
	if off >= 0 {
		v.Set(p, off)
		return v
	}
	var keep []int32
	for i := range v.Len() {
		if q := v.At(i).Partition; q != p {
			keep = append(keep, q)
		}
	}
	return v.Restrict(keep)
}

// Position returns where a from=latest stream of the topic would start now: the ring's head, never before the
// partitions' last stable offsets at start.
func (t *Topic) Position() position.Vector {
	_, id := t.Ring.Start(nil)
	var head position.Vector
	if len(id) > 0 {
		var err error
		if head, err = position.Parse(string(id)); err != nil {
			panic("stream: the ring holds a malformed head id: " + err.Error())
		}
	}
	return latest(t, head)
}

// IDAfter returns the v1 id of the position right after the record at offset of partition: a stream opened
// or resumed from it gets what comes after that record in its partition, and what comes after the topic's
// head now in the others (the id a client that published the record resumes from to read its own write).
func (t *Topic) IDAfter(partition int32, offset int64) string {
	pos := t.Position()
	pos.Set(partition, offset)
	return pos.String()
}

// autoFormat is the Format of a Topic without one.
var autoFormat = feed.Plain(feed.ValueAuto)

func (t *Topic) format() *feed.Format {
	if t.Format == nil {
		return autoFormat
	}
	return t.Format
}
