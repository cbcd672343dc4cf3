package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// latency is a distribution summary, in the JSON output as milliseconds.
type latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func latencyOf(h *histogram) *latency {
	if h.Count() == 0 {
		return nil
	}
	return &latency{
		Count: h.Count(), P50: ms(h.Quantile(0.5)), P99: ms(h.Quantile(0.99)),
		P999: ms(h.Quantile(0.999)), Max: ms(h.Max()),
	}
}

// badConn describes one connection that lost or duplicated records.
type badConn struct {
	Conn   int           `json:"conn"`
	Counts trackerCounts `json:"counts"`
	LastID string        `json:"last_id"`
	Err    string        `json:"error,omitempty"`
}

// result is what a run found. Zero fields did not apply to the mode.
type result struct {
	Mode        string  `json:"mode"`
	Topic       string  `json:"topic"`
	Connections int     `json:"connections"`
	Opened      int     `json:"opened"`
	Rate        float64 `json:"rate"`
	Size        int     `json:"size"`
	// Proto is --proto; with HTTP/2, StreamsPerConn is --streams-per-conn and H2Conns the connections the
	// streams were opened on (in storm, before and after the reconnect).
	Proto          string `json:"proto"`
	StreamsPerConn int    `json:"streams_per_conn,omitempty"`
	H2Conns        int64  `json:"h2_conns,omitempty"`
	// WebSocket: WSAcks is --ws-acks (acknowledge every that many messages; 0 none), WSAcksSent the
	// acknowledgements the streams sent.
	WSAcks     int   `json:"ws_acks,omitempty"`
	WSAcksSent int64 `json:"ws_acks_sent,omitempty"`

	Elapsed          time.Duration `json:"-"`
	ElapsedSeconds   float64       `json:"elapsed_s"`
	OpenTime         time.Duration `json:"-"`
	OpenSeconds      float64       `json:"open_s,omitempty"`
	Produced         int64         `json:"produced"`
	ProduceFailed    int64         `json:"produce_failed"`
	Delivered        int64         `json:"delivered"`
	DeliveriesPerSec float64       `json:"deliveries_per_s"`
	Latency          *latency      `json:"latency,omitempty"`
	// Steady: Producers is --producers and ProducerInFlight the records each kept in flight at most;
	// ProducedPerSec is Produced over Elapsed, the acknowledged rate. CatchUpSeconds is how long after the end
	// of producing the last reader had every record (CaughtUp false: one never had them within the drain
	// timeout), and Bound what limited the run by boundOf: gateway, producer or none.
	Producers        int     `json:"producers,omitempty"`
	ProducerInFlight int     `json:"producer_in_flight,omitempty"`
	ProducedPerSec   float64 `json:"produced_per_s,omitempty"`
	CatchUpSeconds   float64 `json:"catch_up_s,omitempty"`
	CaughtUp         bool    `json:"caught_up,omitempty"`
	Bound            string  `json:"bound,omitempty"`
	// LatencyWindows (steady) is Latency split into windows of --wave-every from the start of producing, the
	// last running on until every reader caught up; nil when the run has one window.
	LatencyWindows []*latency `json:"latency_windows,omitempty"`
	// Prefilled counts the records written before the readers connected (--prefill-records), PrefillSeconds
	// how long that took; Produced does not count them.
	Prefilled      int64   `json:"prefilled,omitempty"`
	PrefillSeconds float64 `json:"prefill_s,omitempty"`
	// Shape is what the clients of a shaped stream (--shape) got; nil for plain streams.
	Shape *shapeStats `json:"shape,omitempty"`
	// Waves is what steady's resume waves did (--waves); nil without waves.
	Waves *waveStats `json:"resume_waves,omitempty"`

	Lost            int64     `json:"lost"`
	Dup             int64     `json:"duplicated"`
	BadIDs          int64     `json:"bad_ids"`
	MaxLostPerConn  int64     `json:"max_lost_per_conn"`
	MaxDupPerConn   int64     `json:"max_dup_per_conn"`
	ConnsWithErrors int       `json:"conns_with_loss_or_dup"`
	ConnErrors      int64     `json:"conn_errors"`
	Bad             []badConn `json:"bad_conns,omitempty"`
	Errors          []string  `json:"errors,omitempty"`

	GatewayCPUSeconds float64 `json:"gateway_cpu_s"`
	ToolCPUSeconds    float64 `json:"tool_cpu_s,omitempty"` // steady and storm: the tool's own CPU over the same window
	// GatewayWrites is the gateway's write system calls from the start of producing until every client
	// caught up (steady), and FramesPerWrite the frames the clients received in that time per write.
	// DeliveriesPerCPUSecond is Delivered divided by GatewayCPUSeconds (steady only).
	DeliveriesPerCPUSecond float64 `json:"deliveries_per_cpu_s,omitempty"`
	// IDBytesPerFrame and FrameBytesPerFrame are averages over every event received: the id: value's
	// length, and the stream's body bytes (frames, the opening block and keep-alives) per event.
	IDBytesPerFrame    float64 `json:"id_bytes_per_frame,omitempty"`
	FrameBytesPerFrame float64 `json:"frame_bytes_per_frame,omitempty"`
	// V1IDs counts the events with a v1 id (the others had compact ones), V1Share that over all events.
	V1IDs   int64   `json:"v1_ids"`
	V1Share float64 `json:"v1_id_share"`
	// Checkpoints counts the position topic's records the tracker read to check compact ids (all of them, from
	// the topic's start), CheckpointBytesPerSec their key and value bytes over the producing time.
	Checkpoints           int64   `json:"checkpoints,omitempty"`
	CheckpointBytesPerSec float64 `json:"checkpoint_bytes_per_s,omitempty"`
	// CheckpointAckMs is the mean time the gateways' checkpoints waited for Kafka while producing (steady):
	// compact ids grow for about that long.
	CheckpointAckMs float64 `json:"checkpoint_ack_ms,omitempty"`
	GatewayWrites   int64   `json:"gateway_writes,omitempty"`
	FramesPerWrite  float64 `json:"frames_per_write,omitempty"`
	RSSBeforeBytes  int64   `json:"gateway_rss_before_bytes,omitempty"`
	RSSAfterBytes   int64   `json:"gateway_rss_after_bytes,omitempty"`
	RSSPerConnBytes float64 `json:"gateway_rss_per_conn_bytes,omitempty"`

	// floor: the frames the clients received over the measured window, the floor's CPU seconds and write
	// system calls over it, and the frames per CPU second and per write. Produced is the last record the
	// floor published.
	FloorFrames             int64   `json:"floor_frames,omitempty"`
	FloorCPUSeconds         float64 `json:"floor_cpu_s,omitempty"`
	FloorFramesPerCPUSecond float64 `json:"floor_frames_per_cpu_s,omitempty"`
	FloorWrites             int64   `json:"floor_writes,omitempty"`
	FloorFramesPerWrite     float64 `json:"floor_frames_per_write,omitempty"`

	// idle
	Sources             string        `json:"source_addrs,omitempty"`
	ListenDrops         int64         `json:"listen_drops"` // -1: /proc/net/netstat could not be read
	ToolRSSBytes        int64         `json:"tool_rss_bytes,omitempty"`
	ToolRSSPerConnBytes float64       `json:"tool_rss_per_conn_bytes,omitempty"`
	ProbeTime           time.Duration `json:"-"`
	ProbeSeconds        float64       `json:"probe_reached_all_s,omitempty"`

	// Growth of the gateways' go_memstats_heap_inuse_bytes, go_memstats_stack_inuse_bytes and go_goroutines
	// per open connection, from before connecting to after the hold.
	HeapPerConnBytes  float64 `json:"gateway_heap_per_conn_bytes,omitempty"`
	StackPerConnBytes float64 `json:"gateway_stack_per_conn_bytes,omitempty"`
	GoroutinesPerConn float64 `json:"gateway_goroutines_per_conn,omitempty"`

	// storm
	Reopened       int              `json:"reopened,omitempty"`
	Served         int              `json:"served,omitempty"`
	TimeToServeAll time.Duration    `json:"-"`
	ServeAllSecs   float64          `json:"time_to_serve_all_s,omitempty"`
	Resume         *latency         `json:"resume_latency,omitempty"`
	Gateway        *gatewayCounters `json:"gateway_metrics_delta,omitempty"`

	// slow
	Slow             int      `json:"slow,omitempty"`
	SlowClosed       int      `json:"slow_closed_by_gateway,omitempty"`
	LatencyAfterSlow *latency `json:"latency_after_slow,omitempty"`

	// resume: Partitions are the topic's, ResumeConn is --resume-conn.
	Partitions     int              `json:"partitions,omitempty"`
	ResumeConn     string           `json:"resume_conn,omitempty"`
	ProduceSeconds float64          `json:"produce_s,omitempty"`
	Cold           *resumeStats     `json:"resume_cold,omitempty"`
	Warm           *resumeStats     `json:"resume_warm,omitempty"`
	ResumesCold    []resumeRun      `json:"resumes_cold,omitempty"`
	ResumesWarm    []resumeRun      `json:"resumes_warm,omitempty"`
	GatewayWarm    *gatewayCounters `json:"gateway_metrics_delta_warm,omitempty"`

	OK       bool     `json:"ok"`
	Failures []string `json:"failures,omitempty"`
}

