//go:build kube

package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	mrand "math/rand/v2"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/sse"
)

const (
	nodeRelease    = "sse"
	nodePartitions = 3
	// The test's drain values: small, so a rollout takes seconds. The grace period the chart derives is
	// propagation 1 + drain 2 + write timeout 2 + 5 = 10 s.
	nodeGrace      = 1 + 2 + 2 + 5
	nodeMinReady   = 1
	nodeReplicas   = 2
	rolloutTimeout = nodeReplicas*(nodeGrace+nodeMinReady)*time.Second + 90*time.Second
)

// nodeValues are the release's values: two gateway pods on topic, and one ingest pod writing src (an SSE
// source the test serves) into src.topic.
func nodeValues(brokers []string, topic, pubTopic, tag, logLevel string, src *source) map[string]any {
	bs := make([]any, 0, len(brokers))
	for _, b := range brokers {
		bs = append(bs, b)
	}
	return map[string]any{
		"kafka": map[string]any{"brokers": bs},
		"image": map[string]any{
			"gateway": map[string]any{"tag": tag}, "ingest": map[string]any{"tag": tag}, "pullPolicy": "Never",
		},
		"gateway": map[string]any{
			"topics": []any{topic, pubTopic}, "replicas": nodeReplicas, "logLevel": logLevel,
			"publish":      map[string]any{"topics": []any{pubTopic}, "anonymous": true},
			"drainSeconds": 2, "endpointPropagationSeconds": 1, "writeTimeoutSeconds": 2, "minReadySeconds": nodeMinReady,
			"ringBytes": "8MiB", "heartbeat": "1s",
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "10m", "memory": "32Mi"},
				"limits":   map[string]any{"memory": "256Mi"},
			},
		},
		"ingest": map[string]any{
			"enabled": true, "replicas": 1,
			"sources": []any{map[string]any{"name": src.name, "url": src.url, "topic": src.topic, "format": "raw"}},
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "10m", "memory": "32Mi"},
				"limits":   map[string]any{"memory": "256Mi"},
			},
		},
	}
}

