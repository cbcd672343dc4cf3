package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
)

// Resume waves (steady with --waves): every --wave-every from the start of producing, --waves clients resume
// at once from --wave-behind records behind the head and hang up --wave-cut after dialing, in the middle of
// their catch-up. They load the gateway with catch-ups while the live readers are measured: the live
// readers' latency, loss and deliveries are theirs alone, and the wave clients have a summary of their own.

// maxWaveBehind bounds --wave-behind, far above any topic a run makes.
const maxWaveBehind = 1 << 30

// validateWaves checks the wave and prefill flags.
func (c config) validateWaves() error {
	switch {
	case c.Waves < 0 || c.Waves > maxConnections:
		return fmt.Errorf("--waves: want 0 (no waves) to %d", maxConnections)
	case c.WaveEvery <= 0 || c.WaveCut <= 0:
		return errors.New("--wave-every and --wave-cut: want more than 0")
	case c.WaveBehind < 1 || c.WaveBehind > maxWaveBehind:
		return fmt.Errorf("--wave-behind: want 1 to %d", maxWaveBehind)
	case c.PrefillRecords < 0:
		return errors.New("--prefill-records: want 0 or more")
	case c.PrefillRecords > 0 && (c.Mode == modeResume || c.Mode == modeFloor || c.Mode == modeWaves):
		return fmt.Errorf("--prefill-records: not with --mode=%s (resume writes its own records, floor has no Kafka, waves writes nothing)", c.Mode)
	case c.WavesNice < 0 || c.WavesNice > 19:
		// A negative nice value would need privileges, and would put the wave clients before the readers.
		return errors.New("--waves-nice: want 0 to 19")
	case c.WavesProcess && c.Mode != modeSteady:
		// Without waves it does nothing, so that a script can give it to a run with --waves=0 too.
		return errors.New("--waves-process: steady mode only")
	case !c.WaveStart.IsZero() && c.Mode != modeWaves:
		return errors.New("--wave-start: with --mode=waves only (steady counts its waves from the start of producing)")
	case c.Mode == modeWaves && c.Waves == 0:
		return errors.New("--mode=waves: want --waves=N, the clients of each wave")
	}
	if c.Waves == 0 {
		return nil
	}
	switch {
	case c.Mode != modeSteady && c.Mode != modeWaves:
		return fmt.Errorf("--waves: steady or waves mode only, not %s", c.Mode)
	case c.Proto != protoH1:
		// A wave client speaks HTTP/1.1 on a connection of its own, whatever the live readers speak.
		return fmt.Errorf("--waves: with --proto=h1 only, not %s", c.Proto)
	case c.WaveEvery >= c.Duration:
		return fmt.Errorf("--wave-every (%v): want less than --duration (%v), or no wave runs", c.WaveEvery, c.Duration)
	case c.WaveCut >= c.WaveEvery:
		// A wave's clients have all hung up before the next wave: each wave is the same load, and the
		// clients never pile up.
		return fmt.Errorf("--wave-cut (%v): want less than --wave-every (%v)", c.WaveCut, c.WaveEvery)
	}
	return nil
}

// wavePosition returns the position of a client behind records behind the head: per partition, the head
// (ends, the next offset) less its share of behind, spread evenly (the first behind mod n partitions take
// one more), so that the records after the position number its share. A partition that holds fewer (from
// starts, its first offset) is resumed from its first record: the position names the offset before it, or
// leaves the partition out when that is 0, which the gateway reads from its start.
func wavePosition(starts, ends []int64, behind int) position.Vector {
	var v position.Vector
	n := len(ends)
	if n == 0 {
		return v
	}
	for p, end := range ends {
		share := int64(behind / n)
		if p < behind%n {
			share++
		}
		var start int64
		if p < len(starts) {
			start = starts[p]
		}
		first := max(end-share, start) // the first record the client is owed
		if first > 0 {
			v.Set(int32(p), first-1)
		}
	}
	return v
}

// waveRun is one wave: when it started (seconds after producing started), the id its clients sent, and what
// they read.
type waveRun struct {
	At         float64 `json:"at_s"`
	ID         string  `json:"id"`
	Opened     int     `json:"opened"`
	Frames     int64   `json:"frames"`
	ConnErrors int     `json:"conn_errors"`
}

// waveStats is what the waves did, summed over their clients.
type waveStats struct {
	Waves      int       `json:"waves"`             // waves run
	Skipped    int       `json:"skipped,omitempty"` // waves not run: the head could not be read
	Clients    int       `json:"clients"`
	Opened     int       `json:"opened"` // clients whose opening block arrived before the cut
	Frames     int64     `json:"frames"`
	Bytes      int64     `json:"bytes"`
	FramesP50  float64   `json:"frames_per_client_p50"` // median over every client, those that read none included
	ConnErrors int       `json:"conn_errors"`
	Runs       []waveRun `json:"runs"`
	Errors     []string  `json:"errors,omitempty"` // the first few
	// Process is the process the waves ran in (--waves-process); nil when they ran in the tool's own.
	Process *waveProcess `json:"process,omitempty"`
}

// waveSchedule says when the waves come and how their clients resume.
type waveSchedule struct {
	count    int           // clients a wave
	every    time.Duration // a wave at every, 2 x every, ... after the start
	duration time.Duration // and before this
	behind   int
	cut      time.Duration
	url      func(j int) string // the stream URL of a wave's client j
	// head returns the partitions' first offsets and end offsets (the next offset of each) at the moment of
	// a wave.
	head func(ctx context.Context) (starts, ends []int64, err error)
}

