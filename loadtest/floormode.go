package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// findFloorBin returns the floor program named by path: as it is when absolute; otherwise the first file
// it names relative to the working directory or one of the directories above it, so that the default,
// .run/bin/floor, is found from the repository's root and from any directory below it.
func findFloorBin(path string) (string, error) {
	if filepath.IsAbs(path) {
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			return "", fmt.Errorf("floor program %s: %w", path, notFound(err))
		}
		return path, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; {
		p := filepath.Join(dir, path)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("floor program %s not found in %s or any directory above it: "+
				"build it with `go build -o .run/bin/floor ./loadtest/floor`, or name it with --floor-bin", path, wd)
		}
		dir = parent
	}
}

// notFound is err, or fs.ErrNotExist when there was none (the path is there but is not a file).
func notFound(err error) error {
	if err == nil {
		return fs.ErrNotExist
	}
	return err
}

// floorProc is a running floor program, which prints the address it listens on as its first line and
// "stopped last=<n> ..." when it has stopped.
type floorProc struct {
	cmd   *exec.Cmd
	addr  string
	lines chan string   // its stdout, line by line; closed at the end
	done  chan struct{} // closed once it has exited
	err   error         // how it exited, once done is closed
}

// floorStartTimeout bounds the wait for the floor's first line.
const floorStartTimeout = 10 * time.Second

// startFloor starts the floor program bin with args and waits for the address it listens on, which must be
// on loopback.
func startFloor(bin string, args []string) (*floorProc, error) {
	cmd := exec.Command(bin, args...) //nolint:gosec,noctx // the operator names the floor; it is stopped by stop or kill, not by a context
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	f := &floorProc{cmd: cmd, lines: make(chan string, 16), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
		close(f.lines)
		// Wait closes the pipe, so it comes after the last read.
		f.err = cmd.Wait()
		close(f.done)
	}()
	line, err := f.line(floorStartTimeout)
	if err == nil {
		_, err = checkGatewayURL("http://"+line, false)
	}
	if err != nil {
		f.kill()
		return nil, fmt.Errorf("floor: its address: %w", err)
	}
	f.addr = line
	return f, nil
}

// pid is the floor's process id.
func (f *floorProc) pid() int { return f.cmd.Process.Pid }

// line returns the floor's next line on stdout, waiting up to timeout.
func (f *floorProc) line(timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-f.lines:
		if !ok {
			<-f.done
			if f.err != nil {
				return "", fmt.Errorf("the floor exited without a line: %w", f.err)
			}
			return "", errors.New("the floor exited without a line")
		}
		return l, nil
	case <-t.C:
		return "", fmt.Errorf("no line from the floor within %v", timeout)
	}
}

// stop sends the floor SIGTERM and returns the last record it published, from its "stopped" line, once it
// has exited. Waiting for each step is bounded by timeout.
func (f *floorProc) stop(timeout time.Duration) (int64, error) {
	if err := f.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	line, err := f.line(timeout)
	if err != nil {
		return 0, fmt.Errorf("floor: %w", err)
	}
	last, err := parseStopped(line)
	if err != nil {
		return 0, err
	}
	select {
	case <-f.done:
	case <-time.After(timeout):
		return last, fmt.Errorf("floor: still running %v after its stop", timeout)
	}
	if f.err != nil {
		return last, fmt.Errorf("floor: %w", f.err)
	}
	return last, nil
}

// kill ends the floor at once if it still runs, and waits for it.
func (f *floorProc) kill() {
	select {
	case <-f.done:
		return
	default:
	}
	_ = f.cmd.Process.Kill()
	for range f.lines {
		// Drained, so that the reader gets to Wait.
	}
	<-f.done
}