// judge fills OK and Failures: what a correct gateway must never do.
func (r *result) judge(cfg config) {
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	if r.Opened < r.Connections {
		fail("%d of %d connections did not open", r.Connections-r.Opened, r.Connections)
	}
	if cfg.Mode != modeIdle || cfg.IdleProbe > 0 {
		if r.Lost > 0 {
			fail("%d records lost over %d connections", r.Lost, r.ConnsWithErrors)
		}
		if r.Dup > 0 {
			fail("%d records duplicated", r.Dup)
		}
		if r.BadIDs > 0 {
			fail("%d malformed ids", r.BadIDs)
		}
		if r.ProduceFailed > 0 {
			fail("%d records failed to produce", r.ProduceFailed)
		}
	}
	if r.ConnErrors > 0 {
		fail("%d connections failed", r.ConnErrors)
	}
	if r.Shape != nil && r.Shape.Wrong > 0 {
		fail("%d records the shape should not have sent (another filter's, or not of the run)", r.Shape.Wrong)
	}
	if r.Shape != nil && r.Shape.NoLive > 0 {
		fail("%d snapshot streams never got live", r.Shape.NoLive)
	}
	if r.Waves != nil {
		r.Failures = append(r.Failures, r.Waves.failures()...)
	}
	if cfg.Mode == modeStorm && r.Served < r.Connections {
		fail("%d of %d clients were not served what they missed within %v", r.Connections-r.Served, r.Connections, cfg.DrainWait)
	}
	if cfg.Mode == modeResume {
		r.judgeResume()
	}
	if cfg.Mode == modeFloor && r.Delivered == 0 {
		fail("no frame reached any client")
	}
	r.OK = len(r.Failures) == 0
}