// run runs every wave due from t0 until duration, and returns once every wave client has hung up. When ctx
// ends, no further wave starts and the running clients hang up at once.
func (s waveSchedule) run(ctx context.Context, t0 time.Time) *waveStats {
	st := &waveStats{}
	var (
		wg    sync.WaitGroup // every wave client
		waves [][]waveRead   // each wave's clients' reads, one slice per entry of st.Runs
	)
	for k := 1; time.Duration(k)*s.every < s.duration; k++ {
		sleep(ctx, time.Until(t0.Add(time.Duration(k)*s.every)))
		if ctx.Err() != nil {
			break
		}
		starts, ends, err := s.head(ctx)
		if err != nil {
			st.Skipped++
			st.addError(fmt.Sprintf("wave %d: %v", k, err))
			continue
		}
		id := wavePosition(starts, ends, s.behind).String()
		st.Runs = append(st.Runs, waveRun{At: time.Since(t0).Seconds(), ID: id})
		reads := make([]waveRead, s.count)
		waves = append(waves, reads)
		// The clients start at once, each filling its own entry of reads, read only once all are joined.
		for j := range reads {
			wg.Go(func() { reads[j] = waveOnce(ctx, s.url(j), id, s.cut) })
		}
	}
	wg.Wait()
	st.sum(waves)
	return st
}

// sum adds up the waves' reads, one slice of reads per entry of st.Runs.
func (st *waveStats) sum(waves [][]waveRead) {
	var frames []int64
	for i, reads := range waves {
		run := &st.Runs[i]
		for _, w := range reads {
			frames = append(frames, w.frames)
			run.Frames += w.frames
			st.Bytes += w.bytes
			if w.opened {
				run.Opened++
			}
			if w.err != nil {
				run.ConnErrors++
				st.addError(fmt.Sprintf("wave at %.1fs: %v", run.At, w.err))
			}
		}
		st.Waves++
		st.Clients += len(reads)
		st.Opened += run.Opened
		st.Frames += run.Frames
		st.ConnErrors += run.ConnErrors
	}
	if n := len(frames); n > 0 {
		slices.Sort(frames)
		st.FramesP50 = float64(frames[n/2])
		if n%2 == 0 {
			st.FramesP50 = float64(frames[n/2-1]+frames[n/2]) / 2
		}
	}
}

// addError keeps the first few errors, for the report.
func (st *waveStats) addError(e string) {
	if len(st.Errors) < 10 {
		st.Errors = append(st.Errors, e)
	}
}

// failures returns what makes a run with waves fail: a wave client whose stream failed, a wave that could not
// run, or waves that read nothing at all, which loaded the gateway with nothing.
func (st *waveStats) failures() []string {
	var out []string
	if st.ConnErrors > 0 {
		out = append(out, fmt.Sprintf("%d of %d wave clients failed", st.ConnErrors, st.Clients))
	}
	if st.Skipped > 0 {
		out = append(out, fmt.Sprintf("%d waves did not run: the head could not be read", st.Skipped))
	}
	if st.Waves > 0 && st.Frames == 0 {
		out = append(out, fmt.Sprintf("the %d wave clients read no frame: the waves did not load the gateway", st.Clients))
	}
	if p := st.Process; p != nil && p.Err != "" {
		out = append(out, "the waves' process: "+p.Err)
	}
	return out
}

// format writes the waves' part of the summary line.
func (st *waveStats) format(b *strings.Builder) {
	fmt.Fprintf(b, " waves=%d wave_clients=%d wave_opened=%d wave_frames=%d wave_frames/client_p50=%.0f wave_conn_errors=%d",
		st.Waves, st.Clients, st.Opened, st.Frames, st.FramesP50, st.ConnErrors)
	if p := st.Process; p != nil {
		fmt.Fprintf(b, " wave_proc=nice%d wave_proc_cpu=%.2fs", p.Nice, p.CPUSeconds)
	}
}

// startWaves runs the configured waves from t0 on, against the run's gateways and Kafka, as goroutines of
// this process or, with --waves-process, in a process of their own (startWavesProcess), and returns a
// function that waits for the last wave client to hang up and returns what the waves did. Without waves it
// returns nil.
func (r *runner) startWaves(ctx context.Context, t0 time.Time) func() *waveStats {
	if r.cfg.Waves == 0 {
		return nil
	}
	if r.cfg.WavesProcess {
		return r.startWavesProcess(ctx, t0)
	}
	done := make(chan *waveStats, 1)
	go func() { done <- r.waveSchedule().run(ctx, t0) }()
	return func() *waveStats { return <-done }
}

// waveSchedule is the schedule the flags give, against the run's gateways and Kafka.
func (r *runner) waveSchedule() waveSchedule {
	return waveSchedule{
		count: r.cfg.Waves, every: r.cfg.WaveEvery, duration: r.cfg.Duration, behind: r.cfg.WaveBehind, cut: r.cfg.WaveCut,
		url: func(j int) string { return r.streamURL(r.cfg.URLs[j%len(r.cfg.URLs)], j) },
		head: func(ctx context.Context) ([]int64, []int64, error) {
			starts, err := r.k.startOffsets(ctx)
			if err != nil {
				return nil, nil, err
			}
			ends, err := r.k.endOffsets(ctx)
			return starts, ends, err
		},
	}
}