// parseStopped returns n from the floor's last line, "stopped last=<n> conns=... frames=... dropped=...".
func parseStopped(line string) (int64, error) {
	rest, ok := strings.CutPrefix(line, "stopped ")
	for f := range strings.FieldsSeq(rest) {
		if v, found := strings.CutPrefix(f, "last="); ok && found {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil && n >= 0 {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("floor: %q is not its stopped line", line)
}

// floorArgs are the floor program's flags for the run: the tool's rate, its value size and, when given, the
// floor's writers.
func (r *runner) floorArgs() []string {
	args := []string{
		"--listen=127.0.0.1:0",
		"--rate=" + strconv.FormatFloat(r.cfg.Rate, 'g', -1, 64),
		"--value-bytes=" + strconv.Itoa(r.cfg.Size),
		"--drain=" + r.cfg.DrainWait.String(),
	}
	if r.cfg.FloorWriters > 0 {
		args = append(args, "--writers="+strconv.Itoa(r.cfg.FloorWriters))
	}
	return args
}

// floor: the floor program (loadtest/floor) serves --connections streams at --rate records a second, read by
// the same clients, parser and checks as a gateway's; the floor's CPU time and write system calls are measured
// from /proc as a gateway's are, over --duration once every stream is open. Then the floor stops, and every
// stream must have every record it published, in order, and end.
func (r *runner) floor(ctx context.Context) error {
	bin, err := findFloorBin(r.cfg.FloorBin)
	if err != nil {
		return err
	}
	fp, err := startFloor(bin, r.floorArgs())
	if err != nil {
		return err
	}
	defer fp.kill()
	r.cfg.URLs = []string{"http://" + fp.addr}
	r.cfg.GatewayPIDs = []int{fp.pid()}
	if err := checkGatewayNoFile("/proc", r.cfg.GatewayPIDs, r.cfg.Connections); err != nil {
		return err
	}
	r.clients = make([]*client, r.cfg.Connections)
	for i := range r.clients {
		r.clients[i] = &client{n: i}
	}
	url := r.streamURL(r.cfg.URLs[0], 0)
	g, opened, err := r.connect(ctx, func(int) connOpts { return connOpts{url: url, measure: true} }, noDelay, 0)
	r.res.Opened = opened
	if err != nil {
		return err
	}
	defer g.stop()
	var h histogram
	r.sh.hist.Store(&h)
	p0, s0, f0, t0, err := r.floorSample()
	if err != nil {
		return err
	}
	sleep(ctx, r.cfg.Duration)
	p1, s1, f1, t1, err := r.floorSample()
	if err != nil {
		return err
	}
	r.endsClean.Store(true)
	last, err := fp.stop(r.cfg.DrainWait)
	if err != nil {
		return err
	}
	ends := []int64{last + 1}
	if err := r.waitLevel(ctx, r.clients, ends); err != nil {
		return err
	}
	g.stop()
	r.floorResult(p1.sub(p0), s1.CPUSeconds-s0.CPUSeconds, f1-f0, t1.Sub(t0), &h)
	r.res.Produced = last
	r.res.ConnErrors = r.sh.connErrs.Load()
	r.account(r.clients, ends)
	if f := r.sh.frames.Load(); f > 0 {
		r.res.V1Share = float64(r.res.V1IDs) / float64(f)
	}
	return nil
}

// floorSample samples the floor's process, the tool's own, and the frames received so far, at one moment.
func (r *runner) floorSample() (floorP, tool procSample, frames int64, at time.Time, err error) {
	if floorP, err = r.procs(); err != nil {
		return floorP, tool, 0, at, err
	}
	if tool, err = self(); err != nil {
		return floorP, tool, 0, at, err
	}
	return floorP, tool, r.sh.frames.Load(), time.Now(), nil
}

// sub returns the CPU seconds and write system calls from b to a; Writes is -1 when either could not be read.
func (a procSample) sub(b procSample) procSample {
	d := procSample{CPUSeconds: a.CPUSeconds - b.CPUSeconds, RSSBytes: a.RSSBytes, Writes: -1}
	if a.Writes >= 0 && b.Writes >= 0 {
		d.Writes = a.Writes - b.Writes
	}
	return d
}

// floorResult fills the floor mode's figures from the measured window: the floor's CPU time and writes
// (floorD), the tool's CPU seconds, the frames the clients received and how long it lasted.
func (r *runner) floorResult(floorD procSample, toolCPU float64, frames int64, elapsed time.Duration, h *histogram) {
	r.res.Elapsed = elapsed
	r.res.FloorFrames = frames
	r.res.FloorCPUSeconds = floorD.CPUSeconds
	r.res.ToolCPUSeconds = toolCPU
	if elapsed > 0 {
		r.res.DeliveriesPerSec = float64(frames) / elapsed.Seconds()
	}
	if floorD.CPUSeconds > 0 {
		r.res.FloorFramesPerCPUSecond = float64(frames) / floorD.CPUSeconds
	}
	if floorD.Writes > 0 {
		r.res.FloorWrites = floorD.Writes
		r.res.FloorFramesPerWrite = float64(frames) / float64(floorD.Writes)
	}
	r.res.Latency = latencyOf(h)
	if f := r.sh.frames.Load(); f > 0 {
		r.res.IDBytesPerFrame = float64(r.sh.idBytes.Load()) / float64(f)
		r.res.FrameBytesPerFrame = float64(r.sh.bodyBytes.Load()) / float64(f)
	}
}
