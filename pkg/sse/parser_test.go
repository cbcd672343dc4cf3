package sse

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// chunkReader returns its chunks one per Read (an empty chunk is a read of
// zero bytes and no error), then io.EOF.
type chunkReader struct {
	chunks []string
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if n < len(r.chunks[0]) {
		r.chunks[0] = r.chunks[0][n:]
	} else {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// splitAfterCR cuts s right after every CR, so each CR LF pair arrives in two
// reads.
func splitAfterCR(s string) []string {
	return strings.SplitAfter(s, "\r")
}

// readers are the ways each parser case is fed to the Parser.
var readers = []struct {
	name string
	new  func(s string) io.Reader
}{
	{"whole", func(s string) io.Reader { return strings.NewReader(s) }},
	{"one-byte", func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) }},
	{"split-after-cr", func(s string) io.Reader { return &chunkReader{chunks: splitAfterCR(s)} }},
	{"eof-with-data", func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) }},
	{"half-reads", func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) }},
}

// collect calls Next until it fails and returns the events and the error.
func collect(p *Parser) ([]Event, error) {
	var evs []Event
	for {
		ev, err := p.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func msg(data, id string) Event { return Event{Type: "message", Data: data, ID: id} }

func TestParser(t *testing.T) {
	const fffd = "\uFFFD"
	cases := []struct {
		name string
		in   string
		// chunks, when set, is the input cut into reads; in is then unused.
		chunks   []string
		want     []Event
		lastID   string
		retry    time.Duration
		hasRetry bool
	}{
		// Bytes to text.
		{name: "utf8 valid multi-byte", in: "data: \u00fc\u65e5\U0001F600\n\n", want: []Event{msg("\u00fc\u65e5\U0001F600", "")}},
		{name: "utf8 invalid byte replaced", in: "data: a\xffb\xc0c\n\n", want: []Event{msg("a"+fffd+"b"+fffd+"c", "")}},
		{name: "utf8 truncated sequence is one replacement", in: "data: \xe2\x82x\n\n", want: []Event{msg(fffd+"x", "")}},
		{name: "utf8 truncated sequence at line end", in: "data: \xf0\x9f\x98\ndata: \xe2\n\n", want: []Event{msg(fffd+"\n"+fffd, "")}},
		{
			name: "utf8 maximal subparts as in Unicode table 3-8",
			in:   "data: a\xf1\x80\x80\xe1\x80\xc2b\x80c\x80\xbfd\n\n",
			want: []Event{msg("a"+fffd+fffd+fffd+"b"+fffd+"c"+fffd+fffd+"d", "")},
		},
		{name: "utf8 surrogate and overlong", in: "data: \xed\xa0\x80\xe0\x80\xaf\xf4\x90\x80\x80\n\n", want: []Event{msg(strings.Repeat(fffd, 10), "")}},
		{name: "utf8 encoded replacement character kept", in: "data: \xef\xbf\xbd\n\n", want: []Event{msg(fffd, "")}},
		{
			name: "utf8 invalid in event and id",
			in:   "event: \xff\nid: \xe2\x82\ndata: x\n\n",
			want: []Event{{Type: fffd, Data: "x", ID: fffd}}, lastID: fffd,
		},
		{
			name:   "utf8 character split across reads",
			chunks: []string{"data: \xe6", "\x97", "\xa5\xf0\x9f", "\x98\x80\n\n"},
			want:   []Event{msg("\u65e5\U0001F600", "")},
		},
		{name: "bom at start dropped", in: "\xef\xbb\xbfdata: x\n\n", want: []Event{msg("x", "")}},
		{name: "bom split across reads", chunks: []string{"\xef", "\xbb", "\xbf", "data: x\n\n"}, want: []Event{msg("x", "")}},
		{name: "bom alone", in: "\xef\xbb\xbf"},
		{name: "second bom kept and makes an unknown field", in: "\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n"},
		{name: "bom after first line kept", in: "data: a\n\n\xef\xbb\xbfdata: b\n\ndata: c\n\n", want: []Event{msg("a", ""), msg("c", "")}},
		{name: "bom in value kept", in: "data: \xef\xbb\xbfx\n\n", want: []Event{msg("\ufeffx", "")}},
		{name: "partial bom is not a bom", in: "\xef\xbbdata: x\n\ndata: y\n\n", want: []Event{msg("y", "")}},

		// Line ends.
		{name: "lf line ends", in: "data: a\ndata: b\n\n", want: []Event{msg("a\nb", "")}},
		{name: "crlf line ends", in: "data: a\r\ndata: b\r\n\r\n", want: []Event{msg("a\nb", "")}},
		{name: "cr line ends", in: "data: a\rdata: b\r\r", want: []Event{msg("a\nb", "")}},
		{name: "mixed line ends", in: "data: a\r\ndata: b\rdata: c\n\r\ndata: d\r\n\n", want: []Event{msg("a\nb\nc", ""), msg("d", "")}},
		{name: "lf then cr is two line ends", in: "data: a\n\rdata: b\n\n", want: []Event{msg("a", ""), msg("b", "")}},
		{name: "cr cr is two line ends", in: "data: a\r\rdata: b\r\r", want: []Event{msg("a", ""), msg("b", "")}},
		{
			name:   "cr and lf in different reads are one line end",
			chunks: []string{"data: a\r", "\ndata: b\r", "\n\r", "\n"},
			want:   []Event{msg("a\nb", "")},
		},
		{
			name:   "cr then lf after an empty read",
			chunks: []string{"data: a\r", "", "", "\n\r", "", "\ndata: b\n\n"},
			want:   []Event{msg("a", ""), msg("b", "")},
		},
		{name: "cr at end of stream ends the line", in: "data: a\n\r", want: []Event{msg("a", "")}},
		{name: "only line ends", in: "\n\r\n\r\r\n\n"},

		// Lines to fields.
		{name: "comment ignored", in: ": hello\ndata: x\n:\n: data: y\n\n", want: []Event{msg("x", "")}},
		{name: "comment only block fires nothing", in: ": keep-alive\n\n"},
		{name: "one leading space stripped", in: "data:  two\n\n", want: []Event{msg(" two", "")}},
		{name: "no space after colon", in: "data:x\n\n", want: []Event{msg("x", "")}},
		{name: "tab after colon kept", in: "data:\tx\n\n", want: []Event{msg("\tx", "")}},
		{name: "value is everything after the first colon", in: "data: a: b:c\n\n", want: []Event{msg("a: b:c", "")}},
		{name: "line without colon is a field with empty value", in: "data\n\n", want: []Event{msg("", "")}},
		{name: "two data lines without colon", in: "data\ndata\n\n", want: []Event{msg("\n", "")}},
		{name: "names are case-sensitive", in: "Data: x\nDATA: y\nEvent: e\n\n"},
		{name: "space before colon is an unknown field", in: "data : x\nid : 1\n\n"},
		{name: "unknown fields ignored", in: "foo: bar\ndata: x\nfoo\n\n", want: []Event{msg("x", "")}},
		{name: "field name with nul is unknown", in: "data\x00: x\n\n"},

		// event and data.
		{name: "event sets type", in: "event: update\ndata: x\n\n", want: []Event{{Type: "update", Data: "x"}}},
		{name: "last event field wins", in: "event: a\nevent: b\ndata: x\n\n", want: []Event{{Type: "b", Data: "x"}}},
		{name: "empty event gives message", in: "event: a\nevent:\ndata: x\n\n", want: []Event{msg("x", "")}},
		{name: "event value keeps nul", in: "event: a\x00b\ndata: x\n\n", want: []Event{{Type: "a\x00b", Data: "x"}}},
		{name: "event value keeps a second space", in: "event:  a\ndata: x\n\n", want: []Event{{Type: " a", Data: "x"}}},
		{name: "data appends value and lf", in: "data: a\ndata: b\ndata: c\n\n", want: []Event{msg("a\nb\nc", "")}},
		{name: "only one trailing lf removed", in: "data: a\ndata\ndata:\n\n", want: []Event{msg("a\n\n", "")}},
		{name: "data then blank line fires empty data", in: "data:\n\n", want: []Event{msg("", "")}},

		// id.
		{name: "id sets last event id", in: "id: 1\ndata: x\n\n", want: []Event{msg("x", "1")}, lastID: "1"},
		{name: "id after data in the same block counts", in: "data: x\nid: 1\n\n", want: []Event{msg("x", "1")}, lastID: "1"},
		{name: "id carries over to later events", in: "id: 1\ndata: a\n\ndata: b\n\n", want: []Event{msg("a", "1"), msg("b", "1")}, lastID: "1"},
		{
			name: "id with nul ignored", in: "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\nid: \x00\ndata: c\n\n",
			want: []Event{msg("a", "1"), msg("b", "1"), msg("c", "1")}, lastID: "1",
		},
		{name: "empty id sets empty", in: "id: 1\ndata: a\n\nid:\ndata: b\n\n", want: []Event{msg("a", "1"), msg("b", "")}},
		{name: "id without colon sets empty", in: "id: 1\ndata: a\n\nid\ndata: b\n\n", want: []Event{msg("a", "1"), msg("b", "")}},
		{name: "id keeps a second space", in: "id:  5\ndata: x\n\n", want: []Event{msg("x", " 5")}, lastID: " 5"},
		{name: "id-only block moves last event id", in: "id: 7\n\n", lastID: "7"},
		{name: "id-only block between events", in: "id: 1\ndata: a\n\nid: 2\n\ndata: b\n\n", want: []Event{msg("a", "1"), msg("b", "2")}, lastID: "2"},
		{name: "id with event but no data moves last event id", in: "event: x\nid: 3\n\n", lastID: "3"},

		// retry.
		{name: "retry sets reconnection time", in: "retry: 1500\n", retry: 1500 * time.Millisecond, hasRetry: true},
		{name: "retry zero", in: "retry: 0\n", hasRetry: true},
		{name: "retry leading zeros", in: "retry:0007\n", retry: 7 * time.Millisecond, hasRetry: true},
		{name: "retry with unit ignored", in: "retry: 10s\n"},
		{name: "retry negative ignored", in: "retry: -1\n"},
		{name: "retry decimal ignored", in: "retry: 1.5\n"},
		{name: "retry empty ignored", in: "retry:\n"},
		{name: "retry without colon ignored", in: "retry\n"},
		{name: "retry second space ignored", in: "retry:  5\n"},
		{name: "retry non-ascii digit ignored", in: "retry: \u0661\n"},
		{name: "retry invalid keeps earlier value", in: "retry: 10\nretry: x\n", retry: 10 * time.Millisecond, hasRetry: true},
		{name: "retry later valid value wins", in: "retry: 10\nretry: 20\n", retry: 20 * time.Millisecond, hasRetry: true},
		{name: "retry too large ignored", in: "retry: 99999999999999999999\n"},
		{name: "retry largest duration", in: "retry: 9223372036854\n", retry: 9223372036854 * time.Millisecond, hasRetry: true},
		{name: "retry in unterminated event still applies", in: "data: a\nretry: 5\n", retry: 5 * time.Millisecond, hasRetry: true},
		{name: "retry does not make an event", in: "retry: 5\n\n", retry: 5 * time.Millisecond, hasRetry: true},

		// Dispatch.
		{name: "no event when data buffer empty", in: "event: x\n\n"},
		{name: "default type message", in: "data: x\n\n", want: []Event{msg("x", "")}},
		{name: "buffers cleared after dispatch", in: "event: a\ndata: 1\n\ndata: 2\n\n", want: []Event{{Type: "a", Data: "1"}, msg("2", "")}},
		{name: "type cleared by a block without data", in: "event: a\n\ndata: 2\n\n", want: []Event{msg("2", "")}},
		{name: "unterminated last event dropped", in: "data: a\n\ndata: b\n", want: []Event{msg("a", "")}},
		{name: "unterminated last line dropped", in: "data: a\n\ndata: b", want: []Event{msg("a", "")}},
		{name: "id in unterminated event never becomes last event id", in: "id: 1\ndata: a\n\nid: 2\ndata: b\n", want: []Event{msg("a", "1")}, lastID: "1"},
		{name: "id-only block unterminated", in: "id: 1\n\nid: 2\n", lastID: "1"},
		{name: "empty stream", in: ""},
		{
			// Modeled on the WebKit/Chromium layout test stream for EventSource.
			name: "mixed stream",
			in: ": a comment (ignored)\n" +
				"this line will be ignored since there is no field and the line itself is not a field\n" +
				"field: an unknown field that will be ignored\n" +
				":another comment\n\n" +
				"data : this line will be ignored since there is a space after data\n\n" +
				"data\ndata:\ndata\n: dispatch event with two newlines\n\n" +
				"data: simple\n\n" +
				"data: spanning\ndata:multiple\ndata\ndata: lines\ndata\n\n" +
				"id: 1\ndata: id is 1\n\n" +
				"data: id is still 1\n\n" +
				"id\ndata: no id\n\n" +
				"event: open\ndata: a message event with the name \"open\"\n\n" +
				"data: a line ending with crlf\r\ndata: a line with a : (colon)\ndata: a line ending with cr\r\n" +
				"retry: 10000\n: reconnection time set to 10 seconds\n\n" +
				"retry: one thousand\n: ignored invalid reconnection time value\n\n",
			want: []Event{
				msg("\n\n", ""),
				msg("simple", ""),
				msg("spanning\nmultiple\n\nlines\n", ""),
				msg("id is 1", "1"),
				msg("id is still 1", "1"),
				msg("no id", ""),
				{Type: "open", Data: "a message event with the name \"open\""},
				msg("a line ending with crlf\na line with a : (colon)\na line ending with cr", ""),
			},
			retry: 10 * time.Second, hasRetry: true,
		},
	}
	for _, tc := range cases {
		in := tc.in
		if tc.chunks != nil {
			in = strings.Join(tc.chunks, "")
		}
		rs := readers
		if tc.chunks != nil {
			rs = append(slices.Clip(rs), struct {
				name string
				new  func(s string) io.Reader
			}{"given-chunks", func(string) io.Reader { return &chunkReader{chunks: slices.Clone(tc.chunks)} }})
		}
		for _, r := range rs {
			t.Run(tc.name+"/"+r.name, func(t *testing.T) {
				p := NewParser(r.new(in))
				got, err := collect(p)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("Next error = %v, want io.EOF", err)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("events\n got: %q\nwant: %q", got, tc.want)
				}
				if id := p.LastEventID(); id != tc.lastID {
					t.Errorf("LastEventID = %q, want %q", id, tc.lastID)
				}
				if d, ok := p.Retry(); d != tc.retry || ok != tc.hasRetry {
					t.Errorf("Retry = %v, %v; want %v, %v", d, ok, tc.retry, tc.hasRetry)
				}
				// io.EOF is sticky.
				if _, err := p.Next(); !errors.Is(err, io.EOF) {
					t.Errorf("Next after EOF = %v, want io.EOF", err)
				}
			})
		}
	}
}

// result is an event or an error returned by Next, for comparing sequences.
type result struct {
	ev  Event
	err error
}

// String formats a result for test failure messages.
func (r result) String() string {
	if r.err != nil {
		return "error(" + r.err.Error() + ")"
	}
	return fmt.Sprintf("%q", r.ev)
}

// collectAll calls Next until io.EOF, carrying on after the limit errors,
// and returns every result.
func collectAll(t testing.TB, p *Parser, limit int) []result {
	t.Helper()
	var rs []result
	for range limit {
		ev, err := p.Next()
		if errors.Is(err, io.EOF) {
			return rs
		}
		rs = append(rs, result{ev, err})
		if err != nil && !errors.Is(err, ErrLineTooLong) && !errors.Is(err, ErrEventTooLarge) {
			return rs
		}
	}
	t.Fatalf("no io.EOF after %d calls to Next", limit)
	return nil
}

func TestParserLimits(t *testing.T) {
	long := strings.Repeat("x", 40)
	cases := []struct {
		name   string
		in     string
		opts   []Option
		want   []result
		lastID string
	}{
		{
			name: "line too long drops its event and recovers",
			in:   "data: a\n\nid: 5\ndata: b\ndata: " + long + "\ndata: c\nevent: e\n\ndata: d\n\n",
			opts: []Option{WithMaxLineBytes(16)},
			want: []result{{ev: msg("a", "")}, {err: ErrLineTooLong}, {ev: msg("d", "5")}}, lastID: "5",
		},
		{
			name: "line too long ending in cr lf",
			in:   "data: " + long + "\r\n\r\ndata: d\r\n\r\n",
			opts: []Option{WithMaxLineBytes(16)},
			want: []result{{err: ErrLineTooLong}, {ev: msg("d", "")}},
		},
		{
			name: "id line too long is ignored",
			in:   "id: 1\n\nid: " + long + "\n\ndata: d\n\n",
			opts: []Option{WithMaxLineBytes(16)},
			want: []result{{err: ErrLineTooLong}, {ev: msg("d", "1")}}, lastID: "1",
		},
		{
			name: "comment too long",
			in:   ": " + long + "\ndata: d\n\n",
			opts: []Option{WithMaxLineBytes(16)},
			want: []result{{err: ErrLineTooLong}},
		},
		{
			name: "line too long at end of stream",
			in:   "data: a\n\ndata: " + long,
			opts: []Option{WithMaxLineBytes(16)},
			want: []result{{ev: msg("a", "")}, {err: ErrLineTooLong}},
		},
		{
			name: "line of exactly the limit accepted",
			in:   "data: 0123456789\n\n",
			opts: []Option{WithMaxLineBytes(16)},
			want: []result{{ev: msg("0123456789", "")}},
		},
		{
			name: "line one over the limit",
			in:   "data: 0123456789A\n\n",
			opts: []Option{WithMaxLineBytes(16)},
			want: []result{{err: ErrLineTooLong}},
		},
		{
			name: "event too large drops the event and recovers",
			in:   "id: 1\ndata: 1234\nevent: e\ndata: 5678\nid: 2\ndata: 9\n\ndata: ok\n\n",
			opts: []Option{WithMaxEventBytes(8)},
			want: []result{{err: ErrEventTooLarge}, {ev: msg("ok", "2")}}, lastID: "2",
		},
		{
			name: "event of exactly the limit accepted",
			in:   "data: 123\ndata: 456\n\n",
			opts: []Option{WithMaxEventBytes(8)},
			want: []result{{ev: msg("123\n456", "")}},
		},
		{
			name: "zero limits keep the defaults",
			in:   "data: " + strings.Repeat("y", 100) + "\n\n",
			opts: []Option{WithMaxLineBytes(0), WithMaxEventBytes(-1)},
			want: []result{{ev: msg(strings.Repeat("y", 100), "")}},
		},
		{
			name: "line longer than the first buffer",
			in:   "data: " + strings.Repeat("z", 10000) + "\n\n",
			want: []result{{ev: msg(strings.Repeat("z", 10000), "")}},
		},
	}
	for _, tc := range cases {
		for _, r := range readers {
			t.Run(tc.name+"/"+r.name, func(t *testing.T) {
				p := NewParser(r.new(tc.in), tc.opts...)
				got := collectAll(t, p, 100)
				if !slices.Equal(got, tc.want) {
					t.Errorf("results\n got: %v\nwant: %v", got, tc.want)
				}
				if id := p.LastEventID(); id != tc.lastID {
					t.Errorf("LastEventID = %q, want %q", id, tc.lastID)
				}
			})
		}
	}
}

// idOnly is the Event Next returns for an id-only block with WithIDOnlyBlocks.
func idOnly(id string) Event { return Event{ID: id} }

func TestParserLastEventIDAndIDOnlyBlocks(t *testing.T) {
	seed2 := WithLastEventID("2")
	blocks := WithIDOnlyBlocks()
	cases := []struct {
		name   string
		in     string
		opts   []Option
		want   []result
		lastID string
	}{
		// Starting from a known id (a reconnection).
		{name: "seed only", in: "", opts: []Option{seed2}, lastID: "2"},
		{name: "event without id carries the seed", in: "data: e3\n\n", opts: []Option{seed2}, want: []result{{ev: msg("e3", "2")}}, lastID: "2"},
		{name: "id replaces the seed", in: "data: a\n\nid: 3\ndata: b\n\n", opts: []Option{seed2}, want: []result{{ev: msg("a", "2")}, {ev: msg("b", "3")}}, lastID: "3"},
		{name: "empty id clears the seed", in: "id:\ndata: a\n\n", opts: []Option{seed2}, want: []result{{ev: msg("a", "")}}},
		{name: "id with nul keeps the seed", in: "id: 9\x00\ndata: a\n\n", opts: []Option{seed2}, want: []result{{ev: msg("a", "2")}}, lastID: "2"},
		{name: "unterminated id keeps the seed", in: "id: 9\ndata: a\n", opts: []Option{seed2}, lastID: "2"},
		{name: "empty seed is the default", in: "data: a\n\n", opts: []Option{WithLastEventID("")}, want: []result{{ev: msg("a", "")}}},
		{name: "seed not utf8 is decoded", in: "data: a\n\n", opts: []Option{WithLastEventID("x\xff")}, want: []result{{ev: msg("a", "x\uFFFD")}}, lastID: "x\uFFFD"},

		// Id-only blocks reported.
		{
			name: "id-only block between events", in: "id: 1\ndata: a\n\nid: 2\n\ndata: b\n\n", opts: []Option{blocks},
			want: []result{{ev: msg("a", "1")}, {ev: idOnly("2")}, {ev: msg("b", "2")}}, lastID: "2",
		},
		{name: "id-only block alone", in: "id: 7\n\n", opts: []Option{blocks}, want: []result{{ev: idOnly("7")}}, lastID: "7"},
		{name: "id-only block repeating the id is not reported", in: "id: 1\ndata: a\n\nid: 1\n\n", opts: []Option{blocks}, want: []result{{ev: msg("a", "1")}}, lastID: "1"},
		{name: "id-only block repeating the seed is not reported", in: "id: 2\n\n", opts: []Option{seed2, blocks}, lastID: "2"},
		{name: "empty id-only block after the seed is reported", in: "id\n\n", opts: []Option{seed2, blocks}, want: []result{{ev: idOnly("")}}},
		{name: "event and id without data", in: "event: x\nid: 3\n\n", opts: []Option{blocks}, want: []result{{ev: idOnly("3")}}, lastID: "3"},
		{name: "comment block is not reported", in: ": ping\n\nretry: 5\n\n", opts: []Option{blocks}},
		{name: "unterminated id-only block is not reported", in: "id: 1\n\nid: 2\n", opts: []Option{blocks}, want: []result{{ev: idOnly("1")}}, lastID: "1"},
		{
			name: "dropped event moves the id", in: "data: 123456789\nid: 4\n\ndata: ok\n\n", opts: []Option{blocks, WithMaxEventBytes(8)},
			want: []result{{err: ErrEventTooLarge}, {ev: idOnly("4")}, {ev: msg("ok", "4")}}, lastID: "4",
		},
		{name: "without the option id-only blocks stay silent", in: "id: 7\n\n", lastID: "7"},
	}
	for _, tc := range cases {
		for _, r := range readers {
			t.Run(tc.name+"/"+r.name, func(t *testing.T) {
				p := NewParser(r.new(tc.in), tc.opts...)
				if got := collectAll(t, p, 100); !slices.Equal(got, tc.want) {
					t.Errorf("results\n got: %v\nwant: %v", got, tc.want)
				}
				if id := p.LastEventID(); id != tc.lastID {
					t.Errorf("LastEventID = %q, want %q", id, tc.lastID)
				}
			})
		}
	}
}

// errAfterReader returns s, then err forever.
type errAfterReader struct {
	s   string
	err error
}

func (r *errAfterReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, r.err
	}
	n := copy(p, r.s)
	r.s = r.s[n:]
	return n, nil
}

