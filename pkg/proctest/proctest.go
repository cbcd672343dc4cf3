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

// Service returns the environment variable name that with-services.sh (pkg/kafkatest) sets for a service it
// started, what being what the service is ("Kafka", "Redis", "a schema registry"). Without it the test is
// skipped, and fails under CI=true: there, a test that needs a service must run.
func Service(t testing.TB, name, what string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: under CI a test that needs %s must not be skipped (run it with `make test`)", name, what)
		}
		t.Skipf("%s is not set: run with `make test` or pkg/kafkatest/with-services.sh to get %s", name, what)
	}
	return v
}
