package main

import (
	"strings"
	"testing"
)

// TestJudgeIdleProbe checks that an idle run fails when a connection did not get the probe records (the
// gateway had dropped it without the tool noticing), and that without a probe the same counts are not
// looked at (no records were owed).
func TestJudgeIdleProbe(t *testing.T) {
	tests := []struct {
		name   string
		probe  int
		res    result
		wantOK bool
	}{
		{"probe reached every connection", 3, result{Opened: 5, Connections: 5, Produced: 3, Delivered: 15}, true},
		{"one connection missed the probe", 3, result{Opened: 5, Connections: 5, Produced: 3, Delivered: 12, Lost: 3, ConnsWithErrors: 1}, false},
		{"a probe record twice", 3, result{Opened: 5, Connections: 5, Produced: 3, Delivered: 15, Dup: 1}, false},
		{"no probe asked", 0, result{Opened: 5, Connections: 5}, true},
		{"a connection did not open", 0, result{Opened: 4, Connections: 5}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.res
			r.Mode = modeIdle
			r.judge(config{Mode: modeIdle, IdleProbe: tc.probe})
			if r.OK != tc.wantOK {
				t.Fatalf("OK = %v, want %v (failures %q)", r.OK, tc.wantOK, r.Failures)
			}
			s := r.summary()
			if tc.probe > 0 && !strings.Contains(s, " lost=") {
				t.Fatalf("the summary of a probed idle run does not report loss: %s", s)
			}
		})
	}
}