// funcReader adapts a function to io.Reader.
type funcReader func(p []byte) (int, error)

func (f funcReader) Read(p []byte) (int, error) { return f(p) }

func TestParserReaderErrors(t *testing.T) {
	errBoom := errors.New("boom")
	cases := []struct {
		name    string
		r       io.Reader
		want    []Event
		wantErr error
	}{
		{
			name: "reader error after events is returned and sticky",
			r:    &errAfterReader{s: "data: a\n\ndata: b\n", err: errBoom},
			want: []Event{msg("a", "")}, wantErr: errBoom,
		},
		{
			name: "reader error with the last bytes",
			r:    iotest.DataErrReader(&errAfterReader{s: "data: a\n\n", err: errBoom}),
			want: []Event{msg("a", "")}, wantErr: errBoom,
		},
		{
			name:    "timeout error after a full read",
			r:       iotest.TimeoutReader(strings.NewReader("data: a\n\ndata: b\n\ndata: c\n")),
			want:    []Event{msg("a", ""), msg("b", "")},
			wantErr: iotest.ErrTimeout,
		},
		{
			name:    "reader that never makes progress",
			r:       funcReader(func([]byte) (int, error) { return 0, nil }),
			wantErr: io.ErrNoProgress,
		},
		{
			name:    "reader that returns a negative count",
			r:       funcReader(func([]byte) (int, error) { return -1, nil }),
			wantErr: errBadReadCount,
		},
		{
			name:    "reader that returns too many bytes",
			r:       funcReader(func(p []byte) (int, error) { return len(p) + 1, nil }),
			wantErr: errBadReadCount,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParser(tc.r)
			got, err := collect(p)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Next error = %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("events\n got: %q\nwant: %q", got, tc.want)
			}
			if _, err := p.Next(); !errors.Is(err, tc.wantErr) {
				t.Errorf("second Next error = %v, want %v again", err, tc.wantErr)
			}
		})
	}
}

