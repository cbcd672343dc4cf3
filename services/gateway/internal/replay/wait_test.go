package replay_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/gateway/internal/memlog"
	"github.com/ssegate/ssegate/services/gateway/internal/replay"
)

// TestWaitJoinsFlights: a block read started by a prefetch runs on a goroutine of its own; Wait reports it
// under way while its stream lives, and returns once the stream's context ended it, so shutdown joins every
// read (before, nothing owned or joined them).
func TestWaitJoinsFlights(t *testing.T) {
	kc := memlog.New()
	kc.CreateTopic("t", 1)
	for range 10 {
		kc.Produce("t", &kgo.Record{Value: []byte("v")})
	}
	log := &gatedLog{Log: kc, open: make(chan struct{})} // every fetch waits
	p := replay.NewPool(replay.Config{BlockSize: 64}, log)
	stream, leave := context.WithCancel(context.Background())
	p.Prefetch(stream, "t", 0, []replay.Range{{Partition: 0, After: -1, Upto: 9}})
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Wait(short); err == nil {
		t.Fatal("Wait returned while a read was under way")
	}
	leave()
	done, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := p.Wait(done); err != nil {
		t.Fatalf("Wait after the stream left: %v", err)
	}
}
