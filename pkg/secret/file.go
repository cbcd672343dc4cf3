package secret

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// racyWindow: a file modified less than this before it was read may be rewritten again within the same tick
// of the file system's clock, at the same size, leaving no trace in its stamp; such a file is read again at
// its next use until it has aged (git's "racily clean" entries, the same problem).
const racyWindow = 2 * time.Second

// ErrEmpty is a secret file that holds nothing (after trailing line ends are dropped).
var ErrEmpty = errors.New("secret: the file is empty")

// File is a secret kept in a file, read again when the file changes. Create it with NewFile.
type File struct {
	name string // the setting that names the file, for errors
	path string
	now  func() time.Time

	mu    sync.Mutex
	stamp stamp  // what the file was at the last read
	data  []byte // what it held then; nil until the first successful read
	racy  bool   // the last read was within racyWindow of the file's modification
	reads int    // how many times the file was read, for tests
}

// stamp is what tells one version of a file from another.
type stamp struct {
	target string // the path with every symbolic link resolved
	ino    uint64
	size   int64
	mtime  time.Time
}

// NewFile returns the File at path; setting names the setting that gave the path, for error messages
// ("kafka-sasl-password-file"). It does not touch the file system: Read does.
func NewFile(setting, path string) *File {
	return &File{name: setting, path: path, now: time.Now}
}

// Path is the file's path as given.
func (f *File) Path() string { return f.path }

// String names the file, never its contents.
func (f *File) String() string { return f.name + "=" + f.path }

// Read returns the file's contents without trailing CR and LF, reading the file again when it changed since
// the last read. Each call looks at the file (a stat, after resolving its links), so a change is seen by the
// next use. The slice is shared: callers must not modify it.
func (f *File) Read() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := f.look()
	if err != nil {
		return nil, err
	}
	if f.data != nil && st == f.stamp && !f.racy {
		return f.data, nil
	}
	b, err := os.ReadFile(st.target)
	if err != nil {
		return nil, f.fail(err)
	}
	b = []byte(strings.TrimRight(string(b), "\r\n"))
	if len(b) == 0 {
		return nil, f.fail(ErrEmpty)
	}
	f.stamp, f.data, f.racy = st, b, f.now().Sub(st.mtime) < racyWindow
	f.reads++
	return b, nil
}

// Text is Read as a string.
func (f *File) Text() (string, error) {
	b, err := f.Read()
	return string(b), err
}

// look resolves the path and stats its target.
func (f *File) look() (stamp, error) {
	target, err := filepath.EvalSymlinks(f.path)
	if err != nil {
		return stamp{}, f.fail(err)
	}
	fi, err := os.Stat(target)
	if err != nil {
		return stamp{}, f.fail(err)
	}
	if fi.IsDir() {
		return stamp{}, f.fail(errors.New("is a directory"))
	}
	st := stamp{target: target, size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st, nil
}

// fail wraps err with the setting and the path.
func (f *File) fail(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is named below, once
	}
	return fmt.Errorf("%s %s: %w", f.name, f.path, err)
}
