package main

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/sse"
)

// streamBody is what the gateway sends one connection for n records over three partitions: frames of a
// 200-byte value with the id vector moving one offset at a time.
func streamBody(n int) []byte {
	var b bytes.Buffer
	offs := [3]int64{1000, 2000, 3000}
	for i := range n {
		offs[i%3]++
		b.WriteString("id: v1:0-")
		b.WriteString(strconv.FormatInt(offs[0], 10))
		b.WriteString(".1-")
		b.WriteString(strconv.FormatInt(offs[1], 10))
		b.WriteString(".2-")
		b.WriteString(strconv.FormatInt(offs[2], 10))
		b.WriteString("\ndata: ")
		b.Write(makeValue(time.Now().UnixNano(), int64(i), 200))
		b.WriteString("\n\n")
	}
	return b.Bytes()
}

// BenchmarkReadFrames is the tool's cost per received frame (parse, id check, counters), the part a
// connection's goroutine spends on each of the millions of deliveries of a storm: live, and catching up
// after a reconnect, when every frame is also checked against the storm's target.
func BenchmarkReadFrames(b *testing.B) {
	const frames = 10_000
	body := streamBody(frames)
	for _, bc := range []struct {
		name   string
		target []int64
	}{
		{"live", nil},
		{"catching_up", []int64{1 << 40, 1 << 40, 1 << 40}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var sh shared
			for b.Loop() {
				b.StopTimer()
				c := &client{}
				if err := c.tr.open("v1:0-1000.1-2000.2-3000", time.Now()); err != nil {
					b.Fatal(err)
				}
				if bc.target != nil {
					c.tr.setTarget(bc.target, time.Now())
				}
				p := sse.NewParser(bytes.NewReader(body))
				b.StartTimer()
				for range frames {
					ev, err := p.Next()
					if err != nil {
						b.Fatal(err)
					}
					if err := c.event(&sh, ev, false); err != nil {
						b.Fatal(err)
					}
				}
				if n := c.tr.counts(); n.Delivered != frames || n.Lost != 0 || n.Dup != 0 {
					b.Fatalf("counts = %+v, want %d delivered and nothing lost or duplicated", n, frames)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames), "ns/frame")
		})
	}
}

// BenchmarkReadWSMessages is BenchmarkReadFrames' live case for WebSocket messages (--proto=ws): the JSON
// message mapped to its event (wsEvent), then the same checks. The WebSocket framing itself
// (coder/websocket's reader) is not in it.
func BenchmarkReadWSMessages(b *testing.B) {
	const frames = 10_000
	msgs := make([][]byte, frames)
	offs := [3]int64{1000, 2000, 3000}
	for i := range msgs {
		p := i % 3
		offs[p]++
		id := "v1:0-" + strconv.FormatInt(offs[0], 10) + ".1-" + strconv.FormatInt(offs[1], 10) + ".2-" + strconv.FormatInt(offs[2], 10)
		msgs[i] = gatewayWSMessage("message", id, makeValue(time.Now().UnixNano(), int64(i), 200), "k-"+strconv.Itoa(i), int32(p), offs[p])
	}
	b.ReportAllocs()
	var sh shared
	for b.Loop() {
		b.StopTimer()
		c := &client{}
		if err := c.tr.open("v1:0-1000.1-2000.2-3000", time.Now()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for _, m := range msgs {
			_, ev, _, err := wsEvent(m)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.event(&sh, ev, false); err != nil {
				b.Fatal(err)
			}
		}
		if n := c.tr.counts(); n.Delivered != frames || n.Lost != 0 || n.Dup != 0 {
			b.Fatalf("counts = %+v", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames), "ns/frame")
}
