package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseConfigWavesMode(t *testing.T) {
	env := func(string) string { return "" }
	c, err := parseConfig([]string{"--mode=waves", "--waves=120", "--duration=60s"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != modeWaves || c.Waves != 120 || !c.WaveStart.IsZero() || c.WavesProcess || c.WavesNice != 19 {
		t.Fatalf("parsed: %+v", c)
	}
	start := "2025-01-02T03:04:05.123456789Z"
	c, err = parseConfig([]string{"--mode=waves", "--waves=1", "--duration=60s", "--wave-start=" + start}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := time.Parse(time.RFC3339Nano, start); !c.WaveStart.Equal(want) {
		t.Fatalf("--wave-start: %v, want %v", c.WaveStart, want)
	}
	c, err = parseConfig([]string{"--waves=10", "--duration=60s", "--waves-process", "--waves-nice=5"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.WavesProcess || c.WavesNice != 5 {
		t.Fatalf("parsed: %+v", c)
	}
	// A run without waves takes --waves-process and does nothing with it, so a script can pass it to both.
	if _, err := parseConfig([]string{"--waves=0", "--waves-process"}, env, io.Discard); err != nil {
		t.Fatalf("--waves-process without waves: %v", err)
	}
	for _, tc := range []struct {
		args   []string
		wantIn string
	}{
		{[]string{"--mode=waves", "--duration=60s"}, "want --waves=N"},
		{[]string{"--mode=waves", "--waves=10"}, "less than --duration"},
		{[]string{"--mode=waves", "--waves=10", "--duration=60s", "--proto=h2c"}, "--proto=h1 only"},
		{[]string{"--mode=waves", "--waves=10", "--duration=60s", "--wave-cut=30s"}, "less than --wave-every"},
		{[]string{"--mode=waves", "--waves=10", "--duration=60s", "--prefill-records=10"}, "--prefill-records"},
		{[]string{"--mode=waves", "--waves=10", "--duration=60s", "--waves-process"}, "--waves-process: steady mode only"},
		{[]string{"--mode=waves", "--waves=10", "--duration=60s", "--wave-start=yesterday"}, "--wave-start: want a time"},
		{[]string{"--waves=10", "--duration=60s", "--wave-start=2025-01-02T03:04:05Z"}, "--wave-start: with --mode=waves only"},
		{[]string{"--mode=storm", "--waves-process"}, "--waves-process: steady mode only"},
		{[]string{"--waves=10", "--duration=60s", "--waves-process", "--waves-nice=-1"}, "--waves-nice"},
		{[]string{"--waves=10", "--duration=60s", "--waves-process", "--waves-nice=20"}, "--waves-nice"},
		{[]string{"--mode=nope"}, "steady, idle, storm, slow, resume, floor or waves"},
	} {
		_, err := parseConfig(tc.args, env, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.wantIn) {
			t.Errorf("parseConfig(%v) = %v, want an error saying %q", tc.args, err, tc.wantIn)
		}
	}
}

// TestWavesArgv: the waves' process gets the run's targets and wave flags, the run's start, and parses them
// back into the same schedule in the waves mode.
func TestWavesArgv(t *testing.T) {
	env := func(string) string { return "" }
	cfg, err := parseConfig([]string{
		"--url=http://127.0.0.1:8081,http://127.0.0.1:8082", "--admin-url=http://127.0.0.1:9191,http://127.0.0.1:9192",
		"--topic=waves-with", "--brokers=127.0.0.1:19092", "--connections=1000", "--rate=100", "--duration=60s",
		"--waves=120", "--wave-every=20s", "--wave-behind=4800", "--wave-cut=500ms", "--waves-process",
	}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)
	argv := wavesArgv(cfg, "/x/loadtest", t0)
	if !slices.Equal(argv[:4], []string{"nice", "-n", "19", "/x/loadtest"}) {
		t.Fatalf("argv %q: want it to start with nice -n 19 and the tool", argv)
	}
	child, err := parseConfig(argv[4:], env, io.Discard)
	if err != nil {
		t.Fatalf("the waves' process refuses its flags %q: %v", argv[4:], err)
	}
	if child.Mode != modeWaves || !slices.Equal(child.URLs, cfg.URLs) || !slices.Equal(child.AdminURLs, cfg.AdminURLs) ||
		child.Topic != cfg.Topic || !slices.Equal(child.Brokers, cfg.Brokers) || child.Waves != 120 ||
		child.WaveEvery != cfg.WaveEvery || child.WaveBehind != 4800 || child.WaveCut != cfg.WaveCut ||
		child.Duration != cfg.Duration || !child.WaveStart.Equal(t0) || !child.JSON || child.ReadyWait != 0 {
		t.Fatalf("the waves' process's flags %q parse as %+v", argv[4:], child)
	}
	cfg.WavesNice = 0
	if argv := wavesArgv(cfg, "/x/loadtest", t0); argv[0] != "/x/loadtest" {
		t.Fatalf("argv %q: with nice 0, want the tool alone", argv)
	}
}

// wavesResult is what a waves' process prints for a run of two waves of 3 clients.
func wavesResult() (summary, jsonLine string) {
	r := result{Mode: modeWaves, Proto: protoH1, ToolCPUSeconds: 1.5, Waves: &waveStats{
		Waves: 2, Clients: 6, Opened: 6, Frames: 600, Bytes: 150000, FramesP50: 100,
		Runs: []waveRun{{At: 20, ID: "v1:0-9", Opened: 3, Frames: 300}, {At: 40, ID: "v1:0-19", Opened: 3, Frames: 300}},
	}}
	r.judge(config{Mode: modeWaves})
	var out strings.Builder
	if err := r.write(&out, io.Discard, true); err != nil {
		panic(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return lines[0], lines[1]
}

func TestWavesModeSummary(t *testing.T) {
	summary, _ := wavesResult()
	want := "loadtest mode=waves result=ok elapsed=0.0s waves=2 wave_clients=6 wave_opened=6 wave_frames=600 " +
		"wave_frames/client_p50=100 wave_conn_errors=0 tool_cpu=1.50s"
	if summary != want {
		t.Fatalf("summary\n%s\nwant\n%s", summary, want)
	}
}

func TestWavesOutput(t *testing.T) {
	summary, jsonLine := wavesResult()
	st := wavesOutput([]byte(summary+"\n"+jsonLine+"\n"), nil, 19)
	if st.Waves != 2 || st.Clients != 6 || st.Frames != 600 || st.Bytes != 150000 || len(st.Runs) != 2 || st.Process == nil ||
		st.Process.Nice != 19 || st.Process.CPUSeconds != 1.5 || st.Process.summary != summary || st.Process.Err != "" {
		t.Fatalf("stats %+v, process %+v", st, st.Process)
	}
	if f := st.failures(); len(f) != 0 {
		t.Fatalf("failures %q", f)
	}
	r := result{Mode: modeSteady, Connections: 1, Opened: 1, Waves: st}
	r.judge(config{Mode: modeSteady})
	var out strings.Builder
	if err := r.write(&out, io.Discard, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || lines[0] != summary || !strings.Contains(lines[1], " waves=2 wave_clients=6 ") ||
		!strings.Contains(lines[1], " wave_proc=nice19 wave_proc_cpu=1.50s") {
		t.Fatalf("steady's output:\n%s\nwant the waves' line, then steady's with the waves' figures", out.String())
	}
	// A process that failed its checks printed its figures all the same: they judge it, not its status.
	if st := wavesOutput([]byte(summary+"\n"+jsonLine+"\n"), &exec.ExitError{}, 19); st.Process.Err != "" || st.Waves != 2 {
		t.Fatalf("an exit status with a result: %+v, process %+v", st, st.Process)
	}
	// One that printed nothing, or no JSON line, failed.
	for _, out := range []string{"", summary + "\n", summary + "\n{not json\n"} {
		st := wavesOutput([]byte(out), errors.New("exit status 1"), 19)
		f := strings.Join(st.failures(), "; ")
		if st.Waves != 0 || !strings.Contains(f, "the waves' process: ") || !strings.Contains(f, "exit status 1") {
			t.Errorf("output %q: stats %+v, failures %q", out, st, f)
		}
	}
}

// TestStartWavesProcess runs a stand-in for the waves' process: it must be started under nice with the
// waves mode's flags, and what it prints must come back as the waves' figures.
func TestStartWavesProcess(t *testing.T) {
	if _, err := exec.LookPath("nice"); err != nil {
		t.Skip("no nice command")
	}
	summary, jsonLine := wavesResult()
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" >" + args + "\n" +
		"nice >>" + args + "\n" +
		"cat <<'END'\n" + summary + "\n" + jsonLine + "\nEND\n"
	exe := filepath.Join(dir, "waves")
	if err := os.WriteFile(exe, []byte(script), 0o700); err != nil { //nolint:gosec // a test script of its own
		t.Fatal(err)
	}
	cfg, err := parseConfig([]string{"--waves=3", "--duration=60s", "--waves-process"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{cfg: cfg, wavesExe: exe}
	st := r.startWavesProcess(context.Background(), time.Now())()
	if st.Process == nil || st.Process.Err != "" || st.Waves != 2 || st.Process.summary != summary {
		t.Fatalf("stats %+v, process %+v", st, st.Process)
	}
	b, err := os.ReadFile(args) //nolint:gosec // the test's own file
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(b)), "\n")
	if !slices.Contains(got, "--mode=waves") || !slices.Contains(got, "--waves=3") || got[len(got)-1] != "19" {
		t.Fatalf("the process got %q, want the waves mode's flags and nice 19", got)
	}
	r.wavesExe = filepath.Join(dir, "missing")
	if st := r.startWavesProcess(context.Background(), time.Now())(); st.Process == nil || st.Process.Err == "" {
		t.Fatalf("a process that cannot start: %+v", st)
	}
}
