package main

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name string
		stat string
		want float64
		err  bool
	}{
		{"plain", "1 (gateway) S 0 1 1 0 -1 0 0 0 0 0 150 50 0 0 20 0 1 0 1 1 1", 2.0, false},
		{"name with spaces and parens", "7 (a) b (c) R 0 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 1 1 1", 0.03, false},
		{"no name", "1 gateway S 0", 0, true},
		{"truncated", "1 (gateway) S 0 1 1", 0, true},
		{"not a number", "1 (gateway) S 0 1 1 0 -1 0 0 0 0 0 x 50 0", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.stat))
			if tc.err {
				if !errors.Is(err, errProcFormat) {
					t.Fatalf("err = %v, want errProcFormat", err)
				}
				return
			}
			if err != nil || math.Abs(got-tc.want) > 1e-9 {
				t.Fatalf("parseStatCPU = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseStatusRSS(t *testing.T) {
	if _, err := parseStatusRSS(strings.NewReader("Name:\tkthreadd\nState:\tS\n")); !errors.Is(err, errProcFormat) {
		t.Fatalf("no VmRSS: err = %v", err)
	}
	if _, err := parseStatusRSS(strings.NewReader("VmRSS:\t12 MB\n")); !errors.Is(err, errProcFormat) {
		t.Fatalf("unit MB: err = %v", err)
	}
}

func TestSampleProcsTestdata(t *testing.T) {
	s, err := sampleProcs("testdata/proc", []int{4242})
	if err != nil {
		t.Fatal(err)
	}
	if want := (1234.0 + 567.0) / 100; math.Abs(s.CPUSeconds-want) > 1e-9 || s.RSSBytes != 40420<<10 {
		t.Fatalf("sample = %+v, want cpu %v rss %d", s, want, 40420<<10)
	}
	// Two processes add up.
	s, err = sampleProcs("testdata/proc", []int{4242, 4343})
	if err != nil {
		t.Fatal(err)
	}
	if want := (1234.0 + 567 + 50 + 25) / 100; math.Abs(s.CPUSeconds-want) > 1e-9 || s.RSSBytes != (40420+1000)<<10 {
		t.Fatalf("sample = %+v, want cpu %v rss %d", s, want, (40420+1000)<<10)
	}
	if _, err := sampleProcs("testdata/proc", []int{1}); err == nil {
		t.Fatal("a missing pid gave no error")
	}
}
