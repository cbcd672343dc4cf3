package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseConfigFloor(t *testing.T) {
	env := func(string) string { return "" }
	c, err := parseConfig([]string{"--mode=floor", "--connections=1000", "--rate=100", "--duration=30s"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Mode != modeFloor || c.FloorBin != ".run/bin/floor" || c.FloorWriters != 0 || c.Rate != 100 {
		t.Fatalf("config = %+v", c)
	}
	for _, args := range [][]string{
		{"--mode=floor", "--rate=0"},                                // the floor has no "as fast as possible"
		{"--mode=floor", "--proto=h2c"},                             // the floor speaks HTTP/1.1 only
		{"--mode=floor", "--proto=ws"},                              //
		{"--mode=floor", "--gateway-pid=123"},                       // the floor measures its own process
		{"--mode=floor", "--floor-bin="},                            //
		{"--mode=floor", "--floor-writers=-1"},                      //
		{"--mode=floor", "--url=http://10.0.0.1:8080"},              // loopback only, as ever
		{"--mode=floor", "--connections=0"},                         //
		{"--mode=floor", "--rate=100", "--gateway-pid=1", "--json"}, //
	} {
		if _, err := parseConfig(args, env, io.Discard); err == nil {
			t.Errorf("parseConfig(%v) accepted it", args)
		}
	}
	// Flags of the floor alone do not stop another mode: a script passes the same flags to both.
	if _, err := parseConfig([]string{"--mode=steady", "--floor-writers=2", "--floor-bin=x"}, env, io.Discard); err != nil {
		t.Fatalf("steady with floor flags: %v", err)
	}
}

func TestParseStopped(t *testing.T) {
	if n, err := parseStopped("stopped last=3012 conns=1000 frames=3000000 dropped=0"); err != nil || n != 3012 {
		t.Fatalf("parseStopped = %d, %v", n, err)
	}
	for _, bad := range []string{"", "127.0.0.1:4000", "stopped", "stopped last=", "stopped last=-1", "running last=5", "stopped conns=5"} {
		if n, err := parseStopped(bad); err == nil {
			t.Errorf("parseStopped(%q) = %d, want an error", bad, n)
		}
	}
}

// TestFindFloorBin finds a relative path from the working directory and from a directory below the one
// that holds it, and says how to build it when it is nowhere.
func TestFindFloorBin(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, ".run", "bin", "floor")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil { //nolint:gosec // an executable, on purpose
		t.Fatal(err)
	}
	sub := filepath.Join(root, "loadtest", "floor")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, sub} {
		t.Chdir(dir)
		got, err := findFloorBin(".run/bin/floor")
		if err != nil || got != bin {
			t.Fatalf("from %s: findFloorBin = %q, %v, want %s", dir, got, err, bin)
		}
	}
	if got, err := findFloorBin(bin); err != nil || got != bin {
		t.Fatalf("absolute: %q, %v", got, err)
	}
	if _, err := findFloorBin(filepath.Join(root, ".run")); err == nil {
		t.Fatal("a directory passed for the program")
	}
	t.Chdir(sub)
	if _, err := findFloorBin(".run/bin/nothing"); err == nil || !strings.Contains(err.Error(), "go build") {
		t.Fatalf("a missing program: %v, want an error that says how to build it", err)
	}
}

// TestStartFloorRefusesRemoteAddress: a floor program that says it listens anywhere but on loopback is not
// dialed, and is stopped.
func TestStartFloorRefusesRemoteAddress(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "floor")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 10.0.0.1:8080\nexec sleep 60\n"), 0o755); err != nil { //nolint:gosec // an executable, on purpose
		t.Fatal(err)
	}
	start := time.Now()
	f, err := startFloor(bin, nil)
	if err == nil {
		f.kill()
		t.Fatal("startFloor accepted a floor on 10.0.0.1")
	}
	if !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("err = %v, want a loopback refusal", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("startFloor took %v: the refused floor was not killed", d)
	}
}

// TestFloorMode builds the floor program and runs the floor mode against it with a few connections at a
// modest rate: every connection opens, gets every record the floor published, in order, and ends cleanly when
// the floor stops; the floor's CPU time and writes are measured, at about one write per frame.
func TestFloorMode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the floor program")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the floor program")
	}
	bin := filepath.Join(t.TempDir(), "floor")
	if out, err := exec.Command(goBin, "build", "-o", bin, "./floor").CombinedOutput(); err != nil {
		t.Fatalf("go build ./floor: %v\n%s", err, out)
	}
	cfg, err := parseConfig([]string{
		"--mode=floor", "--floor-bin=" + bin, "--connections=20", "--rate=200", "--duration=1s", "--drain-timeout=10s",
		"--floor-writers=2",
	}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res.judge(cfg)
	if !res.OK {
		t.Fatalf("failures %v, errors %v; %s", res.Failures, res.Errors, res.summary())
	}
	// 20 connections each get the records from their opening one to the last: at 200 a second for a second
	// and more, at least 150 each.
	if res.Opened != 20 || res.ConnErrors != 0 || res.Lost != 0 || res.Dup != 0 || res.Produced < 150 || res.Delivered < 20*150 {
		t.Fatalf("result: %s", res.summary())
	}
	if res.FloorFrames < 20*150 || res.FloorFrames > res.Delivered || res.Latency == nil || res.V1Share != 1 {
		t.Fatalf("frames in the window %d of %d delivered, latency %v, v1 share %v", res.FloorFrames, res.Delivered, res.Latency, res.V1Share)
	}
	if res.FloorWrites > 0 && (res.FloorFramesPerWrite < 0.5 || res.FloorFramesPerWrite > 1.05) {
		t.Fatalf("%.2f frames per write of the floor, want about one", res.FloorFramesPerWrite)
	}
	for _, want := range []string{"mode=floor result=ok conns=20/20 ", " floor_cpu=", " floor_frames/cpu_s=", " tool_cpu="} {
		if s := res.summary(); !strings.Contains(s, want) {
			t.Fatalf("summary %q lacks %q", s, want)
		}
	}
}
