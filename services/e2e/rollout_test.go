package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/position"
	"github.com/ssegate/ssegate/pkg/proctest"
)

// The timings of TestRollingRestartBehindNginx, the chart's (endpointPropagationSeconds 5, drainSeconds 10,
// the gateway's retry 3s) scaled down: the proxy learns of a change in the endpoints a while after it
// happened, less than the gateway's endpoint propagation, and the drain is longer than a client's retry.
const (
	rolloutPropagation = 1500 * time.Millisecond // the gateways' endpoint-propagation
	rolloutDrain       = 2 * time.Second         // the gateways' drain
	rolloutRetry       = 500 * time.Millisecond  // the gateways' retry
	proxyLag           = time.Second             // how late nginx learns that endpoints changed
)

// TestRollingRestartBehindNginx: Debian's nginx, configured as the chart's Ingress annotations configure
// ingress-nginx, in front of two gateway processes on a real broker; 20 clients that behave as EventSource
// does; a producer writing throughout; the gateways restarted one after the other (SIGTERM, exit, start on
// the same port, ready, the next), twice over. Kubernetes' endpoint propagation is played by the test: a
// gateway leaves nginx's upstream proxyLag after its SIGTERM, and comes back once it is ready; in the first
// round at once, in the second proxyLag later too, while the next gateway is already stopping, so that for
// a moment nginx knows no endpoint but a stopping one (the last pods of a rollout, or an upstream that is a
// Service's virtual IP). No client may get an answer other than 200 text/event-stream (an EventSource
// never retries a 502), and every client must end with exactly the topic's records, in order per partition.
//
// E2E_GATEWAY_BIN runs a gateway binary given instead of the one built from this tree; one that predates
// --endpoint-propagation is run without it (see docs/testing.md for what the gateway of before the setting
// does here).
func TestRollingRestartBehindNginx(t *testing.T) {
	testStart := time.Now()
	nginxBin := nginxBinary(t)
	brokers := strings.Join(kafkatest.Brokers(t), ",")
	gatewayBin := gatewayBinary(t)
	topic := kafkatest.NewTopic(t, 3, nil)

	args := []string{"--topics", topic, "--retry", rolloutRetry.String(), "--drain", rolloutDrain.String()}
	if knowsFlag(t, gatewayBin, "endpoint-propagation") {
		args = append(args, "--endpoint-propagation", rolloutPropagation.String())
	} else {
		t.Logf("%s has no --endpoint-propagation: running it without", gatewayBin)
	}
	gws := []*rolloutGateway{
		{name: "gateway-0", addr: proctest.FreeAddr(t), admin: proctest.FreeAddr(t)},
		{name: "gateway-1", addr: proctest.FreeAddr(t), admin: proctest.FreeAddr(t)},
	}
	for _, g := range gws {
		g.start(t, gatewayBin, brokers, args)
	}
	for _, g := range gws {
		waitReady(t, g.name, "http://"+g.admin+"/readyz")
	}
	px := startNginx(t, nginxBin, []string{gws[0].addr, gws[1].addr})
	// The clients open before anything is produced and read from the topic's start.
	clients := startClients(t, "http://"+px.addr+"/streams/"+topic+"?from=earliest", 20)
	stopProducer := startProducer(t, topic)

	begin := time.Now()
	t.Logf("%5.1fs into the test: the gateways, nginx and the clients are up", begin.Sub(testStart).Seconds())
	ep := &endpoints{t: t, px: px, ready: map[string]bool{gws[0].addr: true, gws[1].addr: true}}
	for round, lateReturn := range []bool{false, true} {
		for i := len(gws) - 1; i >= 0; i-- { // a StatefulSet replaces its pods from the highest ordinal down
			g := gws[i]
			t.Logf("%5.1fs round %d: SIGTERM %s (%s)", time.Since(begin).Seconds(), round+1, g.name, time.Now().Format("15:04:05.000"))
			stopped := time.Now()
			if err := g.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatalf("SIGTERM %s: %v", g.name, err)
			}
			ep.change(stopped.Add(proxyLag), g.addr, false)
			if !ep.until(g.proc.done, rolloutPropagation+rolloutDrain+15*time.Second) {
				t.Fatalf("%s did not exit after SIGTERM", g.name)
			}
			if code := g.proc.cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("%s exited with %d after SIGTERM", g.name, code)
			}
			ep.apply()
			t.Logf("%5.1fs %s exited", time.Since(begin).Seconds(), g.name)
			g.start(t, gatewayBin, brokers, args)
			waitReady(t, g.name, "http://"+g.admin+"/readyz")
			t.Logf("%5.1fs %s ready", time.Since(begin).Seconds(), g.name)
			back := time.Now()
			if lateReturn {
				back = back.Add(proxyLag)
			}
			ep.change(back, g.addr, true)
			ep.apply()
		}
	}
	ep.settle()
	stopProducer()
	clients.finish(t, topic, begin)
	clients.report(t, px)
}

