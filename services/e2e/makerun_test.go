package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// TestMakeRun runs `make run`'s script the way a newcomer does, against the test's Kafka (KAFKA_BROKERS set, so
// it starts none): it prints the broker and a kcat command, announces the dashboard only once the stream
// answers, prints no terminal codes, and stops everything it started at SIGTERM (to the script alone, as a
// process manager or `kill` sends it) and at Ctrl-C (SIGINT to its whole process group, as a terminal does).
func TestMakeRun(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	for _, how := range []string{"SIGTERM", "Ctrl-C"} {
		t.Run(how, func(t *testing.T) {
			port, admin, login := freePort(t), freePort(t), freePort(t)
			cmd := exec.Command("bash", filepath.Join("services", "demo", "run.sh"))
			cmd.Dir = filepath.Join("..", "..")
			cmd.Env = append(cleanEnv(), "KAFKA_BROKERS="+brokers, "PORT="+port, "ADMIN_PORT="+admin, "LOGIN_PORT="+login)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stdout = io.Discard
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pgid := cmd.Process.Pid
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			var mu sync.Mutex
			var out bytes.Buffer
			ready, ended := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(ended)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					mu.Lock()
					out.WriteString(sc.Text() + "\n")
					mu.Unlock()
					if strings.HasPrefix(sc.Text(), "ssegate: Ctrl-C stops everything.") { // the last line of the announcement
						close(ready)
					}
				}
			}()
			printed := func() string {
				mu.Lock()
				defer mu.Unlock()
				return out.String()
			}
			select {
			case <-ready:
			case <-ended:
				t.Fatalf("make run ended before it was ready:\n%s", printed())
			case <-time.After(3 * time.Minute):
				t.Fatalf("make run did not say it was ready within 3 minutes:\n%s", printed())
			}
			// Ready means the stream answers, on the port the line names.
			resp, err := http.Get("http://127.0.0.1:" + port + "/streams/orders")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("the stream make run announced: %v %v", resp, err)
			}
			_ = resp.Body.Close()
			text := printed()
			for _, want := range []string{"kcat -b " + brokers + " -C -t orders", "http://127.0.0.1:" + port + "/", "http://127.0.0.1:" + login + "/", "http://127.0.0.1:" + admin + "/metrics"} {
				if !strings.Contains(text, want) {
					t.Errorf("make run did not print %q:\n%s", want, text)
				}
			}
			if strings.ContainsRune(text, '\x1b') {
				t.Errorf("make run printed terminal codes:\n%q", text)
			}

			if how == "SIGTERM" {
				_ = cmd.Process.Signal(syscall.SIGTERM)
			} else {
				_ = syscall.Kill(-pgid, syscall.SIGINT)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				// Stopped by a signal, the script exits 130 or 143: an error to Wait, and expected.
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Fatalf("make run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("make run did not stop within 30 s of %s:\n%s", how, printed())
			}
			// Nothing it started is left: no process of its group, no port still taken.
			kafkatest.WaitFor(t, 5*time.Second, "make run's processes to be gone", func() bool {
				return syscall.Kill(-pgid, 0) != nil
			})
			for _, p := range []string{port, admin, login} {
				if c, err := net.DialTimeout("tcp", "127.0.0.1:"+p, time.Second); err == nil {
					_ = c.Close()
					t.Errorf("port %s still answers after make run stopped", p)
				}
			}
		})
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(proctest.FreeAddr(t))
	return port
}
