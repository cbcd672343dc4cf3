package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// KafkaLog is the Log of a Kafka cluster: a few long-lived clients that send each fetch as a FetchRequest for
// an explicit offset to the partition's leader and decode the answer themselves (read_committed). They keep
// no consumer state between fetches, so nothing done for one resume can stall another, and a fetch costs one
// round trip, not a new client. A broker answers the requests of one connection one after the other, and a
// client has one connection to a broker for fetches: the fetches of a partition go through one of
// fetchClients clients (partition mod fetchClients), so that the first fetches of a resume's partitions, made
// at once, are answered at once rather than in turn.
type KafkaLog struct {
	cls          []*kgo.Client
	decompressor kgo.Decompressor
	// recordBytes is, per topic, the bytes a record took in the last fetch that returned any: a fetch asks
	// for about a block's worth (fetchRecords of them), not for a megabyte of records the block does not need
	// and whose decoding a resume would wait for.
	recordBytes sync.Map // topic -> *atomic.Int64
}

// fetchClients is how many clients (connections to each broker) a KafkaLog fetches through.
const fetchClients = 4

// Fetch sizes. The broker always returns at least one whole batch, whatever these say.
const (
	fetchMaxWait  = 250 * time.Millisecond
	fetchMaxBytes = 8 << 20
	// A partition's share of a fetch: fetchRecords records of the topic's last known size, within these bounds
	// (the first fetch of a topic asks for fetchPartitionFirst).
	fetchRecords        = 1024
	fetchPartitionMin   = 32 << 10
	fetchPartitionMax   = 1 << 20
	fetchPartitionFirst = 128 << 10
)

// partitionBytes is what a fetch of topic asks of its partition.
func (l *KafkaLog) partitionBytes(topic string) int32 {
	v, ok := l.recordBytes.Load(topic)
	if !ok {
		return fetchPartitionFirst
	}
	return int32(min(max(v.(*atomic.Int64).Load()*fetchRecords, fetchPartitionMin), fetchPartitionMax))
}

// learn notes the size of topic's records from a fetch answer of n bytes holding records records.
func (l *KafkaLog) learn(topic string, n, records int) {
	if records == 0 {
		return
	}
	v, _ := l.recordBytes.LoadOrStore(topic, new(atomic.Int64))
	v.(*atomic.Int64).Store(int64(n/records + 1))
}

// NewKafkaLog returns the Log of the cluster kafkaOpts (brokers, TLS, SASL) reach. Close closes it.
func NewKafkaLog(kafkaOpts ...kgo.Opt) (*KafkaLog, error) {
	l := &KafkaLog{decompressor: kgo.DefaultDecompressor()}
	for range fetchClients {
		cl, err := kgo.NewClient(kafkaOpts...)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("replay: kafka client: %w", err)
		}
		l.cls = append(l.cls, cl)
	}
	return l, nil
}

// Close closes the clients.
func (l *KafkaLog) Close() {
	for _, cl := range l.cls {
		cl.Close()
	}
}

// client returns the client the fetches of partition go through.
func (l *KafkaLog) client(partition int32) *kgo.Client {
	return l.cls[int(partition)%len(l.cls)]
}

// errors of a fetch that a fresh look at the metadata can fix: the leader moved, or the topic's id changed.
var staleMetadata = []error{
	kerr.NotLeaderForPartition, kerr.UnknownTopicOrPartition, kerr.UnknownTopicID, kerr.FencedLeaderEpoch,
	kerr.LeaderNotAvailable, kerr.UnknownLeaderEpoch, kerr.InconsistentTopicID, kerr.ReplicaNotAvailable,
}

