package stream

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/sse"
)

// BenchmarkConflateDeliveries: what a client of a topic of 1,000 keys updated 10,000 times a second gets,
// conflated to 4 Hz (conflate=250ms) and not. Each round is one second of that topic: 100 batches of 100
// records, 10 ms apart, published into a ring that a plain stream and a conflated one read over HTTP. It
// reports, per client and per second, the frames and the bytes each got.
func BenchmarkConflateDeliveries(b *testing.B) {
	rg := newFeeder(b, 64<<20).rg
	s := NewServer(Config{Writers: 2, Logger: discardLog})
	defer s.Close()
	topic := &Topic{Ring: rg}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p Params
		if r.URL.Query().Get("conflate") != "" {
			p.Conflate = 250 * time.Millisecond
		}
		s.Serve(w, r, topic, p, new(Stats))
	}))
	defer hs.Close()
	type counts struct{ frames, bytes atomic.Int64 }
	read := func(url string, c *counts) {
		resp, err := http.Get(url) //nolint:noctx // ends with the server
		if err != nil {
			b.Error(err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			c.bytes.Add(int64(len(line)))
			if strings.HasPrefix(line, "data: ") {
				c.frames.Add(1)
			}
		}
	}
	var plain, conflated counts
	go read(hs.URL, &plain)
	go read(hs.URL+"?conflate=250ms", &conflated)
	time.Sleep(100 * time.Millisecond)
	var f feeder
	f.rg = rg
	value := strings.Repeat("x", 150)
	rounds := 0
	b.ResetTimer()
	for b.Loop() {
		rounds++
		tick := time.NewTicker(10 * time.Millisecond)
		for range 100 {
			f.b.Reset()
			for range 100 {
				f.offset++
				key := fmt.Sprintf("key-%03d", f.offset%1000)
				f.b.Add(sse.AppendEvent(f.b.Buf(), f.id(), "", []byte(key+" "+value)), 0, f.offset-1, []byte(key))
			}
			rg.Publish(&f.b, []byte(f.id()))
			<-tick.C
		}
		tick.Stop()
	}
	b.StopTimer()
	time.Sleep(400 * time.Millisecond) // the last interval goes out
	sec := float64(rounds)
	b.ReportMetric(float64(plain.frames.Load())/sec, "plain-frames/s")
	b.ReportMetric(float64(plain.bytes.Load())/sec/1024, "plain-KiB/s")
	b.ReportMetric(float64(conflated.frames.Load())/sec, "conflated-frames/s")
	b.ReportMetric(float64(conflated.bytes.Load())/sec/1024, "conflated-KiB/s")
}