// TestChartOnNode installs the chart on a real node with two gateway pods reading a real Kafka, and checks
// the promise the chart makes: a client keeps its exact position when its pod goes, and through a rolling
// upgrade. `helm test` runs the chart's test pod, which opens a stream through the client Service. A client
// streams from pod 0 by its address; pod 0 is deleted; the client resumes on pod 1 with its Last-Event-ID.
// Then `helm upgrade` with a changed value rolls both pods while eight clients stream through the client
// Service's cluster IP (kube-proxy), two WebSocket clients acknowledge what they process and resume from it, and
// a publisher writes records with idempotency keys into a second topic, retrying what fails (each must be there
// once); the eight reconnect as EventSource does, on a network that drops each of their
// connections after 1 to 4 s; none may get an answer other than a 200 stream, which a browser would never
// retry. Records are produced all along. Every client must end with exactly the topic's records: per
// partition, every offset once, in order. Meanwhile the ingest pod copies an SSE source served by the test
// into another topic; it is deleted without a grace period mid-way, and the topic must end with every event
// of the source exactly once, in order.
func TestChartOnNode(t *testing.T) {
	c := newCluster(t)
	needEnv(t, "SSEGATE_KUBE_NODE", "`make e2e-k8s`")
	tag := needEnv(t, "SSEGATE_IMAGE_TAG", "`make e2e-k8s`")
	brokers := kafkatest.Brokers(t)
	gateway := needEnv(t, "KUBE_NODE_GATEWAY", "`make e2e-k8s`")
	topic := kafkatest.NewTopic(t, nodePartitions, nil)
	pubTopic := kafkatest.NewTopic(t, 2, nil)
	src := startSource(t, gateway, kafkatest.NewTopic(t, 1, nil))
	ns := c.namespace(t, "chart-node")
	cfg := c.helm(t, ns)

	prod := startProducer(t, topic)
	t0 := time.Now()
	if _, err := install(t, cfg, ns, nodeRelease, nodeValues(brokers, topic, pubTopic, tag, "info", src), rolloutTimeout); err != nil {
		c.dumpPods(t, ns)
		t.Fatalf("helm install --wait: %v", err)
	}
	t.Logf("helm install --wait: %d gateway pods ready in %v", nodeReplicas, time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() { c.uninstall(t, cfg, ns) })
	pods := c.readyGateways(t, ns)
	if len(pods) != nodeReplicas {
		t.Fatalf("%d ready gateway pods after install, want %d", len(pods), nodeReplicas)
	}
	ip0, ip1 := pods[nodeRelease+"-ssegate-gateway-0"], pods[nodeRelease+"-ssegate-gateway-1"]
	if ip0 == "" || ip1 == "" {
		t.Fatalf("gateway pods %v", pods)
	}
	svc := c.clientService(t, ns)
	c.helmTest(t, cfg, ns)

	// Ingest: its pod is killed (no grace period) once it has committed some of the source's events.
	checkFor(t, time.Minute, 200*time.Millisecond, func() error {
		if n := len(kafkatest.ReadAll(t, src.topic)[0]); n < 40 {
			return fmt.Errorf("ingest has committed %d events", n)
		}
		return nil
	})
	ingestPods, err := c.clients.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + nodeRelease + ",app.kubernetes.io/component=ingest",
	})
	if err != nil || len(ingestPods.Items) != 1 {
		t.Fatalf("ingest pods: %v (%d)", err, len(ingestPods.Items))
	}
	if err := c.clients.CoreV1().Pods(ns).Delete(t.Context(), ingestPods.Items[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatalf("delete the ingest pod: %v", err)
	}
	t.Logf("ingest pod %s deleted without a grace period after %d events were served", ingestPods.Items[0].Name, src.served())

	// One client on pod 0, by its address; pod 0 goes; the client resumes on pod 1.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a := newClient("pod-loss", topic)
	var picks []string
	anyReady := func(i, n int) string {
		for {
			ips := slices.Sorted(maps.Values(c.readyGateways(t, ns)))
			if len(ips) > 0 {
				return ips[(i+n)%len(ips)]
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	a.pick = func(n int) string {
		// Pod 0, then pod 1; later (pod 1 rolls in the upgrade) whichever pod is ready.
		ip := anyReady(0, n)
		switch n {
		case 0:
			ip = ip0
		case 1:
			ip = ip1
		}
		picks = append(picks, ip)
		return net.JoinHostPort(ip, "8080")
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.run(ctx) })
	checkFor(t, time.Minute, 100*time.Millisecond, func() error {
		if n := a.total(); n < 20 {
			return fmt.Errorf("client has %d events from pod 0", n)
		}
		return nil
	})
	t0 = time.Now()
	if err := c.clients.CoreV1().Pods(ns).Delete(t.Context(), nodeRelease+"-ssegate-gateway-0", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod 0: %v", err)
	}
	checkFor(t, time.Minute, 100*time.Millisecond, func() error {
		if a.connections() < 2 {
			return errors.New("the client has not reconnected since pod 0 was deleted")
		}
		return nil
	})
	t.Logf("pod 0 deleted: the client's stream ended and it resumed on pod 1 after %v", time.Since(t0).Round(time.Millisecond))
	// The StatefulSet brings pod 0 back before the upgrade starts.
	checkFor(t, rolloutTimeout, 500*time.Millisecond, func() error {
		if n := len(c.readyGateways(t, ns)); n != nodeReplicas {
			return fmt.Errorf("%d ready gateway pods after pod 0 was deleted", n)
		}
		return nil
	})

	// A rolling upgrade under eight clients streaming through the client Service, as EventSource does, on a
	// network that drops their connections every few seconds.
	before := c.gatewayUIDs(t, ns)
	clients := make([]*client, 8)
	for i := range clients {
		cl := newClient(fmt.Sprintf("upgrade-%d", i), topic)
		cl.eventSource, cl.drops = true, true
		cl.pick = func(int) string { return svc }
		clients[i] = cl
		wg.Go(func() { cl.run(ctx) })
	}
	// Two WebSocket clients that acknowledge what they process, and a publisher, through the Service too.
	wsClients := []*wsClient{newWSClient("ws-0", topic, svc), newWSClient("ws-1", topic, svc)}
	for _, w := range wsClients {
		wg.Go(func() { w.run(ctx) })
	}
	pub := startPublisher(svc, pubTopic)
	checkFor(t, time.Minute, 100*time.Millisecond, func() error {
		for _, cl := range clients {
			if cl.total() == 0 {
				return fmt.Errorf("client %s has no event yet", cl.name)
			}
		}
		return nil
	})
	t0 = time.Now()
	if _, err := upgrade(t, cfg, ns, nodeRelease, nodeValues(brokers, topic, pubTopic, tag, "debug", src), rolloutTimeout); err != nil {
		c.dumpPods(t, ns)
		t.Fatalf("helm upgrade --wait: %v", err)
	}
	t.Logf("helm upgrade --wait: both pods rolled in %v", time.Since(t0).Round(time.Millisecond))
	after := c.gatewayUIDs(t, ns)
	for name, uid := range before {
		if after[name] == uid {
			t.Errorf("pod %s was not replaced by the upgrade", name)
		}
	}

	// Stop producing, then every client must reach exactly the topic's records.
	want := prod.stop(t)
	t.Logf("produced %v records per partition", want)
	for _, cl := range append([]*client{a}, clients...) {
		checkFor(t, time.Minute, 100*time.Millisecond, func() error {
			if n, w := cl.total(), sum(want); n < w {
				return fmt.Errorf("client %s has %d of %d events (connections %d, errors %v)", cl.name, n, w, cl.connections(), cl.errors())
			}
			return nil
		})
	}
	for _, w := range wsClients {
		checkFor(t, time.Minute, 100*time.Millisecond, func() error {
			if n := w.missing(want); n > 0 {
				return fmt.Errorf("WebSocket client %s misses %d records", w.name, n)
			}
			return nil
		})
	}
	pub.stop(t)
	cancel()
	wg.Wait()
	for _, w := range wsClients {
		w.check(t, want)
	}
	checkTopic(t, topic, want)
	src.check(t)
	if len(picks) < 2 || picks[0] != ip0 || picks[1] != ip1 {
		t.Errorf("the pod-loss client connected to %v, want pod 0 (%s) then pod 1 (%s)", picks, ip0, ip1)
	}
	for _, cl := range append([]*client{a}, clients...) {
		cl.check(t, want)
		t.Logf("client %s: %d events over %d connections, exact", cl.name, cl.total(), cl.connections())
	}
	for _, cl := range clients {
		cl.mu.Lock()
		t.Logf("client %s through the Service %s: %d streams (%d ended without an event, %d dropped by its network), %d network errors, %d other answers",
			cl.name, svc, cl.conns, cl.empty, cl.dropped, cl.netErrs, len(cl.failures))
		for _, f := range cl.failures {
			t.Errorf("client %s got %s: an EventSource would never retry it", cl.name, f)
		}
		cl.mu.Unlock()
	}
}

// clientService returns the address (cluster IP and port) of the release's client Service, which kube-proxy
// translates to a ready gateway pod's address.
func (c *cluster) clientService(t *testing.T, ns string) string {
	t.Helper()
	svc, err := c.clients.CoreV1().Services(ns).Get(t.Context(), nodeRelease+"-ssegate-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the client Service: %v", err)
	}
	ip := net.ParseIP(svc.Spec.ClusterIP)
	_, services, _ := net.ParseCIDR(serviceRange)
	if ip == nil || !services.Contains(ip) {
		t.Fatalf("the client Service's cluster IP is %q, want one of %s", svc.Spec.ClusterIP, serviceRange)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.String() != "http" {
		t.Fatalf("the client Service's ports are %+v, want 80 to the pods' http port", svc.Spec.Ports)
	}
	return net.JoinHostPort(ip.String(), "80")
}

// serviceRange is the test cluster's range of Service addresses (k8s/cluster/cluster.sh).
const serviceRange = "198.51.100.128/25"

// helmTest runs `helm test` on the release: the chart's test pod opens a stream through the client Service.
func (c *cluster) helmTest(t *testing.T, cfg *action.Configuration, ns string) {
	t.Helper()
	t0 := time.Now()
	rt := action.NewReleaseTesting(cfg)
	rt.Namespace, rt.Timeout = ns, 2*time.Minute
	reli, shutdown, err := rt.Run(nodeRelease)
	if err != nil {
		var logs strings.Builder
		if rel := asRelease(reli); rel != nil {
			_ = rt.GetPodLogs(&logs, rel)
		}
		c.dumpPods(t, ns)
		t.Fatalf("helm test: %v\n%s", err, logs.String())
	}
	if err := shutdown(); err != nil {
		t.Errorf("helm test: deleting its pod: %v", err)
	}
	t.Logf("helm test: the test pod streamed through the client Service in %v", time.Since(t0).Round(time.Millisecond))
}

// producer writes records to every partition of a topic at a steady pace; the value of the n-th record of
// partition p is "p<p>-<n>", so a client's events say which record they are.
type producer struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	counts map[int32]int
	err    error
}

func startProducer(t *testing.T, topic string) *producer {
	t.Helper()
	cl := kafkatest.Client(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithCancel(t.Context())
	p := &producer{cancel: cancel, done: make(chan struct{}), counts: map[int32]int{}}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			recs := make([]*kgo.Record, 0, nodePartitions)
			p.mu.Lock()
			for part := range int32(nodePartitions) {
				recs = append(recs, &kgo.Record{Partition: part, Value: fmt.Appendf(nil, "p%d-%d", part, p.counts[part])})
			}
			p.mu.Unlock()
			// Not the test's context: a batch is written whole or the test fails, never half counted.
			wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(wctx, recs...).FirstErr()
			wcancel()
			p.mu.Lock()
			if err != nil {
				p.err = err
				p.mu.Unlock()
				return
			}
			for _, r := range recs {
				p.counts[r.Partition]++
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-p.done })
	return p
}

// stop stops producing and returns how many records each partition got.
func (p *producer) stop(t *testing.T) map[int32]int {
	t.Helper()
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		t.Fatalf("produce: %v", p.err)
	}
	return maps.Clone(p.counts)
}

