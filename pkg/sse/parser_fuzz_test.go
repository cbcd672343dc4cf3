package sse

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// refParse is a direct transcription of WHATWG HTML 9.2.5 and 9.2.6 working
// on the whole stream at once: decode it (dropping one leading BOM), cut it
// into terminated lines, process each. It has no limits. It checks Parser.
func refParse(in []byte) (evs []Event, lastID string, retry time.Duration, hasRetry bool) {
	return refParseFrom(in, "", false)
}

// refParseFrom is refParse with the last event ID buffer and string starting
// at seed (WithLastEventID) and, with idBlocks, an id-only Event for every
// dispatch that fires nothing but changes the last event ID string
// (WithIDOnlyBlocks).
func refParseFrom(in []byte, seed string, idBlocks bool) (evs []Event, lastID string, retry time.Duration, hasRetry bool) {
	in = bytes.TrimPrefix(in, []byte("\xef\xbb\xbf"))
	s := refDecode(in)
	var data, typ, idBuf strings.Builder
	idBuf.WriteString(seed)
	lastID = seed
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			// End of stream: pending data is discarded.
			return evs, lastID, retry, hasRetry
		}
		line := s[:i]
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]

		if line == "" {
			moved := lastID != idBuf.String()
			lastID = idBuf.String()
			if data.Len() == 0 {
				if moved && idBlocks {
					evs = append(evs, Event{ID: lastID})
				}
				data.Reset()
				typ.Reset()
				continue
			}
			d := strings.TrimSuffix(data.String(), "\n")
			ev := Event{Type: "message", Data: d, ID: lastID}
			if typ.Len() > 0 {
				ev.Type = typ.String()
			}
			evs = append(evs, ev)
			data.Reset()
			typ.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		name, value := line, ""
		if j := strings.Index(line, ":"); j >= 0 {
			name, value = line[:j], strings.TrimPrefix(line[j+1:], " ")
		}
		switch name {
		case "event":
			typ.Reset()
			typ.WriteString(value)
		case "data":
			data.WriteString(value)
			data.WriteString("\n")
		case "id":
			if !strings.Contains(value, "\x00") {
				idBuf.Reset()
				idBuf.WriteString(value)
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				var ms int64
				ok := true
				for _, c := range value {
					ms = ms*10 + int64(c-'0')
					if ms > maxRetryMillis {
						ok = false
						break
					}
				}
				if ok {
					retry, hasRetry = time.Duration(ms)*time.Millisecond, true
				}
			}
		}
	}
}

// fuzzSeeds are stream fragments that reach every branch of the parser.
var fuzzSeeds = []string{
	"",
	"data: a\n\n",
	"\xef\xbb\xbfdata: a\r\n\r\n",
	"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\n",
	"id: 1\ndata: a\rdata: b\r\rid: 2\n\nevent: e\ndata\n\n",
	"retry: 10\nretry: x\n: comment\nid: a\x00b\ndata: \xe2\x82\xff\n\n",
	"data: " + strings.Repeat("long", 20) + "\r\nid: 3\ndata: x\n\ndata: y\r",
	"data:\ndata:  \xf0\x9f\x98\x80\n\nevent\nid\n\n",
}

func FuzzParserSplits(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), []byte{1, 2, 3, byte(i)}, i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, in, cuts []byte, small bool) {
		var opts []Option
		if small {
			opts = []Option{WithMaxLineBytes(16), WithMaxEventBytes(32)}
		}
		limit := len(in) + 10
		whole := NewParser(bytes.NewReader(in), opts...)
		wantRes := collectAll(t, whole, limit)

		// Cut the input into reads whose sizes come from cuts (0 is an
		// empty read), cycling through them.
		var chunks []string
		for rest, i := string(in), 0; len(rest) > 0; i++ {
			n := 1
			if len(cuts) > 0 {
				n = int(cuts[i%len(cuts)]) % 24
			}
			n = min(n, len(rest))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
			if i > 100*len(in) {
				t.Skip("cuts make no progress")
			}
		}
		split := NewParser(&chunkReader{chunks: chunks}, opts...)
		gotRes := collectAll(t, split, limit)

		if !slices.Equal(gotRes, wantRes) {
			t.Fatalf("split input %q\n got: %v\nwant: %v", chunks, gotRes, wantRes)
		}
		if whole.LastEventID() != split.LastEventID() {
			t.Fatalf("LastEventID split %q, whole %q", split.LastEventID(), whole.LastEventID())
		}
		wd, wok := whole.Retry()
		gd, gok := split.Retry()
		if wd != gd || wok != gok {
			t.Fatalf("Retry split %v %v, whole %v %v", gd, gok, wd, wok)
		}
		for _, r := range wantRes {
			if !utf8.ValidString(r.ev.Type) || !utf8.ValidString(r.ev.Data) || !utf8.ValidString(r.ev.ID) {
				t.Fatalf("event with invalid UTF-8: %q", r.ev)
			}
		}

		if small {
			return
		}
		// Without limits the parser must agree with the transcription of
		// the standard.
		var evs []Event
		for _, r := range wantRes {
			if r.err != nil {
				t.Fatalf("unexpected error %v", r.err)
			}
			evs = append(evs, r.ev)
		}
		refEvs, refID, refRetry, refHas := refParse(in)
		if !slices.Equal(evs, refEvs) {
			t.Fatalf("input %q\n got: %q\nwant: %q (reference)", in, evs, refEvs)
		}
		if whole.LastEventID() != refID || wd != refRetry || wok != refHas {
			t.Fatalf("state LastEventID %q Retry %v %v, reference %q %v %v",
				whole.LastEventID(), wd, wok, refID, refRetry, refHas)
		}

		// A parser that starts from a known id and reports id-only blocks
		// must agree with the transcription started from the same id.
		seed := ""
		if len(cuts) > 0 && cuts[0]%2 == 1 {
			seed = "seed" + strconv.Itoa(int(cuts[0]))
		}
		seeded := NewParser(bytes.NewReader(in), WithLastEventID(seed), WithIDOnlyBlocks())
		var seededEvs []Event
		for _, r := range collectAll(t, seeded, limit) {
			seededEvs = append(seededEvs, r.ev)
		}
		refEvs, refID, _, _ = refParseFrom(in, seed, true)
		if !slices.Equal(seededEvs, refEvs) || seeded.LastEventID() != refID {
			t.Fatalf("input %q from id %q\n got: %q (last id %q)\nwant: %q (last id %q, reference)",
				in, seed, seededEvs, seeded.LastEventID(), refEvs, refID)
		}
	})
}
