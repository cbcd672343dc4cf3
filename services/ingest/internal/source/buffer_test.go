package source

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
	"github.com/ssegate/ssegate/pkg/ssetest"
)

// stalledRead reads an endless stream of events of size bytes into buf, which nobody drains (Kafka
// stalled), until the reading stops, and returns the body bytes ingest read by then.
func stalledRead(t *testing.T, size int, opt Options, buf *buffer) int64 {
	t.Helper()
	chunk := ssetest.Frame("", "", strings.Repeat("y", size))
	srv := ssetest.New(t, func(s *ssetest.Stream, _ *http.Request) {
		for s.Write(chunk) == nil {
		}
	})
	s := New(Spec{Name: "bp", URL: srv.URL, Topic: "unused"}, opt)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp, o := s.connect(ctx, "")
	if resp == nil {
		t.Fatalf("connect: %v", o.err)
	}
	defer func() { _ = resp.Body.Close() }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.read(ctx, resp.Body, buf, "", cancel)
	}()
	checkFor(t, 10*time.Second, "the reader to wait", func() bool { return buf.blocked() || len(buf.items) == cap(buf.items) })
	// Once stalled, the bytes read stay put: poll until two readings 200ms apart agree.
	var before int64 = -1
	checkFor(t, 10*time.Second, "reading to stop", func() bool {
		now := s.Stats().Bytes.Load()
		stalled := now == before
		before = now
		if !stalled {
			time.Sleep(200 * time.Millisecond)
		}
		return stalled
	})
	n := s.Stats().Bytes.Load()
	cancel()
	<-done
	srv.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return n
}

// TestBufferBytesBoundsMemory: with the default buffer-events (1000) and large events, the byte bound
// stops the reading of the body. Bounded by events only, 1000 events of 64 KiB made ingest read 64 MiB
// with Kafka stalled.
func TestBufferBytesBoundsMemory(t *testing.T) {
	const limit = 256 << 10
	opt := Options{BufferBytes: limit}
	opt.defaults()
	n := stalledRead(t, 64<<10, opt, newBuffer(opt.BufferEvents, opt.BufferBytes))
	// The bound, the event the reader holds, the parser's buffer and the transport's: far below 1 MiB.
	if n > 1<<20 {
		t.Fatalf("read %d bytes with the consumer stalled and a %d byte bound; want under 1 MiB", n, limit)
	}
	t.Logf("stalled after %d bytes read by ingest", n)
}

func TestBuffer(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
		held  []int64 // sizes put before the one that is checked
		size  int64
		waits bool
	}{
		{name: "fits", limit: 100, held: []int64{40}, size: 60},
		{name: "over the bound waits", limit: 100, held: []int64{40, 40}, size: 30, waits: true},
		{name: "larger than the bound passes alone", limit: 100, size: 500},
		{name: "larger than the bound waits for the others", limit: 100, held: []int64{1}, size: 500, waits: true},
		{name: "records without bytes count in events only", limit: 100, held: []int64{100}, size: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuffer(10, tt.limit)
			var held int64
			for _, n := range tt.held {
				if !b.put(t.Context(), item{size: n}) {
					t.Fatal("put failed")
				}
				held += n
			}
			put := make(chan bool, 1)
			go func() { put <- b.put(t.Context(), item{size: tt.size}) }()
			if !tt.waits {
				if !<-put {
					t.Fatal("put failed")
				}
				return
			}
			checkFor(t, 5*time.Second, "the reader to wait", b.blocked)
			select {
			case <-b.nudge:
			default:
				t.Error("a waiting reader did not nudge the batching loop")
			}
			select {
			case <-put:
				t.Fatal("put went through over the bound")
			default:
			}
			b.release(held) // the transaction holding them commits
			if !<-put {
				t.Fatal("put failed after the release")
			}
			if b.blocked() {
				t.Error("still blocked after the put")
			}
		})
	}
	b := newBuffer(10, 10)
	b.put(t.Context(), item{size: 10})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if b.put(ctx, item{size: 5}) {
		t.Error("put over the bound with a canceled context succeeded")
	}
}

// TestBufferBytesCommitsEarly: a transaction that holds the byte bound commits as soon as the reader waits
// for it, not at commit-interval (here an hour), and every event arrives once. (The end of the stream
// commits the last transaction; without early commits the reader would wait for bytes and never reach it.)
func TestBufferBytesCommitsEarly(t *testing.T) {
	const total = 40
	data := func(i int) string { return strconv.Itoa(i) + strings.Repeat("z", 30<<10) }
	srv := ssetest.New(t, ssetest.Log(ssetest.LogConfig{Events: total, Data: data}))
	opt := testOptions(t)
	opt.CommitInterval, opt.BufferBytes = time.Hour, 100<<10
	topic := kafkatest.NewTopic(t, 1, nil)
	r := start(t, Spec{Name: "early", URL: srv.URL, Topic: topic, Format: FormatRaw}, opt)
	checkFor(t, 30*time.Second, "every event committed", func() bool { return r.src.Status().LastID == strconv.Itoa(total) })
	var want []string
	for i := 1; i <= total; i++ {
		want = append(want, data(i))
	}
	if got := values(readCommitted(t, topic)); !slices.Equal(got, want) {
		t.Fatalf("%d records, want %d in order", len(got), total)
	}
	if n := r.src.Stats().Commits.Load(); n < total*30/100 {
		t.Errorf("%d commits for %d events of 30 KiB with a 100 KiB bound; want at least %d", n, total, total*30/100)
	}
}
