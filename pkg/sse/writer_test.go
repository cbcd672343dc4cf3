package sse

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files from the current output")

// writerCases are the wire outputs pinned by golden files, one file per case
// named testdata/<name>.golden.
var writerCases = []struct {
	name string
	id   string
	typ  string
	data string
	// write, when set, replaces AppendEvent(id, typ, data).
	write func(dst []byte) []byte
}{
	{name: "event-full", id: "v1:0-5812.1-5790", typ: "update", data: `{"user":"ada","n":1}`},
	{name: "event-data-only", data: `{"n":2}`},
	{name: "event-id-only-no-type", id: "42", data: "x"},
	{name: "data-empty", data: ""},
	{name: "data-only-newlines", data: "\n\n\n"},
	{name: "data-only-crlf", data: "\r\n"},
	{name: "data-lines-lf", data: "a\nb\nc"},
	{name: "data-lines-cr", data: "a\rb\rc"},
	{name: "data-lines-crlf", data: "a\r\nb\r\nc"},
	{name: "data-lines-mixed", data: "a\r\nb\rc\nd\r\re\n\rf\r\r\ng"},
	{name: "data-trailing-lf", data: "a\n"},
	{name: "data-trailing-cr", data: "a\r"},
	{name: "data-trailing-crlf", data: "a\r\n"},
	{name: "data-leading-line-end", data: "\nab"},
	{name: "data-empty-line-inside", data: "a\n\nb"},
	{name: "data-leading-space", data: " a\n  b"},
	{name: "data-colons", data: "a: b\n:c\ndata: d"},
	{name: "data-injection", data: "x\n\nid: evil\nevent: evil\ndata: evil\n\n"},
	{name: "data-non-utf8", data: "\xff\xfe\xe2\x82 \xc3(\xed\xa0\x80"},
	{name: "data-nul", data: "a\x00b"},
	{name: "unicode", id: "\u00fc-1", typ: "\u00e9v\u00e9nement", data: "\u65e5\u672c\u8a9e\n\U0001F600\u2028z"},
	{name: "data-bom", data: "\ufeffx"},
	{name: "id-injection-lf", id: "1\n\ndata: evil", typ: "t", data: "ok"},
	{name: "id-injection-cr", id: "1\rretry: 1\r\r", data: "ok"},
	{name: "id-injection-crlf", id: "1\r\nevent: evil", data: "ok"},
	{name: "id-nul", id: "a\x00b\x00", data: "ok"},
	{name: "id-leading-space", id: " 7", data: "ok"},
	{name: "event-injection", typ: "x\r\ndata: evil\n\n", data: "ok"},
	{name: "event-nul-kept", typ: "a\x00b", data: "ok"},
	{name: "id-non-utf8", id: "\xff1", typ: "\xe2\x82", data: "ok"},
	{name: "id-block", write: func(dst []byte) []byte { return AppendID(dst, "v1:0-9") }},
	{name: "id-block-empty", write: func(dst []byte) []byte { return AppendID(dst, "") }},
	{name: "id-block-injection", write: func(dst []byte) []byte { return AppendID(dst, "1\r\n\x00\n") }},
	{name: "retry", write: func(dst []byte) []byte { return AppendRetry(dst, 3000) }},
	{name: "retry-negative", write: func(dst []byte) []byte { return AppendRetry(dst, -5) }},
	{name: "retry-then-event", write: func(dst []byte) []byte {
		return AppendEvent(AppendRetry(dst, 1500), "1", "", []byte("x"))
	}},
	{name: "comment", write: func(dst []byte) []byte { return AppendComment(dst, "keep-alive") }},
	{name: "comment-empty", write: func(dst []byte) []byte { return AppendComment(dst, "") }},
	{name: "comment-injection", write: func(dst []byte) []byte { return AppendComment(dst, "a\r\n\ndata: evil\r") }},
}

