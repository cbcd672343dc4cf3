package main

import (
	"errors"
	"fmt"
	"syscall"
)

// errNoFile is wrapped when the open-file limit cannot be raised to what a run needs.
var errNoFile = errors.New("open-file limit too low")

// rlimits reads and sets RLIMIT_NOFILE; sysRlimits is the real one, tests use a fake.
type rlimits interface {
	get() (cur, hard uint64, err error)
	set(cur, hard uint64) error
}

type sysRlimits struct{}

func (sysRlimits) get() (cur, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("getrlimit: %w", err)
	}
	return lim.Cur, lim.Max, nil
}

func (sysRlimits) set(cur, hard uint64) error {
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: cur, Max: hard})
}

// noFileFor is the number of open files a run of conns connections needs: one socket each, plus room for
// Kafka, the admin HTTP client, /proc reads and the runtime.
func noFileFor(conns int) uint64 { return uint64(conns) + 256 }

// raiseNoFile raises the soft RLIMIT_NOFILE to at least n. Below the hard limit that is always allowed;
// above it, the hard limit is raised too, which needs CAP_SYS_RESOURCE (root) and n at most fs.nr_open.
// The error says what was needed, what the limits are and how to raise them.
func raiseNoFile(lim rlimits, n uint64) error {
	cur, hard, err := lim.get()
	if err != nil {
		return err
	}
	if cur >= n {
		return nil
	}
	newHard := hard
	if hard < n {
		newHard = n
	}
	if err := lim.set(n, newHard); err != nil {
		if newHard > hard {
			return fmt.Errorf("%w: the run needs %d open files and the hard limit is %d; raising it failed (%w): "+
				"run as root (and keep it at most /proc/sys/fs/nr_open) or raise it first with `ulimit -Hn %d`",
				errNoFile, n, hard, err, n)
		}
		return fmt.Errorf("%w: raising the soft limit from %d to %d (hard %d) failed: %w", errNoFile, cur, n, hard, err)
	}
	return nil
}