// retriable says a fetch that failed with err is worth sending again: the metadata it used is stale, or its
// connection broke (a broker restart, a reset, an idle connection a load balancer dropped), in which case the
// client dials again. A fetch changes nothing on the broker, so sending it twice is harmless.
func retriable(err error) bool {
	if slices.ContainsFunc(staleMetadata, func(e error) bool { return errors.Is(err, e) }) {
		return true
	}
	if errors.Is(err, kgo.ErrClientClosed) {
		return false // the gateway is stopping
	}
	// A reset, a broken pipe or a refused dial is a net.Error (a *net.OpError, or the syscall.Errno inside it);
	// a connection the broker closed mid-answer ends in EOF.
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Fetch implements Log.
func (l *KafkaLog) Fetch(ctx context.Context, topic string, partition int32, offset int64) ([]*kgo.Record, int64, error) {
	return l.FetchMax(ctx, topic, partition, offset, 0)
}

// FetchMax is Fetch asking for about maxBytes of the partition (zero: a block's worth of the topic's records
// as the last fetch found them).
func (l *KafkaLog) FetchMax(ctx context.Context, topic string, partition int32, offset int64, maxBytes int32) ([]*kgo.Record, int64, error) {
	if maxBytes <= 0 {
		maxBytes = l.partitionBytes(topic)
	}
	var last error
	for attempt := range 4 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, offset, ctx.Err()
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		recs, next, err := l.fetchOnce(ctx, topic, partition, offset, maxBytes, attempt > 0)
		if err == nil || ctx.Err() != nil || !retriable(err) {
			return recs, next, err
		}
		last = err
	}
	return nil, offset, last
}

func (l *KafkaLog) fetchOnce(ctx context.Context, topic string, partition int32, offset int64, maxBytes int32, refresh bool) ([]*kgo.Record, int64, error) {
	cl := l.client(partition)
	leader, topicID, err := l.leader(ctx, cl, topic, partition, refresh)
	if err != nil {
		return nil, offset, err
	}
	f := []FirstFetch{{Partition: partition, Offset: offset, MaxBytes: maxBytes}}
	l.fetchFrom(ctx, cl, leader, topic, topicID, f)
	return f[0].Recs, f[0].Next, f[0].Err
}

// FetchFirsts implements batchLog: one FetchRequest to each leader of the partitions of fs, through the client
// of the leader's number (the clients' connections to a broker are the same; the others' fetches follow).
func (l *KafkaLog) FetchFirsts(ctx context.Context, topic string, fs []FirstFetch) {
	t, err := l.topicMeta(ctx, l.cls[0], topic, false)
	if err != nil {
		for i := range fs {
			fs[i].Next, fs[i].Err = fs[i].Offset, err
		}
		return
	}
	byLeader := map[int32][]int{} // leader -> indexes in fs
	for i := range fs {
		leader, err := partitionLeader(t, fs[i].Partition)
		if err != nil {
			fs[i].Next, fs[i].Err = fs[i].Offset, err
			continue
		}
		byLeader[leader] = append(byLeader[leader], i)
	}
	topicID := t.TopicID
	var wg sync.WaitGroup
	for leader, idx := range byLeader {
		wg.Go(func() {
			batch := make([]FirstFetch, len(idx))
			for j, i := range idx {
				batch[j] = fs[i]
			}
			l.fetchFrom(ctx, l.cls[int(leader)%len(l.cls)], leader, topic, topicID, batch)
			for j, i := range idx {
				fs[i] = batch[j]
			}
		})
	}
	wg.Wait()
}

// fetchFrom sends the fetches of fs, all led by leader, as one FetchRequest and decodes each partition's answer
// into its FirstFetch.
func (l *KafkaLog) fetchFrom(ctx context.Context, cl *kgo.Client, leader int32, topic string, topicID [16]byte, fs []FirstFetch) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(fetchMaxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = fetchMaxBytes
	req.IsolationLevel = 1 // read_committed
	req.SessionEpoch = -1  // no fetch session: every fetch stands alone
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	for i := range fs {
		fs[i].Next, fs[i].Err = fs[i].Offset, nil
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = fs[i].Partition
		rp.FetchOffset = fs[i].Offset
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rp.PartitionMaxBytes = fs[i].MaxBytes
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	fail := func(err error) {
		for i := range fs {
			fs[i].Err = fmt.Errorf("replay: fetch %s/%d at %d: %w", topic, fs[i].Partition, fs[i].Offset, err)
		}
	}
	kresp, err := cl.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		fail(err)
		return
	}
	resp, _ := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		fail(err)
		return
	}
	for i := range fs {
		fs[i].Err = fmt.Errorf("replay: fetch %s/%d at %d: %w", topic, fs[i].Partition, fs[i].Offset, kerr.UnknownTopicOrPartition)
	}
	for t := range resp.Topics {
		for j := range resp.Topics[t].Partitions {
			got := &resp.Topics[t].Partitions[j]
			for i := range fs {
				if fs[i].Partition == got.Partition {
					fs[i].Recs, fs[i].Next, fs[i].Err = l.decode(ctx, topic, got, fs[i].Offset)
				}
			}
		}
	}
}