// TestParserManyCRLines checks a buffer full of CR-only lines, the case that
// would be quadratic if every line searched the whole buffer for an LF.
func TestParserManyCRLines(t *testing.T) {
	in := strings.Repeat("data: x\r", 20000) + "\r"
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			got, err := collect(NewParser(r.new(in)))
			if !errors.Is(err, io.EOF) {
				t.Fatalf("error = %v", err)
			}
			want := strings.TrimSuffix(strings.Repeat("x\n", 20000), "\n")
			if len(got) != 1 || got[0].Data != want {
				t.Fatalf("got %d events, want one with %d bytes of data", len(got), len(want))
			}
		})
	}
}

// repeatReader returns s over and over.
type repeatReader struct {
	s   string
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.s[r.off:])
		n += c
		r.off = (r.off + c) % len(r.s)
	}
	return n, nil
}

func TestParserAllocs(t *testing.T) {
	cases := []struct {
		name  string
		block string
		want  float64
	}{
		{"data only", "data: {\"n\":1}\n\n", 1},
		{"same type and id", "event: update\nid: v1:0-1\ndata: {\"n\":1}\n: c\n\n", 1},
		{"id-only blocks between events", "id: 1\n\nretry: 5\n\nid: 1\ndata: x\ndata: y\n\n", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParser(&repeatReader{s: tc.block})
			for range 10 { // warm the buffers up
				if _, err := p.Next(); err != nil {
					t.Fatal(err)
				}
			}
			n := testing.AllocsPerRun(1000, func() {
				if _, err := p.Next(); err != nil {
					t.Fatal(err)
				}
			})
			if n != tc.want {
				t.Errorf("%v allocations per Next, want %v", n, tc.want)
			}
		})
	}
}