// judgeResume checks the resume mode's phases: every resume served from Kafka (none from the ring, which
// would not measure a replay), and cold resumes reading Kafka.
func (r *result) judgeResume() {
	fail := func(format string, args ...any) { r.Failures = append(r.Failures, fmt.Sprintf(format, args...)) }
	for _, ph := range []struct {
		name string
		runs []resumeRun
		g    *gatewayCounters
	}{{"cold", r.ResumesCold, r.Gateway}, {"warm", r.ResumesWarm, r.GatewayWarm}} {
		if ph.g != nil && int(ph.g.ResumesKafka) != len(ph.runs) {
			fail("%s: %d of %d resumes were served from Kafka (the rest from the ring: the ring is too large to measure a replay)",
				ph.name, int(ph.g.ResumesKafka), len(ph.runs))
		}
	}
	if g := r.Gateway; g != nil && g.ReplayReads == 0 && len(r.ResumesCold) > 0 {
		fail("cold: the gateway read no block from Kafka")
	}
}

func fmtLatency(b *strings.Builder, prefix string, l *latency) {
	if l == nil {
		fmt.Fprintf(b, " %sp50=- %sp99=-", prefix, prefix)
		return
	}
	fmt.Fprintf(b, " %sp50=%.2fms %sp99=%.2fms %sp999=%.2fms %smax=%.2fms", prefix, l.P50, prefix, l.P99, prefix, l.P999, prefix, l.Max)
}

