// Package proctest holds small helpers for tests that run the services as processes or listen on loopback:
// a free address to listen on, and a field of a process's /proc status.
package proctest

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// Status returns the value of field in /proc/<pid>/status, such as "41236 kB" for VmRSS.
func Status(t testing.TB, pid int, field string) string {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && k == field {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return ""
}
