package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/redistest"
	"github.com/ssegate/ssegate/pkg/ssetest"
	"github.com/ssegate/ssegate/services/ingest/internal/source"
)

// replica is one in-process ingest replica of TestLeasesShareSourcesAndFailOver.
type replica struct {
	name   string
	app    *App
	cancel context.CancelFunc
	done   chan error
}

func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("replica %s: Run: %v", r.name, err)
	}
}

func (r *replica) owns(i int) bool { return r.app.Owned()[i] }

// TestLeasesShareSourcesAndFailOver runs two replicas with the same sources file against real Kafka and
// Redis. Each source must be run by exactly one replica at a time; when the owner of some sources is
// killed (no lease release, no transaction end, as a crash), the other replica takes them over within
// about one lease duration; and a read_committed consumer of each target topic sees every upstream event
// exactly once, in order.
func TestLeasesShareSourcesAndFailOver(t *testing.T) {
	brokers := kafkatest.Brokers(t)
	redisAddr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	const (
		nSources = 3
		total    = 300
		lease    = 2 * time.Second
	)
	run := strconv.FormatInt(time.Now().UnixNano()%1e9, 36) // unique transactional ids on a shared broker
	var ups []*ssetest.Server
	var topics []string
	var file strings.Builder
	file.WriteString("commit-interval: 20ms\nsources:\n")
	for i := range nSources {
		ups = append(ups, ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: total, Every: 5 * time.Millisecond, Hold: true})))
		topics = append(topics, kafkatest.NewTopic(t, 1, nil))
		fmt.Fprintf(&file, "  - name: lease-%s-%d\n    url: %s/stream\n    topic: %s\n    format: raw\n", run, i, ups[i].URL, topics[i])
	}
	cpTopic := kafkatest.TopicName(t)
	t.Cleanup(func() { _, _ = kafkatest.Admin(t).DeleteTopic(context.Background(), cpTopic) })
	cfg, err := Load([]string{
		"--config", writeConfig(t, file.String()), "--listen", "127.0.0.1:0", "--checkpoint-topic", cpTopic,
		"--lease-duration", lease.String(), "--lease-key-prefix", prefix, "--backoff-min", "50ms",
	}, env(map[string]string{"KAFKA_BROKERS": strings.Join(brokers, ","), "REDIS_ADDR": redisAddr}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	start := func(name string) *replica {
		a, err := NewWithOptions(cfg, log.With("replica", name), Options{
			Owner:         name,
			AbandonLeases: true, // a stop below is a crash
			Source:        func(o *source.Options) { o.AbandonOnStop = true },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{name: name, app: a, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- a.Run(ctx) }()
		return r
	}
	a, b := start("replica-a"), start("replica-b")
	live := []*replica{a, b}
	t.Cleanup(func() {
		for _, r := range live {
			r.stop(t)
		}
	})

	// A watcher samples who runs what and records any moment two replicas run the same source.
	var doubled atomic.Int64
	var mu sync.Mutex
	watched := []*replica{a, b}
	stopWatch := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(2 * time.Millisecond):
			}
			mu.Lock()
			rs := watched
			mu.Unlock()
			for i := range nSources {
				n := 0
				for _, r := range rs {
					if r.owns(i) {
						n++
					}
				}
				if n > 1 {
					doubled.Add(1)
				}
			}
		}
	})
	defer func() { close(stopWatch); wg.Wait() }()

	kafkatest.WaitFor(t, 30*time.Second, "every source owned", func() bool {
		for i := range nSources {
			if !a.owns(i) && !b.owns(i) {
				return false
			}
		}
		return true
	})
	// /sources of either replica names the owner of each source, from Redis.
	for _, r := range []*replica{a, b} {
		_, body := get(t, "http://"+r.app.Addr().String()+"/sources")
		var st struct {
			Sources []struct{ Name, State, Owner string }
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Sources) != nSources {
			t.Fatalf("/sources of %s: %s (%v)", r.name, body, err)
		}
		for i, s := range st.Sources {
			want := a.name
			if b.owns(i) {
				want = b.name
			}
			if s.Owner != want {
				t.Errorf("/sources of %s: %s owned by %q, want %q", r.name, s.Name, s.Owner, want)
			}
			if !r.owns(i) && s.State != StateStandby {
				t.Errorf("/sources of %s: %s not run here but in state %q", r.name, s.Name, s.State)
			}
		}
	}

	// Let some events through, then kill the replica that owns source 0.
	victim, heir := a, b
	if b.owns(0) {
		victim, heir = b, a
	}
	kafkatest.WaitFor(t, 30*time.Second, "some events committed", func() bool {
		n, _ := strconv.Atoi(victim.app.Sources()[0].Status().LastID)
		return n >= 30
	})
	var moving []int
	for i := range nSources {
		if victim.owns(i) {
			moving = append(moving, i)
		}
	}
	killed := time.Now()
	victim.stop(t)
	// The heir's checkpoint store read the topic when the heir started, before most of the victim's
	// commits: taking the source over must still resume from the victim's last commit.
	victimLast, conns := victim.app.Sources()[0].Status().LastID, ups[0].Connections()
	live = []*replica{heir}
	mu.Lock()
	watched = []*replica{heir}
	mu.Unlock()
	kafkatest.WaitFor(t, 3*lease, "the survivor to own every source", func() bool {
		for i := range nSources {
			if !heir.owns(i) {
				return false
			}
		}
		return true
	})
	took := time.Since(killed)
	kafkatest.WaitFor(t, 30*time.Second, "the heir to connect source 0", func() bool { return ups[0].Connections() > conns })
	// At least: a commit the victim sent as it was stopped may have landed without it knowing.
	got, _ := strconv.Atoi(ups[0].Requests()[conns].Header.Get("Last-Event-ID"))
	if last, _ := strconv.Atoi(victimLast); got < last {
		t.Errorf("the heir resumed source 0 from %d, before the victim's last commit %d: a stale checkpoint", got, last)
	}
	t.Logf("sources %v moved from %s to %s %v after the kill (lease %v)", moving, victim.name, heir.name, took, lease)
	// The key had at most one lease left; the heir polls every lease/5 +-25%.
	if took > lease+lease/4+500*time.Millisecond {
		t.Errorf("fail-over took %v, want within about one lease duration (%v)", took, lease)
	}

	kafkatest.WaitFor(t, 60*time.Second, "every event committed", func() bool {
		for i := range nSources {
			if heir.app.Sources()[i].Status().LastID != strconv.Itoa(total) {
				return false
			}
		}
		return true
	})
	if n := doubled.Load(); n > 0 {
		t.Errorf("%d samples saw a source run by two replicas at once", n)
	}
	for i, topic := range topics {
		var got []string
		for _, r := range kafkatest.ReadAll(t, topic)[0] {
			got = append(got, string(r.Value))
		}
		if len(got) != total {
			t.Errorf("source %d: %d records, want %d", i, len(got), total)
		}
		for j, v := range got {
			if want := "event-" + strconv.Itoa(j+1); v != want {
				t.Fatalf("source %d: record %d is %q, want %q (duplicate, gap or reorder)", i, j, v, want)
			}
		}
	}
}