func TestWriterGolden(t *testing.T) {
	for _, tc := range writerCases {
		t.Run(tc.name, func(t *testing.T) {
			// Start from a non-empty dst to check that it is appended to.
			prefix := []byte("prefix|")
			var got []byte
			if tc.write != nil {
				got = tc.write(bytes.Clone(prefix))
			} else {
				got = AppendEvent(bytes.Clone(prefix), tc.id, tc.typ, []byte(tc.data))
				gotBytes := AppendEventBytes(bytes.Clone(prefix), []byte(tc.id), []byte(tc.typ), []byte(tc.data))
				if !bytes.Equal(got, gotBytes) {
					t.Fatalf("AppendEventBytes = %q, AppendEvent = %q", gotBytes, got)
				}
			}
			if !bytes.HasPrefix(got, prefix) {
				t.Fatalf("output %q does not start with dst %q", got, prefix)
			}
			got = got[len(prefix):]

			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s\n got: %q\nwant: %q", path, got, want)
			}
		})
	}
}

// TestWriterNoStrayBlankLine checks, for every golden case, that the only
// blank line is the last one, so a client sees exactly one block.
func TestWriterNoStrayBlankLine(t *testing.T) {
	for _, tc := range writerCases {
		if tc.write != nil && tc.name != "retry-then-event" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			var out []byte
			if tc.write != nil {
				out = tc.write(nil)
			} else {
				out = AppendEvent(nil, tc.id, tc.typ, []byte(tc.data))
			}
			checkOneBlock(t, out)
		})
	}
}

// checkOneBlock fails unless frame is a sequence of non-empty lines ending in
// exactly one blank line, with line ends as a client splits them, and every
// line is a field the writer is meant to produce.
func checkOneBlock(t testing.TB, frame []byte) {
	t.Helper()
	lines, rest := splitLines(frame)
	if len(rest) != 0 {
		t.Fatalf("frame %q ends in an unterminated line %q", frame, rest)
	}
	if len(lines) == 0 || lines[len(lines)-1] != "" {
		t.Fatalf("frame %q does not end with a blank line", frame)
	}
	for i, l := range lines[:len(lines)-1] {
		if l == "" {
			t.Fatalf("frame %q has a blank line at line %d, which would split the event", frame, i)
		}
		switch {
		case l == "data:", hasAnyPrefix(l, "data: ", "id: ", "event: ", "retry: "):
		default:
			t.Fatalf("frame %q has an unexpected line %q", frame, l)
		}
	}
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if len(s) > len(p) && s[:len(p)] == p {
			return true
		}
	}
	return false
}

// splitLines splits b at CR LF, CR and LF as a client does, returning the
// terminated lines and the unterminated rest.
func splitLines(b []byte) (lines []string, rest []byte) {
	for {
		i := bytes.IndexAny(b, "\r\n")
		if i < 0 {
			return lines, b
		}
		lines = append(lines, string(b[:i]))
		if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
			i++
		}
		b = b[i+1:]
	}
}

func TestWriterAllocs(t *testing.T) {
	data := []byte("line one\r\nline two\rline three\n")
	id, typ := "v1:0-5812.1-5790.2-5833", "update"
	idB, typB := []byte(id), []byte(typ)
	buf := make([]byte, 0, 4096)
	cases := []struct {
		name string
		fn   func()
	}{
		{"AppendEvent", func() { buf = AppendEvent(buf[:0], id, typ, data) }},
		{"AppendEvent-sanitized", func() { buf = AppendEvent(buf[:0], "a\nb\x00", "c\rd", data) }},
		{"AppendEventBytes", func() { buf = AppendEventBytes(buf[:0], idB, typB, data) }},
		{"AppendID", func() { buf = AppendID(buf[:0], id) }},
		{"AppendRetry", func() { buf = AppendRetry(buf[:0], 2500) }},
		{"AppendComment", func() { buf = AppendComment(buf[:0], "keep-alive") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(100, tc.fn); n != 0 {
				t.Errorf("%v allocations per call, want 0", n)
			}
		})
	}
}

// TestAppendDataManyLines checks that a value with many lines of one kind of
// line end is written correctly (the line end search caches positions).
func TestAppendDataManyLines(t *testing.T) {
	for _, sep := range []string{"\r", "\n", "\r\n"} {
		var data, want []byte
		for i := range 1000 {
			if i > 0 {
				data = append(data, sep...)
			}
			data = append(data, 'x')
			want = append(want, "data: x\n"...)
		}
		want = append(want, '\n')
		if got := AppendEvent(nil, "", "", data); !bytes.Equal(got, want) {
			t.Errorf("separator %q: output differs", sep)
		}
	}
}