// startProducer writes a record every 10ms into topic until the returned stop is called, which it also is when
// the test ends, and returns once the producer has stopped.
func startProducer(t *testing.T, topic string) (stop func()) {
	t.Helper()
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic))
	// A stop lets the record being produced finish, so that reading the topic back afterwards sees every record
	// a client may have; the context ends only when the test does.
	ctx, cancel := context.WithCancel(context.Background())
	stopping := make(chan struct{})
	var produced sync.WaitGroup
	produced.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for seq := 0; ; seq++ {
			select {
			case <-stopping:
				return
			case <-tick.C:
			}
			r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", seq%11), Value: fmt.Appendf(nil, "record-%06d", seq)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				if ctx.Err() == nil {
					t.Errorf("produce: %v", err)
				}
				return
			}
		}
	})
	stop = sync.OnceFunc(func() { close(stopping); produced.Wait() })
	t.Cleanup(func() { cancel(); stop() })
	return stop
}

// esClients are clients that read one stream as EventSource does (eventSource), each on a goroutine of its
// own until stop.
type esClients struct {
	list   []*eventSource
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startClients starts n clients of url and waits until each has connected. They stop when the test ends.
func startClients(t *testing.T, url string, n int) *esClients {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cs := &esClients{cancel: cancel}
	t.Cleanup(cs.stop)
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(transport.CloseIdleConnections)
	for range n {
		c := &eventSource{url: url, client: &http.Client{Transport: transport}}
		cs.list = append(cs.list, c)
		cs.wg.Go(func() { c.run(ctx) })
	}
	kafkatest.WaitFor(t, 20*time.Second, "every client to have connected", func() bool {
		for _, c := range cs.list {
			if c.opened() == 0 {
				return false
			}
		}
		return true
	})
	return cs
}

// stop stops the clients and waits for them.
func (cs *esClients) stop() {
	cs.cancel()
	cs.wg.Wait()
}

// finish waits until every client has all the records of topic (read back with franz-go), or has failed for
// good, stops them, and checks that each one that lives has every record once, in order per partition. A
// client that failed is an error.
func (cs *esClients) finish(t *testing.T, topic string, begin time.Time) {
	t.Helper()
	all := kafkatest.ReadAll(t, topic)
	total := 0
	byValue := map[string]*kgo.Record{}
	for _, recs := range all {
		total += len(recs)
		for _, r := range recs {
			byValue[string(r.Value)] = r
		}
	}
	kafkatest.WaitFor(t, 30*time.Second, fmt.Sprintf("every client to have the topic's %d records, or to have failed", total), func() bool {
		for _, c := range cs.list {
			if n, failure := c.seen(); n < total && failure == "" {
				return false
			}
		}
		return true
	})
	t.Logf("%5.1fs: every client caught up with the topic's %d records", time.Since(begin).Seconds(), total)
	cs.stop()
	for i, c := range cs.list {
		if c.failure != "" {
			t.Errorf("client %02d failed for good after %d events: %s", i, len(c.events), c.failure)
			continue
		}
		checkClient(t, i, c, all, byValue)
	}
}

// report logs how the clients fared and what nginx answered them: call it after finish.
func (cs *esClients) report(t *testing.T, px *nginx) {
	t.Helper()
	var failed, connects, netErrs, empty int
	for _, c := range cs.list {
		connects += c.connects
		netErrs += c.netErrs
		empty += c.empty
		if c.failure != "" {
			failed++
		}
	}
	status := map[string]int{}
	for _, line := range px.accessLog() {
		if f := strings.Fields(line); len(f) > 1 {
			status[f[1]]++
		}
	}
	t.Logf("%d of %d clients failed; %d streams (%d ended by the gateway without an event), %d connections that failed; "+
		"nginx answers by status: %v; a gateway refused nginx %d connections and reset %d; %d requests found no live upstream",
		failed, len(cs.list), connects, empty, netErrs, status, px.refused(),
		px.errorLines("(104: Connection reset by peer)", "upstream"), px.errorLines("no live upstreams"))
}

// checkClient checks that client i dispatched every record of the topic once, in order per partition, each
// with an id holding the record's position.
func checkClient(t *testing.T, i int, c *eventSource, all map[int32][]*kgo.Record, byValue map[string]*kgo.Record) {
	t.Helper()
	next := map[int32]int64{}
	for j, ev := range c.events {
		r := byValue[ev.Data]
		if r == nil {
			t.Errorf("client %02d, event %d: data %q is no record of the topic", i, j, ev.Data)
			return
		}
		if r.Offset != next[r.Partition] {
			t.Errorf("client %02d, event %d: partition %d offset %d after offset %d (gap or duplicate)", i, j, r.Partition, r.Offset, next[r.Partition]-1)
			return
		}
		next[r.Partition]++
		id, err := position.Parse(ev.ID)
		if off, ok := id.Offset(r.Partition); err != nil || !ok || off != r.Offset {
			t.Errorf("client %02d, event %d: id %q (%v) does not hold partition %d offset %d", i, j, ev.ID, err, r.Partition, r.Offset)
			return
		}
	}
	for p, recs := range all {
		if n := int64(len(recs)); next[p] != n {
			t.Errorf("client %02d: %d records of partition %d, want %d", i, next[p], p, n)
		}
	}
}

// rolloutGateway is one gateway "pod": its stable addresses and the process that runs it now.
type rolloutGateway struct {
	name, addr, admin string
	proc              *process
}

func (g *rolloutGateway) start(t *testing.T, bin, brokers string, args []string) {
	t.Helper()
	g.proc = startProcess(t, g.name, bin, brokers, append([]string{"--listen", g.addr, "--admin-listen", g.admin}, args...)...)
}

// endpoints plays Kubernetes' endpoints as a proxy sees them: a change reaches nginx at a given time (a
// reload with the upstream of every gateway then ready), which is when apply or settle comes to it.
type endpoints struct {
	t       *testing.T
	px      *nginx
	ready   map[string]bool
	pending []endpointChange
}

type endpointChange struct {
	at    time.Time
	addr  string
	ready bool
}

func (e *endpoints) change(at time.Time, addr string, ready bool) {
	e.pending = append(e.pending, endpointChange{at, addr, ready})
}

// apply loads every change due by now into nginx, in one reload. A change that is not due yet stays pending.
func (e *endpoints) apply() {
	now := time.Now()
	var rest []endpointChange
	changed := false
	for _, c := range e.pending {
		if c.at.After(now) {
			rest = append(rest, c)
			continue
		}
		e.ready[c.addr] = c.ready
		changed = true
	}
	e.pending = rest
	if changed {
		e.load()
	}
}

// settle applies the pending changes, each at its time.
func (e *endpoints) settle() {
	for len(e.pending) > 0 {
		time.Sleep(time.Until(e.pending[0].at)) // the scenario's clock, not a wait for a condition
		e.apply()
	}
}

// until applies the pending changes at their times until done is closed, and reports whether it was
// within timeout.
func (e *endpoints) until(done <-chan struct{}, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		var due <-chan time.Time
		if len(e.pending) > 0 {
			due = time.After(time.Until(e.pending[0].at))
		}
		select {
		case <-done:
			return true
		case <-deadline:
			return false
		case <-due:
			e.apply()
		}
	}
}

func (e *endpoints) load() {
	var ups []string
	for addr, ok := range e.ready {
		if ok {
			ups = append(ups, addr)
		}
	}
	if len(ups) == 0 {
		e.t.Fatal("the scenario left nginx without a gateway")
	}
	e.px.setUpstreams(e.t, ups)
	e.t.Logf("nginx upstream: %v", ups)
}

// gatewayBinary returns $E2E_GATEWAY_BIN, or the gateway built from this tree.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("E2E_GATEWAY_BIN"); bin != "" {
		return bin
	}
	return filepath.Join(buildBinaries(t), "gateway")
}

// knowsFlag reports whether the gateway binary lists a flag in its usage.
func knowsFlag(t *testing.T, bin, flag string) bool {
	t.Helper()
	out, _ := exec.CommandContext(t.Context(), bin, "--help").CombinedOutput()
	return strings.Contains(string(out), "-"+flag+" ")
}
