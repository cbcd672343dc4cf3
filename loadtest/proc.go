package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
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

// procLine returns what follows prefix on the first line of r that starts with it, and that line. A file
// without such a line is an errProcFormat error naming prefix (and hint, when not empty).
func procLine(r io.Reader, prefix, hint string) (rest, line string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return rest, sc.Text(), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	if hint != "" {
		hint = " (" + hint + ")"
	}
	return "", "", fmt.Errorf("%w: no %s line%s", errProcFormat, strings.TrimSuffix(prefix, ":"), hint)
}

// parseStatusRSS returns VmRSS in bytes from the contents of /proc/<pid>/status.
func parseStatusRSS(r io.Reader) (int64, error) {
	rest, line, err := procLine(r, "VmRSS:", "a kernel thread or a zombie?")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(rest)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("%w: VmRSS line %q", errProcFormat, line)
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: VmRSS: %w", errProcFormat, err)
	}
	return kb << 10, nil
}

// parseIOSyscw returns syscw, the number of write system calls (write, writev, sendmsg and the like), from
// the contents of /proc/<pid>/io.
func parseIOSyscw(r io.Reader) (int64, error) {
	rest, _, err := procLine(r, "syscw:", "")
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: syscw: %w", errProcFormat, err)
	}
	return n, nil
}

// procSample is the CPU time, resident memory and write system calls of a set of processes at one moment.
// Writes is -1 when a process's /proc/<pid>/io cannot be read (it needs the right to trace the process).
type procSample struct {
	CPUSeconds float64
	RSSBytes   int64
	Writes     int64
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
		if s.Writes >= 0 {
			s.Writes = addWrites(s.Writes, dir+"/io")
		}
	}
	return s, nil
}

// parseNetstat returns the TcpExt counters named in names from the contents of /proc/net/netstat, which
// holds pairs of lines per protocol: "TcpExt: Name1 Name2 ..." and then "TcpExt: 1 2 ...". A name that is not
// there is an error.
func parseNetstat(r io.Reader, names ...string) (map[string]int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var header []string
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "TcpExt:")
		if !ok {
			continue
		}
		if header == nil {
			header = strings.Fields(rest)
			continue
		}
		values := strings.Fields(rest)
		if len(values) != len(header) {
			return nil, fmt.Errorf("%w: netstat TcpExt has %d names and %d values", errProcFormat, len(header), len(values))
		}
		out := make(map[string]int64, len(names))
		for _, want := range names {
			i := slices.Index(header, want)
			if i < 0 {
				return nil, fmt.Errorf("%w: netstat TcpExt has no %s", errProcFormat, want)
			}
			v, err := strconv.ParseInt(values[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: netstat %s: %w", errProcFormat, want, err)
			}
			out[want] = v
		}
		return out, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: no TcpExt lines in netstat", errProcFormat)
}

// listenDrops returns TcpExt ListenOverflows + ListenDrops of the network namespace: connection attempts a
// listener's full accept queue (or SYN queue) turned away. The client retries the SYN a second later, so a
// burst that overflows the backlog shows as a slow open rather than a failure.
func listenDrops(root string) (int64, error) {
	f, err := os.Open(root + "/net/netstat")
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	m, err := parseNetstat(f, "ListenOverflows", "ListenDrops")
	if err != nil {
		return 0, err
	}
	return m["ListenOverflows"] + m["ListenDrops"], nil
}

// parseNoFileLimit returns the soft "Max open files" limit from the contents of /proc/<pid>/limits
// ("Max open files  20000  20000  files"); 0 means unlimited.
func parseNoFileLimit(r io.Reader) (uint64, error) {
	rest, line, err := procLine(r, "Max open files", "")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(rest)
	if len(f) < 2 {
		return 0, fmt.Errorf("%w: limits line %q", errProcFormat, line)
	}
	if f[0] == "unlimited" {
		return 0, nil
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: open files limit: %w", errProcFormat, err)
	}
	return n, nil
}

// gatewayFDReserve is what a gateway keeps open besides its streams: listeners, Kafka and Redis connections,
// the epoll descriptor, its log.
const gatewayFDReserve = 64

// checkGatewayNoFile fails when a gateway's open-file limit is too low for the streams the run sends it
// (perGateway), which would otherwise show as connections that never open: the kernel completes the TCP
// handshake, but the gateway's accept fails with EMFILE and it never reads the request.
func checkGatewayNoFile(root string, pids []int, perGateway int) error {
	for _, pid := range pids {
		f, err := os.Open(root + "/" + strconv.Itoa(pid) + "/limits")
		if err != nil {
			return fmt.Errorf("gateway pid %d: %w", pid, err)
		}
		n, err := parseNoFileLimit(f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("gateway pid %d: %w", pid, err)
		}
		if need := uint64(perGateway + gatewayFDReserve); n != 0 && n < need {
			return fmt.Errorf("%w: gateway pid %d may open %d files, and %d streams need about %d: "+
				"raise its hard limit before starting it (ulimit -Hn, as root; loadtest/local.sh does when it can)",
				errNoFile, pid, n, perGateway, need)
		}
	}
	return nil
}

// addWrites adds the syscw of the /proc/<pid>/io file at path to n, or returns -1 when it cannot be read.
func addWrites(n int64, path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return -1
	}
	defer func() { _ = f.Close() }()
	w, err := parseIOSyscw(f)
	if err != nil {
		return -1
	}
	return n + w
}