// fmtWindows writes the p99 of each latency window, "-" for a window without frames; nothing for one window.
func fmtWindows(b *strings.Builder, ws []*latency) {
	if len(ws) == 0 {
		return
	}
	b.WriteString(" p99/window=")
	for i, l := range ws {
		if i > 0 {
			b.WriteByte(',')
		}
		if l == nil {
			b.WriteByte('-')
			continue
		}
		fmt.Fprintf(b, "%.2f", l.P99)
	}
	b.WriteString("ms")
}

// fmtResume writes one phase of the resume mode: time from request to first frame, and the gateway's block
// reads from Kafka and from its cache during it.
func fmtResume(b *strings.Builder, phase string, s *resumeStats, g *gatewayCounters) {
	if s == nil {
		fmt.Fprintf(b, " %s_first_frame=-", phase)
		return
	}
	fmt.Fprintf(b, " %s_first_frame(n=%d) min=%.2fms p50=%.2fms max=%.2fms", phase, s.Count, s.Min, s.P50, s.Max)
	if g != nil {
		fmt.Fprintf(b, " %s_block_reads=+%.0f %s_cache_hits=+%.0f", phase, g.ReplayReads, phase, g.CacheHits)
	}
}

// summary is the one-line result.
func (r *result) summary() string {
	var b strings.Builder
	status := "ok"
	if !r.OK {
		status = "FAIL"
	}
	fmt.Fprintf(&b, "loadtest mode=%s result=%s", r.Mode, status)
	if r.Mode == modeWaves {
		r.wavesSummary(&b)
		return b.String()
	}
	fmt.Fprintf(&b, " conns=%d/%d", r.Opened, r.Connections)
	switch r.Proto {
	case "", protoH1:
	case protoWS:
		fmt.Fprintf(&b, " proto=ws")
		if r.WSAcks > 0 {
			fmt.Fprintf(&b, " ws_acks=%d ws_acks_sent=%d", r.WSAcks, r.WSAcksSent)
		}
	default:
		fmt.Fprintf(&b, " proto=%s h2_conns=%d", r.Proto, r.H2Conns)
	}
	if r.Mode != modeIdle {
		fmt.Fprintf(&b, " elapsed=%.1fs produced=%d delivered=%d", r.Elapsed.Seconds(), r.Produced, r.Delivered)
	}
	if r.Prefilled > 0 {
		fmt.Fprintf(&b, " prefilled=%d", r.Prefilled)
	}
	switch r.Mode {
	case modeSteady:
		fmt.Fprintf(&b, " deliveries/s=%.0f", r.DeliveriesPerSec)
		if s := r.Shape; s != nil {
			fmt.Fprintf(&b, " shape=%s frames/client/s=%.1f bytes/client/s=%.0f", s.Shape, s.FramesPerClientPS, s.BytesPerClientPS)
			if l := s.ToLive; l != nil {
				fmt.Fprintf(&b, " state_frames/client=%.0f to_live_p50=%.1fms to_live_p99=%.1fms to_live_max=%.1fms no_live=%d", s.StateFrames, l.P50, l.P99, l.Max, s.NoLive)
			}
		}
		r.fmtBound(&b)
		fmtLatency(&b, "", r.Latency)
		fmtWindows(&b, r.LatencyWindows)
		if r.Waves != nil {
			r.Waves.format(&b)
		}
		fmt.Fprintf(&b, " id_bytes/frame=%.1f frame_bytes/frame=%.1f v1_ids=%.1f%%", r.IDBytesPerFrame, r.FrameBytesPerFrame, 100*r.V1Share)
		if r.Checkpoints > 0 {
			fmt.Fprintf(&b, " checkpoints=%d checkpoint_bytes/s=%.0f checkpoint_ack_ms=%.1f", r.Checkpoints, r.CheckpointBytesPerSec, r.CheckpointAckMs)
		}
	case modeStorm:
		fmt.Fprintf(&b, " reopened=%d served=%d time_to_serve_all=%.3fs", r.Reopened, r.Served, r.TimeToServeAll.Seconds())
		fmtLatency(&b, "resume_", r.Resume)
		if g := r.Gateway; g != nil {
			fmt.Fprintf(&b, " replay_reads=+%.0f resumes_ring=+%.0f resumes_kafka=+%.0f", g.ReplayReads, g.ResumesRing, g.ResumesKafka)
		}
	case modeSlow:
		fmtLatency(&b, "before_", r.Latency)
		fmtLatency(&b, "after_", r.LatencyAfterSlow)
		fmt.Fprintf(&b, " slow=%d slow_closed=%d", r.Slow, r.SlowClosed)
		if g := r.Gateway; g != nil {
			fmt.Fprintf(&b, " closed_write_failed=+%.0f closed_behind=+%.0f", g.ClosedWrite, g.ClosedBehind)
		}
	case modeIdle:
		fmt.Fprintf(&b, " open_time=%.2fs listen_drops=%d sources=%s", r.OpenTime.Seconds(), r.ListenDrops, r.Sources)
		if r.Produced > 0 {
			fmt.Fprintf(&b, " probe=%d delivered=%d probe_reached_all=%.2fs", r.Produced, r.Delivered, r.ProbeTime.Seconds())
		}
	case modeFloor:
		fmt.Fprintf(&b, " deliveries/s=%.0f", r.DeliveriesPerSec)
		fmtLatency(&b, "", r.Latency)
		fmt.Fprintf(&b, " frames=%d frame_bytes/frame=%.1f", r.FloorFrames, r.FrameBytesPerFrame)
	case modeResume:
		fmt.Fprintf(&b, " partitions=%d resume_conn=%s", r.Partitions, r.ResumeConn)
		if r.Cold != nil {
			fmt.Fprintf(&b, " cold_first=%.2fms", r.Cold.First)
		}
		fmtResume(&b, "cold", r.Cold, r.Gateway)
		fmtResume(&b, "warm", r.Warm, r.GatewayWarm)
	}
	if r.Mode != modeResume && (r.Mode != modeIdle || r.Produced > 0) {
		fmt.Fprintf(&b, " lost=%d dup=%d max_lost/conn=%d max_dup/conn=%d", r.Lost, r.Dup, r.MaxLostPerConn, r.MaxDupPerConn)
	}
	fmt.Fprintf(&b, " conn_errors=%d", r.ConnErrors)
	if r.RSSAfterBytes > 0 {
		fmt.Fprintf(&b, " gateway_rss=%.1fMiB rss/conn=%.1fKiB", float64(r.RSSAfterBytes)/(1<<20), r.RSSPerConnBytes/1024)
	}
	if r.Mode == modeIdle && r.Gateway != nil {
		fmt.Fprintf(&b, " heap/conn=%.1fKiB stack/conn=%.1fKiB goroutines/conn=%.2f",
			r.HeapPerConnBytes/1024, r.StackPerConnBytes/1024, r.GoroutinesPerConn)
	}
	if r.ToolRSSBytes > 0 {
		fmt.Fprintf(&b, " tool_rss=%.1fMiB tool_rss/conn=%.1fKiB", float64(r.ToolRSSBytes)/(1<<20), r.ToolRSSPerConnBytes/1024)
	}
	if r.GatewayCPUSeconds > 0 {
		fmt.Fprintf(&b, " gateway_cpu=%.2fs", r.GatewayCPUSeconds)
		if r.DeliveriesPerCPUSecond > 0 {
			fmt.Fprintf(&b, " deliveries/cpu_s=%.0f", r.DeliveriesPerCPUSecond)
		}
	}
	if r.Mode == modeFloor {
		fmt.Fprintf(&b, " floor_cpu=%.2fs floor_frames/cpu_s=%.0f", r.FloorCPUSeconds, r.FloorFramesPerCPUSecond)
	}
	if r.ToolCPUSeconds > 0 {
		fmt.Fprintf(&b, " tool_cpu=%.2fs", r.ToolCPUSeconds)
	}
	if r.FloorWrites > 0 {
		fmt.Fprintf(&b, " floor_writes=%d frames/write=%.2f", r.FloorWrites, r.FloorFramesPerWrite)
	}
	if r.GatewayWrites > 0 {
		fmt.Fprintf(&b, " gateway_writes=%d frames/write=%.1f", r.GatewayWrites, r.FramesPerWrite)
	}
	return b.String()
}

