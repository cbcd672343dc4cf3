package app

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
	"github.com/ssegate/ssegate/services/gateway/internal/stream"
)

// telemetry owns the OpenTelemetry meter provider whose Prometheus exporter serves /metrics.
//
// The hot paths only bump atomics (stream.Stats, ring and feed state); every instrument here is observable and
// reads those at scrape time, so a scrape costs the connections nothing.
type telemetry struct {
	provider *sdkmetric.MeterProvider
	handler  http.Handler
	// refused counts streams refused before they start, for every reason (auth, origin, limits).
	refused metric.Int64ObservableCounter
}

func newTelemetry(res *resource.Resource, f *feed.Feed, stats map[string]*stream.Stats, replays *replay.Pool, streams *stream.Server) (*telemetry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	m := mp.Meter("github.com/ssegate/ssegate/services/gateway")

	open, err1 := m.Int64ObservableGauge("ssegate.connections.open", metric.WithDescription("SSE connections open now"))
	frames, err2 := m.Int64ObservableCounter("ssegate.frames.written", metric.WithDescription("SSE frames written to clients"))
	written, err3 := m.Int64ObservableCounter("ssegate.bytes.written", metric.WithDescription("Bytes written to SSE clients"))
	closed, err4 := m.Int64ObservableCounter("ssegate.connections.closed", metric.WithDescription("SSE connections closed, by reason"))
	lag, err5 := m.Int64ObservableGauge("ssegate.consumer.lag", metric.WithDescription("Records between the last one read and the partition's last stable offset"))
	ringBytes, err6 := m.Int64ObservableGauge("ssegate.ring.bytes", metric.WithDescription("Frame bytes held in the topic's ring"))
	ringFrames, err7 := m.Int64ObservableGauge("ssegate.ring.frames", metric.WithDescription("Frames held in the topic's ring"))
	ringOldest, err8 := m.Int64ObservableGauge("ssegate.ring.oldest.offset", metric.WithDescription("Oldest offset from which the ring holds every record of the partition"))
	evicted, err9 := m.Int64ObservableCounter("ssegate.ring.evicted", metric.WithDescription("Frames evicted from the topic's ring"))
	resumes, err10 := m.Int64ObservableCounter("ssegate.resumes", metric.WithDescription("Resumes and catch-ups, by source: ring (memory alone) or kafka (a replay read)"))
	resyncs, err11 := m.Int64ObservableCounter("ssegate.resyncs", metric.WithDescription("Resync events sent, by reason"))
	skipped, err12 := m.Int64ObservableCounter("ssegate.resync.skipped", metric.WithDescription("Offsets clients will never get, reported by resync events"))
	replayInUse, err13 := m.Int64ObservableGauge("ssegate.replay.readers.in_use", metric.WithDescription("Kafka replay readers running now"))
	replayWaiting, err14 := m.Int64ObservableGauge("ssegate.replay.waiting", metric.WithDescription("Connections waiting for a replay reader"))
	replaySeconds, err15 := m.Float64ObservableCounter("ssegate.replay.duration.seconds", metric.WithDescription("Total time spent in replay reads"))
	replayReads, err16 := m.Int64ObservableCounter("ssegate.replay.reads", metric.WithDescription("Replay reads started"))
	replayRecords, err17 := m.Int64ObservableCounter("ssegate.replay.records", metric.WithDescription("Records read by replay reads"))
	cacheHits, err18 := m.Int64ObservableCounter("ssegate.replay.cache.hits", metric.WithDescription("Replay blocks served from the shared cache or another connection's read instead of Kafka"))
	parked, err19 := m.Int64ObservableGauge("ssegate.connections.parked", metric.WithDescription("SSE connections served by the writer pool now (part of the open ones)"))
	ringMemory, err20 := m.Int64ObservableGauge("ssegate.ring.memory.bytes", metric.WithDescription("Memory held by the topic's ring (frame and key chunks, entries, index): what its capacity bounds"))
	ringCapacity, err21 := m.Int64ObservableGauge("ssegate.ring.capacity.bytes", metric.WithDescription("Capacity of the topic's ring: ring-bytes, its topic-ring-bytes, or its share of ring-budget"))
	ringPublished, err22 := m.Int64ObservableCounter("ssegate.ring.published.bytes", metric.WithDescription("Frame bytes published into the topic's ring; a ring-budget is shared by their rate"))
	writes, err23 := m.Int64ObservableCounter("ssegate.writes", metric.WithDescription("Writes of frames to SSE clients (a system call each on the writer pool); frames written per write is how well writes batch"))
	cacheBytes, err24 := m.Int64ObservableGauge("ssegate.replay.cache.bytes", metric.WithDescription("Memory held by the replay block cache and the blocks being read: what replay-cache-bytes bounds"))
	pending, err25 := m.Int64ObservableGauge("ssegate.pending.write.bytes", metric.WithDescription("Bytes of writes to clients not finished now (clients that read slowly or not at all): what pending-write-bytes bounds"))
	for _, err := range []error{err1, err2, err3, err4, err5, err6, err7, err8, err9, err10, err11, err12, err13, err14, err15, err16, err17, err18, err19, err20, err21, err22, err23, err24, err25} {
		if err != nil {
			return nil, fmt.Errorf("metric instrument: %w", err)
		}
	}

	reasons := stream.Reasons()
	topicAttrs := map[string]metric.MeasurementOption{}
	reasonAttrs := map[string][]metric.MeasurementOption{}
	for _, name := range f.Topics() {
		topicAttrs[name] = metric.WithAttributes(attribute.String("topic", name))
		for _, r := range reasons {
			reasonAttrs[name] = append(reasonAttrs[name],
				metric.WithAttributes(attribute.String("topic", name), attribute.String("reason", r.String())))
		}
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, name := range f.Topics() {
			st, ta := stats[name], topicAttrs[name]
			o.ObserveInt64(open, st.Open.Load(), ta)
			o.ObserveInt64(parked, st.Parked.Load(), ta)
			o.ObserveInt64(frames, st.Frames.Load(), ta)
			o.ObserveInt64(written, st.Bytes.Load(), ta)
			o.ObserveInt64(writes, st.Writes.Load(), ta)
			for i, r := range reasons {
				o.ObserveInt64(closed, st.Closed[r].Load(), reasonAttrs[name][i])
			}
			rs := f.Topic(name).Ring().Stats()
			o.ObserveInt64(ringBytes, int64(rs.Bytes), ta)
			o.ObserveInt64(ringFrames, int64(rs.Frames), ta)
			o.ObserveInt64(ringMemory, int64(rs.Memory), ta)
			o.ObserveInt64(ringCapacity, int64(rs.Capacity), ta)
			o.ObserveInt64(ringPublished, int64(rs.Published), ta) //nolint:gosec // a byte count fits in int64
			o.ObserveInt64(evicted, int64(rs.Evicted), ta)         //nolint:gosec // a frame count fits in int64
			f.Topic(name).Ring().Low(func(p int32, off int64) {
				o.ObserveInt64(ringOldest, off, partitionAttrs(name, p))
			})
		}
		for _, name := range f.Topics() {
			st := stats[name]
			o.ObserveInt64(resumes, st.ResumedFromRing.Load(), metric.WithAttributes(attribute.String("topic", name), attribute.String("source", "ring")))
			o.ObserveInt64(resumes, st.ResumedFromKafka.Load(), metric.WithAttributes(attribute.String("topic", name), attribute.String("source", "kafka")))
			for i, r := range stream.ResyncReasons {
				o.ObserveInt64(resyncs, st.Resyncs[i].Load(), metric.WithAttributes(attribute.String("topic", name), attribute.String("reason", r)))
			}
			o.ObserveInt64(skipped, st.Skipped.Load(), topicAttrs[name])
		}
		o.ObserveInt64(replayInUse, replays.Stats.InUse.Load())
		o.ObserveInt64(replayWaiting, replays.Stats.Waiting.Load())
		o.ObserveFloat64(replaySeconds, float64(replays.Stats.Nanos.Load())/1e9)
		o.ObserveInt64(replayReads, replays.Stats.Reads.Load())
		o.ObserveInt64(replayRecords, replays.Stats.Records.Load())
		o.ObserveInt64(cacheHits, replays.Stats.CacheHits.Load())
		o.ObserveInt64(cacheBytes, replays.Stats.CacheBytes.Load())
		o.ObserveInt64(pending, streams.PendingBytes())
		f.Lag(func(topic string, p int32, l int64) { o.ObserveInt64(lag, l, partitionAttrs(topic, p)) })
		return nil
	}, open, parked, frames, written, writes, closed, lag, ringBytes, ringFrames, ringMemory, ringCapacity, ringPublished, ringOldest, evicted,
		resumes, resyncs, skipped, replayInUse, replayWaiting, replaySeconds, replayReads, replayRecords, cacheHits, cacheBytes, pending)
	if err != nil {
		return nil, fmt.Errorf("metric callback: %w", err)
	}
	return &telemetry{
		provider: mp,
		handler:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: nil}),
	}, nil
}

func partitionAttrs(topic string, p int32) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("topic", topic), attribute.String("partition", strconv.Itoa(int(p))))
}

func (t *telemetry) shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }
