package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDecodeID(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		out, errText string
		status       int
	}{
		{"one id", []string{"v1:0-41.2-17"}, "partition 0 offset 41\npartition 2 offset 17\n", "", 0},
		{"empty id", []string{"v1:"}, "no partition: the client has seen nothing yet\n", "", 0},
		{"two ids", []string{"v1:0-1", "v1:1-2"}, "v1:0-1\npartition 0 offset 1\nv1:1-2\npartition 1 offset 2\n", "", 0},
		{"malformed", []string{"hello"}, "", `invalid id "hello": position: malformed id`, 1},
		{"no id", nil, "", "usage:", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			status := decodeID(tc.args, &out, &errOut)
			if status != tc.status || out.String() != tc.out || !strings.Contains(errOut.String(), tc.errText) {
				t.Errorf("decodeID(%q) = %d, out %q, err %q", tc.args, status, out.String(), errOut.String())
			}
		})
	}
}
