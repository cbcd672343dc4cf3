package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
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

// nginxBinary returns the nginx binary to run: $NGINX_BIN (pkg/kafkatest/with-services.sh sets it to the copy
// that services/e2e/nginx.sh unpacked from Debian's package), else /usr/sbin/nginx. Without one the test is
// skipped, and under CI=true it fails. (Not $NGINX: nginx reads that variable for inherited sockets.)
func nginxBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("NGINX_BIN")
	if bin == "" {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		msg := "no nginx at " + bin + " (services/e2e/nginx.sh fetch unpacks Debian's package, which make test then passes as NGINX_BIN)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: under CI the proxy tests must run", msg)
		}
		t.Skip(msg)
	}
	return bin
}

// nginx is a running nginx master process with its own prefix, configuration, pid file, logs and temporary
// paths in a temporary directory, listening on loopback only, in front of an upstream of gateways.
type nginx struct {
	bin, dir, addr string
	cmd            *exec.Cmd
	done           chan struct{}

	mu         sync.Mutex // held while the configuration is written and loaded
	setup      nginxSetup
	generation int
}

// nginxSetup is how nginx proxies to the gateways. The zero value, with servers, proxies with the settings the
// chart's Ingress annotations give ingress-nginx (docs/kubernetes.md): no buffering either way, hour-long read
// and send timeouts, HTTP/1.1 to the upstream with an empty Connection header, and upstream keep-alive as
// ingress-nginx has it. The upstream's servers keep nginx's defaults (max_fails=1, fail_timeout=10s, and a
// refused connection is tried on the next server) unless serverParams says otherwise.
type nginxSetup struct {
	servers      []string // the upstream's server addresses
	serverParams string   // parameters of every server line, such as "max_fails=0"; "" keeps the defaults
	defaults     bool     // proxy_pass alone: nginx's defaults (HTTP/1.0 to the upstream, buffering unless the answer says no)
}

// startNginx runs nginx in front of upstreams, set up as the chart's Ingress annotations set up ingress-nginx,
// and stops it when the test ends.
func startNginx(t *testing.T, bin string, upstreams []string) *nginx {
	t.Helper()
	return startNginxWith(t, bin, nginxSetup{servers: upstreams})
}

// startNginxWith runs nginx set up as setup says, and stops it when the test ends.
func startNginxWith(t *testing.T, bin string, setup nginxSetup) *nginx {
	t.Helper()
	n := &nginx{bin: bin, dir: t.TempDir(), addr: proctest.FreeAddr(t), done: make(chan struct{}), setup: setup}
	n.writeConfig(t)
	n.cmd = exec.CommandContext(context.Background(), bin, n.args()...)
	n.cmd.Env = nginxEnv()
	out, err := os.Create(filepath.Join(n.dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	n.cmd.Stdout, n.cmd.Stderr = out, out
	if err := n.cmd.Start(); err != nil {
		_ = out.Close()
		t.Fatalf("start nginx: %v", err)
	}
	go func() {
		_ = n.cmd.Wait()
		_ = out.Close()
		close(n.done)
	}()
	t.Cleanup(func() {
		// SIGTERM is nginx's fast shutdown: the workers close their connections at once.
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.done:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			t.Error("nginx did not stop within 10s of SIGTERM")
		}
		if t.Failed() {
			for _, name := range []string{"stderr.log", "error.log"} {
				b, _ := os.ReadFile(filepath.Join(n.dir, name))
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("--- nginx %s (tail) ---\n%s", name, b)
			}
		}
	})
	n.waitGeneration(t)
	return n
}

// args are the command-line options that tie a run of nginx to the test's directory: the prefix, the
// configuration and the error log used before the configuration is read.
func (n *nginx) args(more ...string) []string {
	return append([]string{"-p", n.dir + "/", "-c", filepath.Join(n.dir, "nginx.conf"), "-e", filepath.Join(n.dir, "error.log")}, more...)
}

// nginxEnv is the test's environment without NGINX, which nginx would take for a list of inherited
// listening sockets.
func nginxEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NGINX=") {
			out = append(out, kv)
		}
	}
	return out
}

