package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads the Prometheus text exposition format. It understands what the gateway writes (no
// escaped quotes or commas inside label values) and skips lines it cannot read.
func parseMetrics(r io.Reader) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s := sample{labels: map[string]string{}}
		var rest string
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			s.name, rest = line[:i], strings.TrimSpace(line[j+1:])
			for kv := range strings.SplitSeq(line[i+1:j], ",") {
				k, v, ok := strings.Cut(kv, "=")
				if ok {
					s.labels[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"`)
				}
			}
		} else {
			name, r, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			s.name, rest = name, strings.TrimSpace(r)
		}
		if f := strings.Fields(rest); len(f) > 0 { // value, then an optional timestamp
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				continue
			}
			s.value = v
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

// sumMetric adds the values of the samples named name whose labels include every pair in match.
func sumMetric(ss []sample, name string, match map[string]string) float64 {
	var sum float64
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range match {
			ok = ok && s.labels[k] == v
		}
		if ok {
			sum += s.value
		}
	}
	return sum
}

// gatewayCounters are the gateway metrics the tool reports, summed over gateways.
type gatewayCounters struct {
	ReplayReads    float64 `json:"replay_reads"`
	CacheHits      float64 `json:"replay_cache_hits"`
	ResumesRing    float64 `json:"resumes_ring"`
	ResumesKafka   float64 `json:"resumes_kafka"`
	ClosedWrite    float64 `json:"closed_write_failed"`
	ClosedBehind   float64 `json:"closed_behind"`
	ClosedClient   float64 `json:"closed_client_gone"`
	FramesWritten  float64 `json:"frames_written"`
	Resyncs        float64 `json:"resyncs"`
	ConnectionsNow float64 `json:"connections_open"`
	// Checkpoints of compact ids acknowledged, and the seconds they waited for Kafka in all.
	CheckpointsAcked     float64 `json:"checkpoints_acked"`
	CheckpointAckSeconds float64 `json:"checkpoint_ack_seconds"`
	// The Go runtime's gauges (from the gateway's Go collector); a delta from sub.
	HeapInuse  float64 `json:"go_heap_inuse_bytes"`
	StackInuse float64 `json:"go_stack_inuse_bytes"`
	Goroutines float64 `json:"go_goroutines"`
}

// counterSources names, for each field of gatewayCounters, the metric it sums and the labels it matches
// (topic: the run's topic; a nil match: every series).
func (c *gatewayCounters) counterSources(topic string) []struct {
	field *float64
	name  string
	match map[string]string
} {
	t := map[string]string{"topic": topic}
	with := func(k, v string) map[string]string { return map[string]string{"topic": topic, k: v} }
	type src = struct {
		field *float64
		name  string
		match map[string]string
	}
	return []src{
		{&c.ReplayReads, "ssegate_replay_reads_total", nil}, // the replay pool is shared by topics
		{&c.CacheHits, "ssegate_replay_cache_hits_total", nil},
		{&c.ResumesRing, "ssegate_resumes_total", with("source", "ring")},
		{&c.ResumesKafka, "ssegate_resumes_total", with("source", "kafka")},
		{&c.ClosedWrite, "ssegate_connections_closed_total", with("reason", "write_failed")},
		{&c.ClosedBehind, "ssegate_connections_closed_total", with("reason", "behind")},
		{&c.ClosedClient, "ssegate_connections_closed_total", with("reason", "client_gone")},
		{&c.FramesWritten, "ssegate_frames_written_total", t},
		{&c.Resyncs, "ssegate_resyncs_total", t},
		{&c.ConnectionsNow, "ssegate_connections_open", t},
		{&c.CheckpointsAcked, "ssegate_checkpoint_writes_total", with("result", "acked")},
		{&c.CheckpointAckSeconds, "ssegate_checkpoint_ack_seconds_total", t},
		{&c.HeapInuse, "go_memstats_heap_inuse_bytes", nil},
		{&c.StackInuse, "go_memstats_stack_inuse_bytes", nil},
		{&c.Goroutines, "go_goroutines", nil},
	}
}

// sub returns a - b, field by field, but for ConnectionsNow, a gauge of now: a's.
func (a gatewayCounters) sub(b gatewayCounters) gatewayCounters {
	out := a
	bs := b.counterSources("")
	for i, f := range out.counterSources("") {
		if f.field != &out.ConnectionsNow {
			*f.field -= *bs[i].field
		}
	}
	return out
}

// add adds b to c, field by field.
func (c *gatewayCounters) add(b gatewayCounters) {
	bs := b.counterSources("")
	for i, f := range c.counterSources("") {
		*f.field += *bs[i].field
	}
}

func countersOf(ss []sample, topic string) gatewayCounters {
	var c gatewayCounters
	for _, f := range c.counterSources(topic) {
		*f.field = sumMetric(ss, f.name, f.match)
	}
	return c
}

// scrapeAll reads /metrics of every gateway (bases are their admin ports) and sums the counters for topic.
func scrapeAll(ctx context.Context, hc *http.Client, bases []string, topic string) (gatewayCounters, error) {
	var sum gatewayCounters
	for _, base := range bases {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", http.NoBody)
		if err != nil {
			return sum, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return sum, fmt.Errorf("scrape %s: %w", base, err)
		}
		ss, err := parseMetrics(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return sum, fmt.Errorf("scrape %s: %w", base, err)
		}
		if resp.StatusCode != http.StatusOK {
			return sum, fmt.Errorf("scrape %s: status %d", base, resp.StatusCode)
		}
		sum.add(countersOf(ss, topic))
	}
	return sum, nil
}

// fetchHeapProfile writes the heap profile of the gateway whose admin port is base to path, after a garbage
// collection (?gc=1). The gateway serves it only with its pprof setting.
func fetchHeapProfile(ctx context.Context, hc *http.Client, base, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/heap?gc=1", http.NoBody)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: %s/debug/pprof/heap: status %d (is the gateway's pprof setting on? SSEGATE_PPROF=true)", base, resp.StatusCode)
	}
	f, err := os.Create(path) //nolint:gosec // the operator names the file
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	return f.Close()
}
