package txn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicConfigs are the configs EnsureTopic gives a checkpoint topic it creates. Compaction alone is not
// enough: the log cleaner never touches a partition's active segment, which by default rolls only after
// 7 days or 1 GiB, so a busy checkpoint topic (a record and a transaction marker per commit, ten commits a
// second per busy source) would keep gigabytes that every start reads. Hence:
//
//   - segment.ms (10 minutes) and segment.bytes (64 MiB) bound the active segment, so at most that much
//     is never compacted;
//   - min.cleanable.dirty.ratio 0.1 (default 0.5) starts the cleaner once a tenth of the log is not
//     compacted, so the dirty part stays small however many sources share the topic;
//   - delete.retention.ms (1 hour, default 1 day) is how long the cleaner keeps tombstones and the
//     transaction markers of cleaned segments: a marker per commit would otherwise pile up for a day. A
//     reader that takes longer than this to read the topic from its start could miss a tombstone; the
//     checkpoint store reads it once, in seconds.
var TopicConfigs = map[string]string{
	"cleanup.policy":            "compact",
	"segment.ms":                "600000",
	"segment.bytes":             "67108864",
	"min.cleanable.dirty.ratio": "0.1",
	"delete.retention.ms":       "3600000",
}

// EnsureTopic creates the checkpoint topic with TopicConfigs (one partition, the cluster's default
// replication) unless it exists. An existing topic is left as it is.
func EnsureTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	configs := make(map[string]*string, len(TopicConfigs))
	for k, v := range TopicConfigs {
		configs[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, 1, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("txn: create checkpoint topic %s: %w", topic, err)
	}
	return nil
}

// ReadCheckpoint reads topic from its start with read_committed and returns the last value for key.
//
// Where to stop: every partition is read until a record at or past its high watermark as it was when
// reading began. Control records (transaction markers) are kept so that this works when the log ends with
// a marker. The read waits for transactions that were open at that moment (other sources share the topic)
// to end, which takes at most their commit interval, or the transaction timeout for a crashed one.
func ReadCheckpoint(ctx context.Context, opts []kgo.Opt, topic, key string) (Checkpoint, error) {
	acl, err := kgo.NewClient(opts...)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: new client: %w", ErrCheckpoint, err)
	}
	adm := kadm.NewClient(acl)
	defer adm.Close()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: end offsets of %s: %w", ErrCheckpoint, topic, err)
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	var cp Checkpoint
	if len(parts) == 0 {
		return cp, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{}, opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return cp, fmt.Errorf("%w: new client: %w", ErrCheckpoint, err)
	}
	defer cl.Close()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return cp, fmt.Errorf("%w: reading %s: %w", ErrCheckpoint, topic, err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			ferr = fmt.Errorf("%w: fetch %s/%d: %w", ErrCheckpoint, t, p, err)
		})
		if ferr != nil {
			return cp, ferr
		}
		var derr error
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := want[r.Partition]
			if !ok || r.Offset >= end {
				delete(want, r.Partition)
				return
			}
			if r.Offset == end-1 {
				delete(want, r.Partition)
			}
			if r.Attrs.IsControl() || string(r.Key) != key {
				return
			}
			if r.Value == nil {
				cp = Checkpoint{} // a tombstone resets the source
				return
			}
			var c Checkpoint
			if err := json.Unmarshal(r.Value, &c); err != nil {
				derr = fmt.Errorf("%w: %s/%d@%d: %w", ErrCheckpoint, topic, r.Partition, r.Offset, err)
				return
			}
			c.Found = true
			cp = c
		})
		if derr != nil {
			return cp, derr
		}
	}
	return cp, nil
}