// setUpstreams writes a configuration whose upstream is upstreams, has the master process reload it
// (nginx -s reload) and returns once new connections are served with it.
func (n *nginx) setUpstreams(t *testing.T, upstreams []string) {
	t.Helper()
	n.mu.Lock()
	n.setup.servers = upstreams
	n.mu.Unlock()
	n.writeConfig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.bin, n.args("-s", "reload")...)
	cmd.Env = nginxEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nginx -s reload: %v\n%s", err, out)
	}
	n.waitGeneration(t)
}

// writeConfig writes nginx.conf with the setup and a new generation number.
func (n *nginx) writeConfig(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.generation++
	var servers strings.Builder
	for _, u := range n.setup.servers {
		fmt.Fprintf(&servers, "\t\tserver %s", u)
		if n.setup.serverParams != "" {
			servers.WriteString(" " + n.setup.serverParams)
		}
		servers.WriteString(";\n")
	}
	proxy := `proxy_pass http://gateways;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
			proxy_request_buffering off;
			proxy_read_timeout 3600s;
			proxy_send_timeout 3600s;`
	keepalive := "\t\tkeepalive 32;\n"
	if n.setup.defaults {
		proxy, keepalive = "proxy_pass http://gateways;", ""
	}
	user := ""
	if os.Geteuid() == 0 {
		// As root the workers would run as nobody, who cannot enter the test's directory.
		user = "user root;"
	}
	conf := fmt.Sprintf(`# Written by the ssegate tests; generation %[1]d.
%[2]s
daemon off;
master_process on;
worker_processes 1;
pid %[3]s/nginx.pid;
error_log %[3]s/error.log notice;
events {
	worker_connections 1024;
}
http {
	log_format upstream '$time_iso8601 $status $request_time "$request_uri" upstream=$upstream_addr $upstream_status';
	access_log %[3]s/access.log upstream;
	client_body_temp_path %[3]s/client_body;
	proxy_temp_path %[3]s/proxy;
	fastcgi_temp_path %[3]s/fastcgi;
	uwsgi_temp_path %[3]s/uwsgi;
	scgi_temp_path %[3]s/scgi;
	upstream gateways {
%[4]s%[6]s	}
	server {
		listen %[5]s;
		location = /nginx-generation {
			return 200 "%[1]d";
		}
		location / {
			%[7]s
		}
	}
}
`, n.generation, user, n.dir, servers.String(), n.addr, keepalive, proxy)
	writeFile(t, filepath.Join(n.dir, "nginx.conf"), conf)
}

// waitGeneration waits until nginx answers with the configuration written last, three times in a row: a
// reload starts new workers and then tells the old ones to stop accepting, so for a moment both may answer.
func (n *nginx) waitGeneration(t *testing.T) {
	t.Helper()
	n.mu.Lock()
	want := fmt.Sprint(n.generation)
	n.mu.Unlock()
	inARow := 0
	kafkatest.WaitFor(t, 10*time.Second, "nginx to serve configuration "+want, func() bool {
		select {
		case <-n.done:
			t.Fatal("nginx exited")
		default:
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr+"/nginx-generation", nil)
		req.Close = true
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			inARow = 0
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(b) != want {
			inARow = 0
			return false
		}
		inARow++
		return inARow == 3
	})
}

// accessLog returns the lines of nginx's access log.
func (n *nginx) accessLog() []string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "access.log"))
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// refused returns how many times an upstream refused nginx a connection, from its error log.
func (n *nginx) refused() int {
	return n.errorLines("(111: Connection refused)")
}

// errorLines returns how many lines of nginx's error log hold all of the parts: "(104: Connection reset by peer)"
// and "upstream" for connections an upstream reset, "no live upstreams" for requests nginx had no server for.
func (n *nginx) errorLines(parts ...string) int {
	b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	count := 0
lines:
	for _, line := range strings.Split(string(b), "\n") {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue lines
			}
		}
		count++
	}
	return count
}