func sum(m map[int32]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// checkTopic reads the topic back and checks it holds exactly the produced records, so that the clients'
// events are compared with the topic and not only with what the producer believes it wrote.
func checkTopic(t *testing.T, topic string, want map[int32]int) {
	t.Helper()
	recs := kafkatest.ReadAll(t, topic)
	for p := range int32(nodePartitions) {
		if len(recs[p]) != want[p] {
			t.Errorf("partition %d holds %d records, the producer wrote %d", p, len(recs[p]), want[p])
			continue
		}
		for i, r := range recs[p] {
			if v := fmt.Sprintf("p%d-%d", p, i); string(r.Value) != v || r.Offset != int64(i) {
				t.Errorf("partition %d offset %d is %q, want %q at offset %d", p, r.Offset, r.Value, v, i)
				break
			}
		}
	}
}

// client is an SSE client of the gateway that reconnects with its Last-Event-ID whenever its stream ends.
type client struct {
	name, topic string
	// pick returns the address (host:port) of the n-th connection (from 0); called on the client's goroutine.
	pick func(n int) string
	// eventSource makes the client reconnect as a browser's EventSource does (WHATWG HTML, "Server-sent
	// events"): Accept: text/event-stream; after the end of a stream or a network error it waits the
	// reconnection time (the last retry: it saw, 3 s until then); an id-only block moves its last event id;
	// an answer other than a 200 text/event-stream is a failure (an EventSource would close for good; the
	// client records it and carries on, so that the test also tells what it would have missed).
	eventSource bool
	// drops makes the client's network drop each connection a random 1 to 4 s after it opened, as mobile
	// networks do, so that it reconnects all through a rollout and not only when a gateway ends its stream.
	drops bool

	mu       sync.Mutex
	got      map[int32][]int
	conns    int
	lastID   string
	errs     []string
	retry    time.Duration
	failures []string // answers other than a 200 stream (eventSource)
	netErrs  int      // connections that failed before an answer (eventSource)
	empty    int      // 200 streams that ended without an event: redirects of a leaving pod (eventSource)
	dropped  int      // connections its network dropped (drops)
}

func newClient(name, topic string) *client {
	return &client{name: name, topic: topic, got: map[int32][]int{}, retry: 3 * time.Second}
}

func (cl *client) total() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	n := 0
	for _, v := range cl.got {
		n += len(v)
	}
	return n
}