// decode returns the records of a partition's fetch answer from offset on and the offset to fetch next.
func (l *KafkaLog) decode(ctx context.Context, topic string, got *kmsg.FetchResponseTopicPartition, offset int64) ([]*kgo.Record, int64, error) {
	partition := got.Partition
	if err := kerr.ErrorForCode(got.ErrorCode); err != nil {
		if errors.Is(err, kerr.OffsetOutOfRange) && l.belowStart(ctx, topic, partition, offset) {
			return nil, offset, &OutOfRangeError{Partition: partition, Offset: offset}
		}
		return nil, offset, fmt.Errorf("replay: fetch %s/%d at %d: %w", topic, partition, offset, err)
	}
	fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset: offset, IsolationLevel: kgo.ReadCommitted(), Topic: topic, Partition: partition,
	}, got, l.decompressor, nil)
	if fp.Err != nil {
		return nil, offset, fmt.Errorf("replay: decode %s/%d at %d: %w", topic, partition, offset, fp.Err)
	}
	l.learn(topic, len(got.RecordBatches), len(fp.Records))
	return fp.Records, max(next, offset), nil
}

// leader returns the partition's leader and the topic's id, from metadata no older than a minute (refresh:
// from the broker).
func (l *KafkaLog) leader(ctx context.Context, cl *kgo.Client, topic string, partition int32, refresh bool) (int32, [16]byte, error) {
	t, err := l.topicMeta(ctx, cl, topic, refresh)
	if err != nil {
		return -1, [16]byte{}, err
	}
	leader, err := partitionLeader(t, partition)
	return leader, t.TopicID, err
}

// topicMeta returns topic's metadata, no older than a minute (refresh: from the broker).
func (l *KafkaLog) topicMeta(ctx context.Context, cl *kgo.Client, topic string, refresh bool) (*kmsg.MetadataResponseTopic, error) {
	limit := time.Minute
	if refresh {
		limit = time.Millisecond
	}
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	md, err := cl.RequestCachedMetadata(ctx, req, limit)
	if err != nil {
		return nil, fmt.Errorf("replay: metadata of %s: %w", topic, err)
	}
	for i := range md.Topics {
		t := &md.Topics[i]
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return nil, fmt.Errorf("replay: metadata of %s: %w", topic, err)
		}
		return t, nil
	}
	return nil, fmt.Errorf("replay: metadata of %s: %w", topic, kerr.UnknownTopicOrPartition)
}

// partitionLeader returns the leader of partition in t.
func partitionLeader(t *kmsg.MetadataResponseTopic, partition int32) (int32, error) {
	for _, p := range t.Partitions {
		if p.Partition == partition {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, fmt.Errorf("replay: metadata of %s/%d: %w", *t.Topic, partition, err)
			}
			return p.Leader, nil
		}
	}
	return -1, fmt.Errorf("replay: metadata of %s/%d: %w", *t.Topic, partition, kerr.UnknownTopicOrPartition)
}

// belowStart says offset is below the partition's low watermark. An out-of-range answer does not say which
// side the offset is on (the broker sends no log start with it): past the end is not retention.
func (l *KafkaLog) belowStart(ctx context.Context, topic string, partition int32, offset int64) bool {
	starts, err := kadm.NewClient(l.cls[0]).ListStartOffsets(ctx, topic)
	if err != nil {
		return true // as before: the stream resyncs rather than waiting on an offset it may never get
	}
	o, ok := starts.Lookup(topic, partition)
	return !ok || o.Err != nil || offset < o.Offset
}
