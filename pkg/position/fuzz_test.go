package position

import (
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sentinels are the errors Parse may wrap.
var sentinels = []error{
	ErrEmpty, ErrVersion, ErrSyntax, ErrNegative, ErrRange, ErrDuplicate, ErrOrder, ErrTooLong,
}

func FuzzParse(f *testing.F) {
	for _, tc := range validIDs {
		f.Add(tc.id)
	}
	for _, tc := range invalidIDs {
		if len(tc.id) <= 64 { // the long ones only slow the fuzzer down
			f.Add(tc.id)
		}
	}
	f.Fuzz(func(t *testing.T, id string) {
		v, err := Parse(id)
		ref, refOK := refParse(id)
		if err != nil {
			checkParseError(t, id, err)
			if refOK {
				t.Fatalf("Parse(%q) = %v, but the reference parser accepts it as %v", id, err, ref)
			}
			return
		}
		if !refOK {
			t.Fatalf("Parse(%q) = %v, but the reference parser rejects it", id, v)
		}
		if got := entries(v); !slices.Equal(got, ref) {
			t.Fatalf("Parse(%q) = %v, reference parser says %v", id, got, ref)
		}
		checkInvariants(t, v)
		// The canonical form is the only accepted form.
		if s := v.String(); s != id {
			t.Fatalf("Parse(%q) accepted a non-canonical id; String() = %q", id, s)
		}
		w, err := Parse(v.String())
		if err != nil || !w.Equal(v) {
			t.Fatalf("re-Parse(%q) = %v, %v, want %v", v.String(), w, err, v)
		}
		var u Vector
		if err := u.UnmarshalText([]byte(id)); err != nil || !u.Equal(v) {
			t.Fatalf("UnmarshalText(%q) = %v, %v, want %v", id, u, err, v)
		}
	})
}

// checkParseError checks that err is a well-formed rejection of id.
func checkParseError(t *testing.T, id string, err error) {
	t.Helper()
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("Parse(%q) error %T is not a *SyntaxError: %v", id, err, err)
	}
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("Parse(%q) error %v wraps %d sentinels, want 1", id, err, n)
	}
	if errors.Is(err, ErrTooLong) {
		if len(id) <= MaxLen || se.Offset != MaxLen {
			t.Fatalf("Parse of %d bytes: %v", len(id), err)
		}
	} else if se.Offset < 0 || se.Offset > len(id) {
		t.Fatalf("Parse(%q) error offset %d is outside the id", id, se.Offset)
	}
	if msg := err.Error(); len(msg) > 200 {
		t.Fatalf("Parse(%q) error message is %d bytes long", id, len(msg))
	}
	var u Vector
	if uerr := u.UnmarshalText([]byte(id)); uerr == nil || uerr.Error() != err.Error() {
		t.Fatalf("UnmarshalText(%q) = %v, Parse says %v", id, uerr, err)
	}
}

// checkInvariants fails unless v is sorted, unique and non-negative.
func checkInvariants(t *testing.T, v Vector) {
	t.Helper()
	for i := range v.Len() {
		e := v.At(i)
		if e.Partition < 0 || e.Offset < 0 {
			t.Fatalf("%v has a negative entry %v", entries(v), e)
		}
		if i > 0 && v.At(i-1).Partition >= e.Partition {
			t.Fatalf("%v is not strictly ascending at %d", entries(v), i)
		}
	}
}

