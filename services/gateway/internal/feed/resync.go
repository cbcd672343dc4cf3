package feed

import (
	"encoding/json"

	"github.com/ssegate/ssegate/pkg/sse"
)

// Resync reasons, the "reason" of an "event: resync" frame (EventResync).
const (
	// ResyncRetention: retention (or DeleteRecords) removed offsets the client had not had.
	ResyncRetention = "retention"
	// ResyncAhead: the client's position is at or past the partition's end (the topic was created again, or
	// the id is of another cluster).
	ResyncAhead = "ahead"
	// ResyncInvalidID: the client's id could not be read.
	ResyncInvalidID = "invalid-id"
)

// ResyncData is the JSON data of an "event: resync" frame: the streams' own (a resume that cannot be served
// exactly) and the feed's (offsets retention removed before the pod read them, see Topic.gap).
type ResyncData struct {
	Reason string `json:"reason"`
	// Topic is the topic the resync is about: in a stream of several topics, each topic's resync is its own.
	Topic string `json:"topic"`
	// Error says what was wrong with an invalid id.
	Error      string            `json:"error,omitempty"`
	Partitions []ResyncPartition `json:"partitions"`
}

// ResyncPartition describes one partition a resync is about.
type ResyncPartition struct {
	Partition int32 `json:"partition"`
	// Requested is the offset the client needed next.
	Requested int64 `json:"requested"`
	// LowWatermark is the partition's oldest stored offset.
	LowWatermark int64 `json:"low_watermark"`
	// ResumesAt is the offset of the next record the client gets in this partition.
	ResumesAt int64 `json:"resumes_at"`
	// Skipped is how many offsets the client will never get (records, plus any transaction markers).
	Skipped int64 `json:"skipped"`
}

// gap stages, ahead of a fetch's records, the resync of the offsets [next, logStart) of a partition that
// retention passed before the feed read them. franz-go then resumes reading at the log start with no more
// than a warning, and every live stream would skip those records without a word; the resync frame tells
// them which, and moves the position to logStart-1, so that its id (and every later one) says what the
// client holds: everything before the log start is gone. The caller holds mu.
func (t *Topic) gap(ps *partition, partition int32, next, logStart int64) {
	t.pos.Set(partition, logStart-1)
	t.id = t.appendFrameID(t.id[:0])
	skipped := logStart - next
	data, _ := json.Marshal(ResyncData{Reason: ResyncRetention, Topic: t.name, Partitions: []ResyncPartition{{ //nolint:errchkjson // plain structs
		Partition: partition, Requested: next, LowWatermark: logStart, ResumesAt: logStart, Skipped: skipped,
	}}})
	// Staged as the gateway's own frame: streams know it by that, and let it through every filter, whatever
	// event type a record may carry.
	t.batch.AddOwn(sse.AppendEventBytes(t.batch.Buf(), t.id, []byte(EventResync), data), partition, logStart-1)
	ps.gaps.Add(1)
	ps.skipped.Add(skipped)
	t.log.Warn("retention removed records before the gateway read them; live streams get a resync",
		"topic", t.name, "partition", partition, "from", next, "to", logStart, "skipped", skipped)
}

// Gaps calls fn with each partition's resyncs the feed published (see gap) and the offsets they skipped.
// Like Progress, it reads the topics' partition snapshots and atomic counters, never a topic's lock: a
// metrics scrape does not wait for the fetch loop to frame a poll, and fn runs outside any lock.
func (f *Feed) Gaps(fn func(topic string, partition int32, resyncs, skipped int64)) {
	for _, name := range f.names {
		v := f.topics[name].view.Load()
		if v == nil {
			continue
		}
		for _, p := range v.parts {
			if n := p.st.gaps.Load(); n > 0 {
				fn(name, p.id, n, p.st.skipped.Load())
			}
		}
	}
}
