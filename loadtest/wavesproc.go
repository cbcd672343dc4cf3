package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Steady's waves in a process of their own. In a deployment the clients that resume are on other machines
// than the live readers; run in the tool's process, the wave clients take the CPU the live readers'
// goroutines need, and the readers' latency then shows the tool's own scheduling as much as the gateway's.
// With --waves-process, steady starts this tool again with --mode=waves when producing starts, under nice
// (--waves-nice, 19 by default), so that on a machine the clients share with the gateway the wave clients
// take CPU only when nothing else wants it; --mode=waves runs the same schedule from the same moment
// (--wave-start) with no readers and no producing, and prints its own summary line.

// waveProcess is what steady knows of the process its waves ran in.
type waveProcess struct {
	Nice       int     `json:"nice"`
	CPUSeconds float64 `json:"cpu_s"`           // the process's CPU time over its waves
	Err        string  `json:"error,omitempty"` // how the process failed when it gave no result
	// summary is the process's summary line, printed before the run's own.
	summary string
}

// wavesMode runs the waves alone (--mode=waves): from --wave-start, or from now, every --wave-every until
// --duration, against --url and the topic's offsets in Kafka. It neither produces nor opens readers.
func (r *runner) wavesMode(ctx context.Context) error {
	t0 := r.cfg.WaveStart
	if t0.IsZero() {
		t0 = time.Now()
	}
	cpu0, err := r.markCPU()
	if err != nil {
		return err
	}
	st := r.waveSchedule().run(ctx, t0)
	cpu1, err := r.markCPU()
	if err != nil {
		return err
	}
	r.res.Waves = st
	r.res.Elapsed = time.Since(t0)
	r.chargeCPU(cpu0, cpu1)
	return nil
}

// wavesArgv returns the command that runs steady's waves in a process of their own: the tool (exe) in
// --mode=waves with the run's wave flags and targets, counting its waves from t0, under nice unless
// --waves-nice is 0. It asks for the JSON line, which steady reads the waves' figures from, and skips the
// readiness check steady has already made.
func wavesArgv(cfg config, exe string, t0 time.Time) []string {
	var argv []string
	if cfg.WavesNice > 0 {
		argv = append(argv, "nice", "-n", strconv.Itoa(cfg.WavesNice))
	}
	return append(argv, exe,
		"--mode="+modeWaves,
		"--url="+strings.Join(cfg.URLs, ","),
		"--admin-url="+strings.Join(cfg.AdminURLs, ","),
		"--topic="+cfg.Topic,
		"--brokers="+strings.Join(cfg.Brokers, ","),
		"--waves="+strconv.Itoa(cfg.Waves),
		"--wave-every="+cfg.WaveEvery.String(),
		"--wave-behind="+strconv.Itoa(cfg.WaveBehind),
		"--wave-cut="+cfg.WaveCut.String(),
		"--duration="+cfg.Duration.String(),
		"--wave-start="+t0.Format(time.RFC3339Nano),
		"--ready-timeout=0",
		"--json",
	)
}

// startWavesProcess starts steady's waves in a process of their own (wavesArgv), whose errors go to the
// tool's, and returns a function that waits for it to end and returns what its waves did, read from its
// JSON line. When ctx ends the process is told to stop (SIGTERM), as the tool is.
func (r *runner) startWavesProcess(ctx context.Context, t0 time.Time) func() *waveStats {
	failed := func(err error) func() *waveStats {
		st := &waveStats{Process: &waveProcess{Nice: r.cfg.WavesNice, Err: err.Error()}}
		return func() *waveStats { return st }
	}
	exe := r.wavesExe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return failed(err)
		}
	}
	argv := wavesArgv(r.cfg, exe, t0)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...) //nolint:gosec // the tool itself, with its own flags
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		return failed(err)
	}
	done := make(chan *waveStats, 1)
	go func() {
		err := cmd.Wait()
		done <- wavesOutput(out.Bytes(), err, r.cfg.WavesNice)
	}()
	return func() *waveStats { return <-done }
}

// wavesOutput reads what the waves' process (--mode=waves --json) printed, and how it exited (waitErr), into
// the waves' figures. A process that printed its result is judged by its figures, as waves run in the
// tool's own process are, whatever its exit status; one that printed none failed.
func wavesOutput(out []byte, waitErr error, nice int) *waveStats {
	p := &waveProcess{Nice: nice}
	var res *result
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("loadtest mode="+modeWaves+" ")):
			p.summary = string(line)
		case bytes.HasPrefix(line, []byte("{")):
			res = new(result)
			if err := json.Unmarshal(line, res); err != nil {
				res = nil
				p.Err = fmt.Sprintf("its JSON line: %v", err)
			}
		}
	}
	if res == nil || res.Waves == nil {
		if p.Err == "" {
			p.Err = "it printed no result"
		}
		if waitErr != nil {
			p.Err += fmt.Sprintf(" (%v)", waitErr)
		}
		return &waveStats{Process: p}
	}
	var exit *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exit) {
		// The process ended well enough to print its result, but not as a process should (its output held
		// open past WaitDelay, say).
		p.Err = waitErr.Error()
	}
	p.CPUSeconds = res.ToolCPUSeconds
	st := res.Waves
	st.Process = p
	return st
}
