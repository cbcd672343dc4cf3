package main

import (
	"errors"
	"strings"
	"testing"
)

// countSplit counts the frames of stream fed to a frameCounter in pieces cut at the given offsets, and
// returns the count and the first error.
func countSplit(stream string, cuts ...int) (int64, error) {
	var c frameCounter
	prev := 0
	for _, at := range append(cuts, len(stream)) {
		if err := c.write([]byte(stream[prev:at])); err != nil {
			return c.frames, err
		}
		prev = at
	}
	return c.frames, nil
}

func TestFrameCounter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   int64
	}{
		{"the gateway's frames", waveFrames(5), 5},
		{"nothing", "", 0},
		{"a frame not ended yet", "id: v1:0-1\ndata: x\n", 0},
		{"a frame without its last line end", "id: v1:0-1\ndata: x", 0},
		{"two frames", "data: a\n\ndata: b\n\n", 2},
		{"further blank lines end nothing", "data: a\n\n\n\ndata: b\n\n\n", 2},
		{"blank lines before any frame", "\n\n\ndata: a\n\n", 1},
		{"a comment block (a keep-alive) counts", ":\n\ndata: a\n\n", 2},
		{"CRLF line ends", "id: 1\r\ndata: a\r\n\r\ndata: b\r\n\r\n", 2},
		{"CRLF blank lines after a frame", "data: a\r\n\r\n\r\n", 1},
		{"mixed line ends", "data: a\r\n\ndata: b\n\r\n", 2},
		{"a line of a lone CR is not a frame's content", "\r\n\r\ndata: a\n\n", 1},
		{"a long line", "data: " + strings.Repeat("x", 100_000) + "\n\n", 1},
		{"another event type", "event: other\ndata: a\n\n", 1},
		{"a data line that says resync", "data: event: resync\n\n", 1},
		{"a resync-like type line", "event: resynced\ndata: {}\n\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n, err := countSplit(tc.stream); n != tc.want || err != nil {
				t.Fatalf("in one read: %d frames, err %v; want %d", n, err, tc.want)
			}
			// The same stream in two reads cut at every offset, in three reads cut at every pair of
			// offsets (short streams), and a byte at a time: the count must not change.
			for i := 0; i <= len(tc.stream); i++ {
				if n, err := countSplit(tc.stream, i); n != tc.want || err != nil {
					t.Fatalf("cut at %d (%q|%q): %d frames, err %v; want %d", i, tc.stream[:i], tc.stream[i:], n, err, tc.want)
				}
			}
			if len(tc.stream) <= 200 {
				for i := 0; i <= len(tc.stream); i++ {
					for j := i; j <= len(tc.stream); j++ {
						if n, err := countSplit(tc.stream, i, j); n != tc.want || err != nil {
							t.Fatalf("cut at %d and %d: %d frames, err %v; want %d", i, j, n, err, tc.want)
						}
					}
				}
			}
			bytewise := make([]int, 0, len(tc.stream))
			for i := 1; i < len(tc.stream); i++ {
				bytewise = append(bytewise, i)
			}
			if n, err := countSplit(tc.stream, bytewise...); n != tc.want || err != nil {
				t.Fatalf("a byte at a time: %d frames, err %v; want %d", n, err, tc.want)
			}
		})
	}
}

// TestFrameCounterSplitBlankLine: a frame's ending "\n\n" split over two reads ends one frame, and the next
// frame's lines are counted afresh, not as a blank line.
func TestFrameCounterSplitBlankLine(t *testing.T) {
	var c frameCounter
	for _, p := range []string{"data: a\n", "\n", "data: b\n", "\ndata: c\n\n", "\n"} {
		if err := c.write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if c.frames != 3 {
		t.Fatalf("%d frames, want 3", c.frames)
	}
	// "\r\n\r\n" split between its CR and LF, and between its two line ends.
	for _, cuts := range [][]int{{8}, {9}, {10}} {
		if n, err := countSplit("data: a\r\n\r\ndata: b\r\n\r\n", cuts...); n != 2 || err != nil {
			t.Fatalf("CRLF cut at %v: %d frames, err %v; want 2", cuts, n, err)
		}
	}
}

// TestFrameCounterResync: the resync event's type line fails the stream, at every cut, after the frames
// before it.
func TestFrameCounterResync(t *testing.T) {
	for _, typ := range []string{"event: resync\n", "event:resync\n", "event: resync\r\n"} {
		stream := waveFrames(2) + typ + "data: {}\n\n" + waveFrames(1)
		for i := 0; i <= len(stream); i++ {
			n, err := countSplit(stream, i)
			if !errors.Is(err, errResync) || n != 2 {
				t.Fatalf("%q cut at %d: %d frames, err %v; want 2 and a resync", typ, i, n, err)
			}
		}
	}
}

// BenchmarkFrameCounter is what a wave client spends counting a frame, to set against a reader's parse
// (BenchmarkReadFrames in client_bench_test.go).
func BenchmarkFrameCounter(b *testing.B) {
	buf := streamBody(waveReadBuf / 250) // about a read's worth of the gateway's frames
	var c frameCounter
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if err := c.write(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(c.frames), "ns/frame")
}