// fmtBound writes steady's producers, their acknowledged rate, the readers' catch-up ("-" when one did not
// catch up within the drain timeout) and what limited the run.
func (r *result) fmtBound(b *strings.Builder) {
	fmt.Fprintf(b, " producers=%d produced/s=%.0f", r.Producers, r.ProducedPerSec)
	if r.CaughtUp {
		fmt.Fprintf(b, " catch_up=%.2fs", r.CatchUpSeconds)
	} else {
		b.WriteString(" catch_up=-")
	}
	fmt.Fprintf(b, " bound=%s", r.Bound)
}

// wavesSummary writes the rest of the waves mode's summary line: the waves' figures and what they cost.
func (r *result) wavesSummary(b *strings.Builder) {
	fmt.Fprintf(b, " elapsed=%.1fs", r.Elapsed.Seconds())
	if r.Waves != nil {
		r.Waves.format(b)
	}
	if r.GatewayCPUSeconds > 0 {
		fmt.Fprintf(b, " gateway_cpu=%.2fs", r.GatewayCPUSeconds)
	}
	fmt.Fprintf(b, " tool_cpu=%.2fs", r.ToolCPUSeconds)
}

// write prints the failures (one a line, to errw), the summary line and, with asJSON, the JSON line.
func (r *result) write(out, errw io.Writer, asJSON bool) error {
	for _, f := range r.Failures {
		_, _ = fmt.Fprintln(errw, "loadtest: check failed:", f)
	}
	for _, e := range r.Errors {
		_, _ = fmt.Fprintln(errw, "loadtest:", e)
	}
	if r.Waves != nil && r.Waves.Process != nil && r.Waves.Process.summary != "" {
		// The waves' process's own line, which the steady line's wave figures are read from.
		if _, err := fmt.Fprintln(out, r.Waves.Process.summary); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintln(out, r.summary()); err != nil {
		return err
	}
	if !asJSON {
		return nil
	}
	r.ElapsedSeconds = r.Elapsed.Seconds()
	r.OpenSeconds = r.OpenTime.Seconds()
	r.ServeAllSecs = r.TimeToServeAll.Seconds()
	r.ProbeSeconds = r.ProbeTime.Seconds()
	return json.NewEncoder(out).Encode(r)
}
