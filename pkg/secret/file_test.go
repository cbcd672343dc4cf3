package secret

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clock is a settable now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, f *File) string {
	t.Helper()
	s, err := f.Text()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFileRewritten: a file rewritten in place is read again at its next use; trailing line ends are dropped,
// inner blanks kept; a file that has not changed since it aged is not read again.
func TestFileRewritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "password")
	write(t, path, " one \r\n")
	f := NewFile("kafka-sasl-password-file", path)
	if got := mustRead(t, f); got != " one " {
		t.Fatalf("first read %q", got)
	}
	write(t, path, "two-longer\n")
	if got := mustRead(t, f); got != "two-longer" {
		t.Fatalf("after the rewrite: %q, want the new contents", got)
	}
	c := &clock{t: time.Now().Add(time.Hour)} // the file has aged
	f.now = c.now
	_ = mustRead(t, f) // read again: the last read was racy
	reads := f.reads
	for range 3 {
		_ = mustRead(t, f)
	}
	if f.reads != reads {
		t.Fatalf("%d reads of an unchanged, aged file, want none", f.reads-reads)
	}
}

// TestFileRacyRewrite: a rewrite that keeps the size, the inode and the modification time (two writes within
// one tick of the file system's clock) is still seen, because the first was read while it was fresh.
func TestFileRacyRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	mtime := time.Now().Truncate(time.Second)
	write(t, path, "tok-1")
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	f := NewFile("schema-registry-token-file", path)
	if got := mustRead(t, f); got != "tok-1" {
		t.Fatalf("first read %q", got)
	}
	write(t, path, "tok-2")
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, f); got != "tok-2" {
		t.Fatalf("after a rewrite in the same tick: %q, want tok-2", got)
	}
}

// TestFileKubernetesSwap: a Kubernetes Secret volume holds key -> ..data/key and ..data -> ..<timestamp>; an
// update writes a new timestamped directory and swaps ..data. The new target is read even when it has the
// old one's size and modification time.
func TestFileKubernetesSwap(t *testing.T) {
	dir := t.TempDir()
	mtime := time.Unix(1_700_000_000, 0)
	version := func(name, content string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o700); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name, "password")
		write(t, p, content)
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	swap := func(name string) {
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_01_01_a", "old-pw")
	swap("..2026_01_01_a")
	if err := os.Symlink("..data/password", filepath.Join(dir, "password")); err != nil {
		t.Fatal(err)
	}
	f := NewFile("redis-password-file", filepath.Join(dir, "password"))
	f.now = (&clock{t: mtime.Add(time.Hour)}).now // old files: only the swap can show the change
	if got := mustRead(t, f); got != "old-pw" {
		t.Fatalf("first read %q", got)
	}
	version("..2026_01_02_b", "new-pw")
	swap("..2026_01_02_b")
	if err := os.RemoveAll(filepath.Join(dir, "..2026_01_01_a")); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, f); got != "new-pw" {
		t.Fatalf("after the swap: %q, want new-pw", got)
	}
}

// TestFileErrors: a missing, empty or directory path is an error naming the setting and the path; the error
// is not remembered, so the file is used as soon as it is right.
func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	f := NewFile("schema-registry-token-file", path)
	for _, tc := range []struct {
		name    string
		prepare func()
		is      error
		text    string
	}{
		{"missing", func() {}, fs.ErrNotExist, "no such file"},
		{"empty", func() { write(t, path, "\n") }, ErrEmpty, "empty"},
		{"directory", func() { _ = os.Remove(path); _ = os.Mkdir(path, 0o700) }, nil, "is a directory"},
	} {
		tc.prepare()
		_, err := f.Read()
		if err == nil || !strings.Contains(err.Error(), "schema-registry-token-file "+path) || !strings.Contains(err.Error(), tc.text) ||
			(tc.is != nil && !errors.Is(err, tc.is)) {
			t.Fatalf("%s: %v, want an error naming the setting, the path and %q", tc.name, err, tc.text)
		}
	}
	_ = os.Remove(path)
	write(t, path, "tok")
	if got := mustRead(t, f); got != "tok" {
		t.Fatalf("after the errors: %q", got)
	}
}

// TestValue: a file wins over text; String and GoString show neither the text nor the file's contents.
func TestValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pw")
	write(t, path, "from-file")
	for _, tc := range []struct {
		v    Value
		want string
	}{
		{Pick("from-env", "kafka-sasl-password-file", path), "from-file"},
		{Pick("from-env", "kafka-sasl-password-file", ""), "from-env"},
	} {
		got, err := tc.v.Get()
		if err != nil || got != tc.want {
			t.Fatalf("Get: %q, %v; want %q", got, err, tc.want)
		}
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			if s := fmt.Sprintf(verb, struct{ P Value }{tc.v}); strings.Contains(s, "from-") {
				t.Errorf("%s shows the secret: %s", verb, s)
			}
		}
	}
	if !(Value{}).IsZero() || Pick("", "x", "").File() != nil || Pick("", "x", path).IsZero() {
		t.Error("IsZero or File wrong")
	}
}
