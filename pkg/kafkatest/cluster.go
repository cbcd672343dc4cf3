package kafkatest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// RackCluster is a short-lived Kafka cluster of several brokers, one per rack, started for one test by
// kafka.sh (node 1 is also the controller; the others are brokers only), with the rack-aware replica
// selector, so that a consumer with a rack fetches from the replica in its rack (KIP-392).
type RackCluster struct {
	// Brokers are the PLAINTEXT listeners, node 1's first.
	Brokers []string
	// Racks are the brokers' racks, in node order (node i+1 is in Racks[i]).
	Racks []string
	// Proxies are, in node order, the proxies in front of the brokers' client listeners, which advertise
	// the proxies' addresses (NewProxiedRackCluster; nil otherwise).
	Proxies []*Proxy
	// ClientBrokers are the proxies' addresses: a client that starts from them reaches every broker
	// through its proxy.
	ClientBrokers []string
	dirs          []string
}

// rackProps make a follower that stopped leave the in-sync replicas, and the controller fence it, in seconds
// rather than the defaults' 30 and 9, so that a test of a broker stopped sees the high watermark move on soon.
const rackProps = "replica.lag.time.max.ms=3000\nbroker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\n" +
	"default.replication.factor=3\nmin.insync.replicas=1"

// NewRackCluster starts a broker in each of racks (at least 2) with small heaps and stops them when the
// test ends. It needs the Kafka jars the test broker runs from, so it skips (fails under CI=true) where
// there is no test broker.
func NewRackCluster(t testing.TB, racks ...string) *RackCluster {
	t.Helper()
	return newRackCluster(t, false, racks)
}

// NewProxiedRackCluster is NewRackCluster with a Proxy in front of each broker for the clients of
// ClientBrokers: each broker has a client listener advertised at its proxy's address, so that such a client
// reaches every broker through the proxies (and can lose one broker, Proxy.Blackhole, while the brokers,
// which replicate over their PLAINTEXT listeners, do not). Brokers still reach them directly.
func NewProxiedRackCluster(t testing.TB, racks ...string) *RackCluster {
	t.Helper()
	return newRackCluster(t, true, racks)
}

func newRackCluster(t testing.TB, proxied bool, racks []string) *RackCluster {
	t.Helper()
	Brokers(t)
	script := kafkaScript()
	c := &RackCluster{Racks: racks}
	base := t.TempDir()
	for i := range racks {
		c.dirs = append(c.dirs, filepath.Join(base, "node"+string(rune('1'+i))))
	}
	t.Cleanup(func() {
		for i := range c.dirs {
			c.Stop(t, i+1)
		}
	})
	if proxied {
		for range racks {
			p := NewProxy(t, "")
			c.Proxies = append(c.Proxies, p)
			c.ClientBrokers = append(c.ClientBrokers, p.Addr())
		}
	}
	start := func(i int, env ...string) string {
		if proxied {
			env = append(env, "KAFKA_CLIENT_ADVERTISED="+c.Proxies[i].Addr())
		}
		cmd := exec.CommandContext(context.Background(), script, "start", c.dirs[i]) //nolint:gosec // the kit's own script, in a folder of the test's
		cmd.Env = append(os.Environ(), append(env, "KAFKA_HOST=127.0.0.1", "KAFKA_HEAP=256m", "KAFKA_RACK="+racks[i], "KAFKA_PROPS="+rackProps,
			"KAFKA_NODE_ID="+string(rune('1'+i)))...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("kafka.sh start node %d: %v\n%s", i+1, err, stderr.String())
			return ""
		}
		broker := ""
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "KAFKA_BROKERS="); ok {
				broker = v
			}
			if v, ok := strings.CutPrefix(sc.Text(), "KAFKA_CLIENT_LISTENER="); ok && proxied {
				c.Proxies[i].SetTarget(v)
			}
		}
		if broker != "" {
			return broker
		}
		t.Errorf("kafka.sh start node %d printed no KAFKA_BROKERS", i+1)
		return ""
	}
	// The first node's controller must be up before the others join it; they start at once.
	first := start(0, "KAFKA_CONTROLLER=", "KAFKA_CLUSTER_ID=")
	if t.Failed() {
		t.FailNow()
	}
	controller, err1 := os.ReadFile(filepath.Join(c.dirs[0], "controller"))
	cluster, err2 := os.ReadFile(filepath.Join(c.dirs[0], "cluster-id"))
	if err1 != nil || err2 != nil {
		t.Fatalf("the first node's controller and cluster id: %v, %v", err1, err2)
	}
	c.Brokers = make([]string, len(racks))
	c.Brokers[0] = first
	var wg sync.WaitGroup
	for i := 1; i < len(racks); i++ {
		wg.Go(func() {
			c.Brokers[i] = start(i, "KAFKA_CONTROLLER="+strings.TrimSpace(string(controller)),
				"KAFKA_CLUSTER_ID="+strings.TrimSpace(string(cluster)))
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return c
}

// Stop stops node (1 for the first broker), as a broker lost would; stopping one stopped is a no-op.
func (c *RackCluster) Stop(t testing.TB, node int) {
	t.Helper()
	stop := exec.CommandContext(context.Background(), kafkaScript(), "stop", c.dirs[node-1]) //nolint:gosec // the kit's own script
	if out, err := stop.CombinedOutput(); err != nil {
		t.Errorf("kafka.sh stop node %d: %v\n%s", node, err, out)
	}
}

// kafkaScript is the path of the kit's kafka.sh, next to this file.
func kafkaScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "kafka.sh")
}
