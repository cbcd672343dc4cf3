package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// The timings of TestStaticUpstreamBehindNginx. With the chart's 5 s of endpoint propagation (and the rollout
// test's 2 s drain, which the clients' own reconnections usually empty before it starts) the second gateway
// exits some 6 to 8 s after the first, inside the 10 s for which nginx's defaults count the first one's
// address failed after a refused connection. A plain restart leaves nothing listening for restartGap, as a
// deploy does that installs the new binary between the stop and the start: the gateway itself binds its port
// within milliseconds of its start, a moment that 20 clients, some 8 connections a second, hit only now and
// then.
const (
	staticPropagation = 5 * time.Second
	restartGap        = time.Second
)

// restartMode is how TestStaticUpstreamBehindNginx restarts a gateway on its address.
type restartMode int

const (
	// restartPlain stops the old process (SIGTERM, exit), waits restartGap, then starts the new one on the
	// port and waits until it is ready. Between the two nothing listens.
	restartPlain restartMode = iota
	// restartReusePort starts the new process on the port beside the old one (both with listen-reuse-port),
	// waits until it is ready, then stops the old one (SIGTERM, exit).
	restartReusePort
	// restartServiceSocket does the same with one listening socket that the test holds and passes to both
	// processes as a service manager does (systemd socket activation: fd 3, LISTEN_FDS, LISTEN_PID).
	restartServiceSocket
)

func (m restartMode) String() string {
	return [...]string{"a plain restart", "listen-reuse-port", "the service manager's socket"}[m]
}

// TestStaticUpstreamBehindNginx: Debian's nginx with a static upstream of two gateway processes (two server
// lines: nobody takes a stopping gateway out of it, as in front of VMs or a fixed list of pod names), 20
// clients that behave as EventSource does, a producer writing throughout, and the gateways restarted one at a
// time, the next once the old process has exited and the new one is ready. With nginx's default max_fails=1
// fail_timeout=10s, a plain restart gets a gateway's address marked failed by the one connection refused
// between its exit and its restart, and nginx clears the mark only when a request sent there after the 10 s
// completes, which a stream does not: when the second gateway exits, nginx has no live upstream, and every
// reconnection gets a 502 that an EventSource never retries. Each case must end with no answer but 200
// text/event-stream and every client with exactly the topic's records:
//
//   - the gateway side: restarts that never refuse a connection (listen-reuse-port; the service manager's
//     socket), behind nginx's defaults and behind the SSE settings of the chart's Ingress annotations; nginx
//     must log no refused and no reset connection;
//   - the proxy side: a plain restart behind server lines with max_fails=0.
//
// A gateway binary (E2E_GATEWAY_BIN) without --listen-reuse-port is restarted plainly instead, and the case of
// the service manager's socket is skipped for one that takes none (see docs/testing.md for what they do).
func TestStaticUpstreamBehindNginx(t *testing.T) {
	nginxBin := nginxBinary(t)
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	gatewayBin := gatewayBinary(t)
	help, _ := exec.CommandContext(t.Context(), gatewayBin, "--help").CombinedOutput()
	for _, tc := range []struct {
		name    string
		restart restartMode
		setup   nginxSetup
	}{
		{"reuse-port/nginx-defaults", restartReusePort, nginxSetup{defaults: true}},
		{"reuse-port/sse-settings", restartReusePort, nginxSetup{}},
		{"service-socket/nginx-defaults", restartServiceSocket, nginxSetup{defaults: true}},
		{"plain-restart/max-fails-0", restartPlain, nginxSetup{defaults: true, serverParams: "max_fails=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode := tc.restart
			switch {
			case mode == restartReusePort && !strings.Contains(string(help), "-listen-reuse-port"):
				t.Logf("%s has no --listen-reuse-port: restarting it plainly", gatewayBin)
				mode = restartPlain
			case mode == restartServiceSocket && !strings.Contains(string(help), "LISTEN_FDS"):
				t.Skipf("%s takes no socket from a service manager", gatewayBin)
			}
			runStaticUpstream(t, nginxBin, gatewayBin, brokers, mode, tc.setup)
		})
	}
}