func (cl *client) errors() []string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return slices.Clone(cl.errs)
}

func (cl *client) connections() int {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.conns
}

// run streams until ctx ends, reconnecting after every end of stream or failed connection.
func (cl *client) run(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		addr := cl.pick(n)
		err := cl.stream(ctx, "http://"+addr+"/streams/"+cl.topic+"?from=earliest&heartbeat=1000")
		if ctx.Err() != nil {
			return
		}
		cl.mu.Lock()
		if err != nil {
			cl.errs = append(cl.errs, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), addr, err))
		}
		wait := 100 * time.Millisecond
		if cl.eventSource {
			wait = cl.retry
		}
		cl.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// stream makes one connection and reads it to its end; it returns nil for a clean end of stream.
func (cl *client) stream(ctx context.Context, url string) error {
	cctx := ctx
	if cl.drops {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, time.Second+mrand.N(3*time.Second))
		defer cancel()
	}
	// over tells whether the connection ended because the test ended or the network dropped it.
	over := func() bool {
		if ctx.Err() == nil && cctx.Err() != nil {
			cl.mu.Lock()
			cl.dropped++
			cl.mu.Unlock()
		}
		return cctx.Err() != nil
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return err
	}
	cl.mu.Lock()
	last := cl.lastID
	cl.mu.Unlock()
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	opts := []sse.Option{sse.WithLastEventID(last)}
	if cl.eventSource {
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Cache-Control", "no-cache")
		opts = append(opts, sse.WithIDOnlyBlocks())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if over() {
			return nil
		}
		if cl.eventSource {
			cl.mu.Lock()
			cl.netErrs++
			cl.mu.Unlock()
		}
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || (cl.eventSource && mt != "text/event-stream") {
		err := fmt.Errorf("status %s, Content-Type %q (Last-Event-ID %q)", resp.Status, resp.Header.Get("Content-Type"), last)
		if cl.eventSource {
			cl.mu.Lock()
			cl.failures = append(cl.failures, time.Now().Format("15:04:05.000")+" "+err.Error())
			cl.mu.Unlock()
		}
		return err
	}
	cl.mu.Lock()
	cl.conns++
	cl.mu.Unlock()
	p := sse.NewParser(resp.Body, opts...)
	got := 0
	defer func() {
		if !cl.eventSource {
			return
		}
		cl.mu.Lock()
		defer cl.mu.Unlock()
		// A retry field in a block that dispatched nothing still sets the reconnection time.
		if r, ok := p.Retry(); ok {
			cl.retry = r
		}
		cl.lastID = p.LastEventID()
		if got == 0 && cctx.Err() == nil {
			cl.empty++
		}
	}()
	for {
		ev, err := p.Next()
		if err != nil {
			if over() || errors.Is(err, context.Canceled) {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			if cl.eventSource {
				cl.mu.Lock()
				cl.netErrs++
				cl.mu.Unlock()
			}
			return err
		}
		if ev.IDOnly() {
			continue
		}
		got++
		cl.mu.Lock()
		if ev.Type != "message" {
			cl.errs = append(cl.errs, fmt.Sprintf("event %s: %s", ev.Type, ev.Data))
		} else if part, n, ok := parseValue(ev.Data); ok {
			cl.got[part] = append(cl.got[part], n)
		} else {
			cl.errs = append(cl.errs, "unexpected data "+ev.Data)
		}
		cl.lastID = ev.ID
		cl.mu.Unlock()
	}
}

func parseValue(v string) (int32, int, bool) {
	ps, ns, ok := strings.Cut(strings.TrimPrefix(v, "p"), "-")
	p, err1 := strconv.Atoi(ps)
	n, err2 := strconv.Atoi(ns)
	return int32(p), n, ok && err1 == nil && err2 == nil && strings.HasPrefix(v, "p")
}

// check asserts that the client saw, per partition, exactly records 0..want-1 in order: no gap, no
// duplicate, no event that is not a record.
func (cl *client) check(t *testing.T, want map[int32]int) {
	t.Helper()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, e := range cl.errs {
		if strings.HasPrefix(e, "event ") || strings.HasPrefix(e, "unexpected") {
			t.Errorf("client %s: %s", cl.name, e)
		}
	}
	for p := range int32(nodePartitions) {
		got := cl.got[p]
		for i, n := range got {
			if n != i {
				t.Errorf("client %s partition %d: event %d is record %d (a gap or a duplicate); around it: %v",
					cl.name, p, i, n, got[max(0, i-3):min(len(got), i+4)])
				break
			}
		}
		if len(got) != want[p] {
			t.Errorf("client %s partition %d: %d events, the topic holds %d records", cl.name, p, len(got), want[p])
		}
	}
}

// readyGateways returns the ready gateway pods of the release, name to pod address.
func (c *cluster) readyGateways(t *testing.T, ns string) map[string]string {
	t.Helper()
	pods, err := c.clients.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + nodeRelease + ",app.kubernetes.io/component=gateway",
	})
	if err != nil {
		t.Errorf("list pods: %v", err)
		return nil
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				out[p.Name] = p.Status.PodIP
			}
		}
	}
	return out
}