// refParse is a slow, obviously correct parser built from strings and
// strconv, used as an oracle: it accepts exactly the canonical ids.
func refParse(id string) ([]Entry, bool) {
	if len(id) > MaxLen {
		return nil, false
	}
	rest, ok := strings.CutPrefix(id, Prefix)
	if !ok {
		return nil, false
	}
	if rest == "" {
		return nil, true
	}
	var es []Entry
	for _, s := range strings.Split(rest, ".") {
		ps, os, ok := strings.Cut(s, "-")
		if !ok || !refNumber(ps) || !refNumber(os) {
			return nil, false
		}
		p, err1 := strconv.ParseInt(ps, 10, 32)
		off, err2 := strconv.ParseInt(os, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		if len(es) > 0 && int32(p) <= es[len(es)-1].Partition {
			return nil, false
		}
		es = append(es, Entry{Partition: int32(p), Offset: off})
	}
	return es, true
}

// refNumber reports whether s is "0" or a digit string without leading zero.
func refNumber(s string) bool {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{}, false)
	f.Add([]byte{1, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0}, false)
	f.Add([]byte{
		0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}, false)
	f.Add([]byte("some bytes that become a handful of entries, some repeated"), true)
	f.Add([]byte("0123456789ab0123456789ab0123456789ab"), true)
	f.Fuzz(func(t *testing.T, data []byte, narrow bool) {
		// Every 12 bytes give one Set: 4 for the partition, 8 for the
		// offset, both masked non-negative. narrow folds partitions into
		// 0..7 so that replacing is exercised as much as inserting.
		// 2048 entries are plenty to overflow MaxLen; more only makes each
		// run slower.
		data = data[:min(len(data), 12*2048)]
		var v Vector
		model := map[int32]int64{}
		for ; len(data) >= 12; data = data[12:] {
			p := int32(binary.LittleEndian.Uint32(data) & math.MaxInt32)
			off := int64(binary.LittleEndian.Uint64(data[4:]) & math.MaxInt64)
			if narrow {
				p %= 8
			}
			v.Set(p, off)
			model[p] = off
		}
		checkInvariants(t, v)
		if v.Len() != len(model) {
			t.Fatalf("Len() = %d, want %d", v.Len(), len(model))
		}
		for p, off := range model {
			if got, ok := v.Offset(p); !ok || got != off {
				t.Fatalf("Offset(%d) = %d, %v, want %d", p, got, ok, off)
			}
		}

		s := v.String()
		if len(s) != v.textLen() {
			t.Fatalf("textLen() = %d, len(String()) = %d", v.textLen(), len(s))
		}
		w, err := Parse(s)
		switch {
		case len(s) > MaxLen:
			// Too many entries to travel back; see MaxLen.
			if !errors.Is(err, ErrTooLong) {
				t.Fatalf("Parse of a %d-byte id = %v, want ErrTooLong", len(s), err)
			}
		case err != nil || !w.Equal(v):
			t.Fatalf("Parse(%q) = %v, %v, want %v", s, w, err, v)
		}
		b, err := v.MarshalText()
		if err != nil || string(b) != s {
			t.Fatalf("MarshalText() = %q, %v, want %q", b, err, s)
		}
		var u Vector
		if err := u.UnmarshalText(b); len(s) <= MaxLen && (err != nil || !u.Equal(v)) {
			t.Fatalf("UnmarshalText(%q) = %v, %v", b, u, err)
		}

		es := make([]Entry, 0, len(model))
		for _, p := range slices.Sorted(maps.Keys(model)) {
			es = append(es, Entry{Partition: p, Offset: model[p]})
		}
		if fe, err := FromEntries(es); err != nil || !fe.Equal(v) {
			t.Fatalf("FromEntries(%v) = %v, %v, want %v", es, fe, err, v)
		}
		if got := v.Restrict(slices.Collect(maps.Keys(model))); !got.Equal(v) {
			t.Fatalf("Restrict(all) = %v, want %v", got, v)
		}

		// Compare against a clone moved ahead in one partition.
		c := v.Clone()
		if Compare(v, c) != Equal {
			t.Fatalf("Compare(v, v.Clone()) = %v", Compare(v, c))
		}
		if v.Len() > 0 {
			e := v.At(0)
			if e.Offset < math.MaxInt64 {
				c.Set(e.Partition, e.Offset+1)
				if got := Compare(v, c); got != Before {
					t.Fatalf("Compare after bumping %d = %v, want before", e.Partition, got)
				}
				if off, _ := v.Offset(e.Partition); off != e.Offset {
					t.Fatal("Set on a clone changed the original")
				}
			}
		}
	})
}
