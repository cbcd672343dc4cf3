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
			servicesBefore := stateDirs(t)
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
				// A user's Ctrl-C or SIGTERM is a clean stop: exit 0, so make reports no error.
				if err != nil {
					t.Fatalf("make run after %s: %v, want a clean exit:\n%s", how, err, printed())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("make run did not stop within 30 s of %s:\n%s", how, printed())
			}
			<-ended
			text = printed()
			if !strings.HasSuffix(text, "ssegate: stopped\n") {
				t.Errorf("make run did not end with its stopped line:\n%s", text)
			}
			if strings.Contains(text, "does not exist") {
				t.Errorf("a healthy start warned of a missing topic:\n%s", text)
			}
			if left := newDirs(t, servicesBefore); len(left) > 0 {
				t.Errorf("make run left its state folders behind: %v", left)
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

// stateDirs returns the state folders of pkg/kafkatest/with-services.sh runs under .run.
func stateDirs(t *testing.T) map[string]bool {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("..", "..", ".run", "services-*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// newDirs returns the state folders that were not there before.
func newDirs(t *testing.T, before map[string]bool) []string {
	t.Helper()
	var out []string
	for n := range stateDirs(t) {
		if !before[n] {
			out = append(out, n)
		}
	}
	return out
}

// TestMakeRunPortTaken: with one of its ports taken, make run stops at once with a line naming the setting
// that moves it, before building or starting anything (it used to start, print the bind error, and then
// announce "ready" because the other program answered on the port).
func TestMakeRunPortTaken(t *testing.T) {
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	for _, name := range []string{"PORT", "ADMIN_PORT", "LOGIN_PORT"} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = ln.Close() }()
			_, busy, _ := net.SplitHostPort(ln.Addr().String())
			ports := map[string]string{"PORT": freePort(t), "ADMIN_PORT": freePort(t), "LOGIN_PORT": freePort(t)}
			ports[name] = busy
			cmd := exec.Command("bash", filepath.Join("services", "demo", "run.sh"))
			cmd.Dir = filepath.Join("..", "..")
			cmd.Env = append(cleanEnv(), "KAFKA_BROKERS="+brokers)
			for k, v := range ports {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("make run with %s taken: %v, want exit 1:\n%s", name, err, out)
			}
			want := "ssegate: port " + busy + " is taken (" + name + ")"
			if !strings.HasPrefix(string(out), want) || strings.Contains(string(out), "building") {
				t.Fatalf("make run with %s taken said:\n%s\nwant it to start with %q and build nothing", name, out, want)
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
