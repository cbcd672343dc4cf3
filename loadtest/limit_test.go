package main

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// fakeRlimits behaves like the kernel: anyone may move the soft limit up to the hard one; raising the hard
// limit needs privilege and stays at most nrOpen.
type fakeRlimits struct {
	cur, hard  uint64
	privileged bool
	nrOpen     uint64
	sets       int
}

func (f *fakeRlimits) get() (cur, hard uint64, err error) { return f.cur, f.hard, nil }

func (f *fakeRlimits) set(cur, hard uint64) error {
	f.sets++
	switch {
	case cur > hard:
		return syscall.EINVAL
	case hard > f.hard && !f.privileged:
		return syscall.EPERM
	case hard > f.nrOpen:
		return syscall.EPERM
	}
	f.cur, f.hard = cur, hard
	return nil
}

func TestRaiseNoFile(t *testing.T) {
	tests := []struct {
		name       string
		lim        fakeRlimits
		need       uint64
		wantErr    bool
		wantCur    uint64
		wantHard   uint64
		wantNoSets bool
	}{
		{"already enough", fakeRlimits{cur: 70_000, hard: 70_000, nrOpen: 1 << 20}, 50_256, false, 70_000, 70_000, true},
		{"soft below hard", fakeRlimits{cur: 1024, hard: 20_000, nrOpen: 1 << 20}, 10_256, false, 10_256, 20_000, false},
		{"hard raised as root", fakeRlimits{cur: 1024, hard: 20_000, privileged: true, nrOpen: 1 << 20}, 50_256, false, 50_256, 50_256, false},
		{"hard above nr_open", fakeRlimits{cur: 1024, hard: 20_000, privileged: true, nrOpen: 40_000}, 50_256, true, 1024, 20_000, false},
		{"hard needed, not root", fakeRlimits{cur: 1024, hard: 20_000, nrOpen: 1 << 20}, 50_256, true, 1024, 20_000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lim := tc.lim
			err := raiseNoFile(&lim, tc.need)
			if tc.wantErr {
				if !errors.Is(err, errNoFile) || !errors.Is(err, syscall.EPERM) {
					t.Fatalf("err = %v, want errNoFile wrapping EPERM", err)
				}
				for _, want := range []string{"50256", "20000", "ulimit -Hn"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("the error does not say %q: %v", want, err)
					}
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if lim.cur != tc.wantCur || lim.hard != tc.wantHard {
				t.Fatalf("limits = %d/%d, want %d/%d", lim.cur, lim.hard, tc.wantCur, tc.wantHard)
			}
			if tc.wantNoSets && lim.sets != 0 {
				t.Fatalf("setrlimit called %d times with the limit already enough", lim.sets)
			}
		})
	}
}