// runStaticUpstream runs one case of TestStaticUpstreamBehindNginx.
func runStaticUpstream(t *testing.T, nginxBin, gatewayBin, brokers string, mode restartMode, setup nginxSetup) {
	topic := kafkatest.NewTopic(t, 3, nil)
	args := []string{
		"--topics", topic, "--retry", rolloutRetry.String(), "--drain", rolloutDrain.String(),
		"--endpoint-propagation", staticPropagation.String(),
	}
	if mode == restartReusePort {
		args = append(args, "--listen-reuse-port")
	}
	gws := []*staticGateway{newStaticGateway(t, "gateway-0", mode), newStaticGateway(t, "gateway-1", mode)}
	for _, g := range gws {
		g.start(t, gatewayBin, brokers, args)
	}
	for _, g := range gws {
		waitReady(t, g.name, "http://"+g.admin+"/readyz")
	}
	setup.servers = []string{gws[0].addr, gws[1].addr}
	px := startNginxWith(t, nginxBin, setup)
	// The clients open before anything is produced and read from the topic's start.
	clients := startClients(t, "http://"+px.addr+"/streams/"+topic+"?from=earliest", 20)
	stopProducer := startProducer(t, topic)

	begin := time.Now()
	t.Logf("restarting the gateways one at a time with %s", mode)
	for i := len(gws) - 1; i >= 0; i-- {
		gws[i].restart(t, begin, mode, gatewayBin, brokers, args)
	}
	stopProducer()
	clients.finish(t, topic, begin)
	clients.report(t, px)
	if mode == restartPlain {
		return
	}
	if n := px.refused(); n != 0 {
		t.Errorf("a gateway refused nginx %d connections: a restart with %s refuses none", n, mode)
	}
	if n := px.errorLines("(104: Connection reset by peer)", "upstream"); n != 0 {
		t.Errorf("a gateway reset %d of nginx's connections: a restart with %s resets none", n, mode)
	}
}

// staticGateway is one address of the static upstream and the gateway process that serves it now.
type staticGateway struct {
	name, addr string
	admin      string   // the admin address of the process that runs now: each process has its own
	sock       *os.File // the socket the test passes as a service manager does, or nil
	proc       *process
}

// newStaticGateway makes a gateway address for mode; with restartServiceSocket the test listens on it and
// holds the socket, as a service manager does, until the test ends.
func newStaticGateway(t *testing.T, name string, mode restartMode) *staticGateway {
	t.Helper()
	g := &staticGateway{name: name, addr: proctest.FreeAddr(t)}
	if mode != restartServiceSocket {
		return g
	}
	var lc net.ListenConfig
	lc.SetMultipathTCP(false) // as systemd's ListenStream= makes it
	ln, err := lc.Listen(t.Context(), "tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File() //nolint:forcetypeassert // "tcp" listens with a *net.TCPListener
	_ = ln.Close()                         // f holds the socket open
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	g.sock = f
	return g
}

// start starts a gateway process on g's address, with an admin address of its own.
func (g *staticGateway) start(t *testing.T, bin, brokers string, args []string) {
	t.Helper()
	g.admin = proctest.FreeAddr(t)
	args = append([]string{"--admin-listen", g.admin}, args...)
	if g.sock == nil {
		g.proc = startProcess(t, g.name, bin, brokers, append([]string{"--listen", g.addr}, args...)...)
		return
	}
	// As systemd passes a socket: fd 3, LISTEN_FDS=1 and LISTEN_PID the gateway's own process id, which a
	// shell knows before it becomes the gateway (exec keeps the process).
	script := `LISTEN_PID=$$ LISTEN_FDS=1; export LISTEN_PID LISTEN_FDS; exec "$0" "$@"`
	cmd := exec.CommandContext(context.Background(), "/bin/sh", append([]string{"-c", script, bin}, args...)...)
	cmd.Env = append(cleanEnv(), "KAFKA_BROKERS="+brokers)
	cmd.ExtraFiles = []*os.File{g.sock}
	g.proc = startCmd(t, g.name, cmd)
}

// restart replaces g's process as mode says, and returns once the old one has exited and the new one is ready.
func (g *staticGateway) restart(t *testing.T, begin time.Time, mode restartMode, bin, brokers string, args []string) {
	t.Helper()
	old := g.proc
	if mode != restartPlain {
		g.start(t, bin, brokers, args)
		waitReady(t, g.name, "http://"+g.admin+"/readyz")
		t.Logf("%5.1fs the new %s is ready beside the old one", time.Since(begin).Seconds(), g.name)
	}
	t.Logf("%5.1fs SIGTERM the old %s (%s)", time.Since(begin).Seconds(), g.name, time.Now().Format("15:04:05.000"))
	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", g.name, err)
	}
	select {
	case <-old.done:
	case <-time.After(staticPropagation + rolloutDrain + 15*time.Second):
		t.Fatalf("%s did not exit after SIGTERM", g.name)
	}
	if code := old.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s exited with %d after SIGTERM", g.name, code)
	}
	t.Logf("%5.1fs the old %s exited", time.Since(begin).Seconds(), g.name)
	if mode == restartPlain {
		time.Sleep(restartGap) // the scenario's clock: the deploy between the stop and the start
		g.start(t, bin, brokers, args)
		waitReady(t, g.name, "http://"+g.admin+"/readyz")
		t.Logf("%5.1fs the new %s is ready", time.Since(begin).Seconds(), g.name)
	}
}