func (c *cluster) gatewayUIDs(t *testing.T, ns string) map[string]string {
	t.Helper()
	pods, err := c.clients.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/instance=" + nodeRelease + ",app.kubernetes.io/component=gateway",
	})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		out[p.Name] = string(p.UID)
	}
	return out
}

// dumpPods logs the release's pods and their states, for a failed wait.
func (c *cluster) dumpPods(t *testing.T, ns string) {
	t.Helper()
	pods, err := c.clients.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("list pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s phase %s ip %s conditions %+v", p.Name, p.Status.Phase, p.Status.PodIP, p.Status.Conditions)
		for _, s := range p.Status.ContainerStatuses {
			t.Logf("  container %s ready %v restarts %d state %+v last %+v", s.Name, s.Ready, s.RestartCount, s.State, s.LastTerminationState)
		}
	}
	evs, err := c.clients.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s: %s %s", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
		}
	}
}

// uninstall removes the release and waits until its pods are gone, so that the node tears their sandboxes
// down itself. It runs as a clean-up, when t's context has ended.
func (c *cluster) uninstall(t *testing.T, cfg *action.Configuration, ns string) {
	t.Helper()
	un := action.NewUninstall(cfg)
	un.WaitStrategy, un.Timeout = kube.StatusWatcherStrategy, rolloutTimeout
	if _, err := un.Run(nodeRelease); err != nil {
		t.Errorf("helm uninstall: %v", err)
	}
	deadline := time.Now().Add(rolloutTimeout)
	for {
		pods, err := c.clients.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("pods left %v after helm uninstall: %v", rolloutTimeout, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// source is an SSE server for the ingest pod, on the node's bridge address: a numbered log of sourceEvents
// events (id "i", data "event-i"), served from the one after the request's Last-Event-ID, one every 20 ms,
// then held open.
type source struct {
	name, url, topic string

	mu    sync.Mutex
	max   int // the highest event id written to a connection
	conns int // connections served
}

const sourceEvents = 600

func startSource(t *testing.T, host, topic string) *source {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	src := &source{name: "node-" + hex.EncodeToString(b[:]), topic: topic}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("listen on the bridge: %v", err)
	}
	src.url = "http://" + ln.Addr().String() + "/events"
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next := 1
		if n, err := strconv.Atoi(r.Header.Get("Last-Event-ID")); err == nil {
			next = n + 1
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		src.mu.Lock()
		src.conns++
		src.mu.Unlock()
		rc := http.NewResponseController(w)
		for i := next; i <= sourceEvents; i++ {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := fmt.Fprintf(w, "id: %d\ndata: event-%d\n\n", i, i); err != nil || rc.Flush() != nil {
				return
			}
			src.mu.Lock()
			src.max = max(src.max, i)
			src.mu.Unlock()
		}
		_ = rc.Flush()
		<-r.Context().Done()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return src
}

func (s *source) served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}

// check waits until the topic holds as many records as the source has events, then asserts they are the
// events, each once, in order (read_committed: an aborted transaction of the killed pod does not count).
func (s *source) check(t *testing.T) {
	t.Helper()
	var recs []*kgo.Record
	checkFor(t, 2*time.Minute, 500*time.Millisecond, func() error {
		recs = kafkatest.ReadAll(t, s.topic)[0]
		if len(recs) < sourceEvents {
			return fmt.Errorf("the ingest topic holds %d of %d events (served up to %d)", len(recs), sourceEvents, s.served())
		}
		return nil
	})
	if len(recs) != sourceEvents {
		t.Errorf("the ingest topic holds %d records, the source has %d events", len(recs), sourceEvents)
	}
	for i, r := range recs {
		if want := fmt.Sprintf("event-%d", i+1); string(r.Value) != want {
			t.Errorf("ingest record %d is %q, want %q (a gap or a duplicate)", i, r.Value, want)
			break
		}
	}
	s.mu.Lock()
	conns := s.conns
	s.mu.Unlock()
	if conns < 2 {
		t.Errorf("the source served %d connection(s): ingest never reconnected after its pod was deleted", conns)
	}
	t.Logf("ingest: %d events, each once, over %d connections, across the deletion of its pod", len(recs), conns)
}
