package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat. It is 100 on every Linux
// architecture Go supports (the kernel ABI fixes it, whatever CONFIG_HZ is).
const clockTicks = 100

var errProcFormat = errors.New("unexpected /proc format")

// parseStatCPU returns utime+stime in seconds from the contents of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may hold spaces and parentheses, so fields are counted from the last ")".
func parseStatCPU(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: stat without a command name", errProcFormat)
	}
	// After ")": state is field 3; utime and stime are fields 14 and 15.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: stat has %d fields after the name", errProcFormat, len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("%w: stat utime/stime: %w", errProcFormat, err)
	}
	return float64(ut+st) / clockTicks, nil
}

// parseStatusRSS returns VmRSS in bytes from the contents of /proc/<pid>/status.
func parseStatusRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%w: VmRSS line %q", errProcFormat, sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: VmRSS: %w", errProcFormat, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%w: no VmRSS line (a kernel thread or a zombie?)", errProcFormat)
}

// procSample is the CPU time and resident memory of a set of processes at one moment.
type procSample struct {
	CPUSeconds float64
	RSSBytes   int64
}

// sampleProcs sums CPU seconds and RSS over pids, reading under root (normally "/proc").
func sampleProcs(root string, pids []int) (procSample, error) {
	var s procSample
	for _, pid := range pids {
		dir := root + "/" + strconv.Itoa(pid)
		stat, err := os.ReadFile(dir + "/stat")
		if err != nil {
			return s, fmt.Errorf("gateway pid %d: %w", pid, err)
		}
		cpu, err := parseStatCPU(stat)
		if err != nil {
			return s, fmt.Errorf("gateway pid %d: %w", pid, err)
		}
		f, err := os.Open(dir + "/status")
		if err != nil {
			return s, fmt.Errorf("gateway pid %d: %w", pid, err)
		}
		rss, err := parseStatusRSS(f)
		_ = f.Close()
		if err != nil {
			return s, fmt.Errorf("gateway pid %d: %w", pid, err)
		}
		s.CPUSeconds += cpu
		s.RSSBytes += rss
	}
	return s, nil
}
