package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func main() {
	os.Exit(mainStatus())
}

// mainStatus runs the tool and returns the exit status: 0 when every check passed, 1 when a check failed or
// the run could not be done, 2 for bad flags.
func mainStatus() int {
	cfg, err := parseConfig(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 2
	}
	if cfg.CPUProfile != "" {
		stopProfile, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtest:", err)
			return 1
		}
		defer stopProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 1
	}
	res.judge(cfg)
	if err := res.write(os.Stdout, os.Stderr, cfg.JSON); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		return 1
	}
	if !res.OK {
		return 1
	}
	return 0
}

// startCPUProfile starts profiling the tool into path; the returned function stops and closes it.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path) //nolint:gosec // the operator names the profile file
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "loadtest: cpu profile:", err)
		}
	}, nil
}
