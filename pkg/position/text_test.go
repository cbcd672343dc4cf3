package position

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// validIDs are canonical ids with the entries they decode to.
var validIDs = []struct {
	name string
	id   string
	want []Entry
}{
	{"empty vector", "v1:", nil},
	{"single zero entry", "v1:0-0", []Entry{{0, 0}}},
	{"single entry", "v1:7-42", []Entry{{7, 42}}},
	{"design example", "v1:0-5812.1-5790.2-5833", []Entry{{0, 5812}, {1, 5790}, {2, 5833}}},
	{"sparse partitions", "v1:3-1.17-0.1000-99", []Entry{{3, 1}, {17, 0}, {1000, 99}}},
	{"ten ascending", "v1:1-0.2-0.3-0.4-0.5-0.6-0.7-0.8-0.9-0.10-0", []Entry{
		{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}, {8, 0}, {9, 0}, {10, 0},
	}},
	{"max partition", "v1:2147483647-0", []Entry{{math.MaxInt32, 0}}},
	{"max offset", "v1:0-9223372036854775807", []Entry{{0, math.MaxInt64}}},
	{"max both", "v1:5-1.2147483647-9223372036854775807", []Entry{{5, 1}, {math.MaxInt32, math.MaxInt64}}},
	{"round numbers", "v1:10-100.20-1000000", []Entry{{10, 100}, {20, 1000000}}},
}

// invalidIDs are rejected ids with the sentinel and byte offset Parse reports.
var invalidIDs = []struct {
	name string
	id   string
	err  error
	off  int
}{
	{"empty string", "", ErrEmpty, 0},
	{"other version", "v2:0-1", ErrVersion, 0},
	{"no version", "0-1", ErrVersion, 0},
	{"truncated version", "v1", ErrVersion, 0},
	{"upper-case version", "V1:0-1", ErrVersion, 0},
	{"space before version", " v1:0-1", ErrVersion, 0},
	{"version without colon", "v10-1", ErrVersion, 0},
	{"empty entry", "v1:0-1..1-2", ErrSyntax, 7},
	{"trailing dot", "v1:0-1.", ErrSyntax, 7},
	{"leading dot", "v1:.0-1", ErrSyntax, 3},
	{"only a dot", "v1:.", ErrSyntax, 3},
	{"missing dash at end", "v1:0", ErrSyntax, 4},
	{"missing dash before dot", "v1:0.1-2", ErrSyntax, 4},
	{"missing offset at end", "v1:0-", ErrSyntax, 5},
	{"missing offset before dot", "v1:0-.1-2", ErrSyntax, 5},
	{"plus partition", "v1:+1-5", ErrSyntax, 3},
	{"plus offset", "v1:1-+5", ErrSyntax, 5},
	{"leading zero partition", "v1:01-5", ErrSyntax, 3},
	{"leading zero offset", "v1:1-05", ErrSyntax, 5},
	{"double zero", "v1:00-0", ErrSyntax, 3},
	{"leading zero second entry", "v1:0-1.02-3", ErrSyntax, 7},
	{"space after version", "v1: 0-1", ErrSyntax, 3},
	{"trailing space", "v1:0-1 ", ErrSyntax, 6},
	{"space around dash", "v1:0 -1", ErrSyntax, 4},
	{"tab in offset", "v1:0-\t1", ErrSyntax, 5},
	{"trailing newline", "v1:0-1\n", ErrSyntax, 6},
	{"trailing CRLF", "v1:0-1\r\n", ErrSyntax, 6},
	{"stray letter", "v1:0-1x", ErrSyntax, 6},
	{"hex partition", "v1:0x1-1", ErrSyntax, 4},
	{"exponent", "v1:1e3-1", ErrSyntax, 4},
	{"decimal point in offset", "v1:0-1.5", ErrSyntax, 8},
	{"second dash", "v1:0-1-2", ErrSyntax, 6},
	{"comma separator", "v1:0-1,1-2", ErrSyntax, 6},
	{"colon separator", "v1:0:1", ErrSyntax, 4},
	{"arabic-indic digit", "v1:0-\u0663", ErrSyntax, 5},
	{"fullwidth digit", "v1:\uff11-1", ErrSyntax, 3},
	{"superscript digit", "v1:0-\u00b9", ErrSyntax, 5},
	{"NUL byte", "v1:0-1\x00", ErrSyntax, 6},
	{"invalid UTF-8", "v1:0-1\xff", ErrSyntax, 6},
	{"negative offset", "v1:0--5", ErrNegative, 5},
	{"negative partition", "v1:-1-5", ErrNegative, 3},
	{"lone dash", "v1:-", ErrNegative, 3},
	{"negative partition second entry", "v1:0-1.-2-3", ErrNegative, 7},
	{"partition MaxInt32+1", "v1:2147483648-0", ErrRange, 3},
	{"partition MaxUint32", "v1:4294967295-0", ErrRange, 3},
	{"partition huge", "v1:99999999999999999999999-0", ErrRange, 3},
	{"offset MaxInt64+1", "v1:0-9223372036854775808", ErrRange, 5},
	{"offset MaxUint64+1", "v1:0-18446744073709551616", ErrRange, 5},
	{"offset huge second entry", "v1:0-1.1-99999999999999999999999", ErrRange, 9},
	{"duplicate partition", "v1:1-0.1-5", ErrDuplicate, 7},
	{"duplicate identical entry", "v1:0-1.0-1", ErrDuplicate, 7},
	{"descending", "v1:2-0.1-0", ErrOrder, 7},
	{"descending and duplicate", "v1:1-0.2-0.1-0", ErrOrder, 11},
	{"order reported before later syntax", "v1:2-0.1-x", ErrOrder, 7},
	{"too long digits", "v1:" + strings.Repeat("0", MaxLen), ErrTooLong, MaxLen},
	{"too long garbage", strings.Repeat("\xff", MaxLen+1), ErrTooLong, MaxLen},
	{"too long otherwise valid", maxLenID() + ".", ErrTooLong, MaxLen},
}

func TestParseValid(t *testing.T) {
	for _, tc := range validIDs {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Parse(tc.id)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.id, err)
			}
			if got := entries(v); !slices.Equal(got, tc.want) {
				t.Fatalf("Parse(%q) entries = %v, want %v", tc.id, got, tc.want)
			}
			if got := v.String(); got != tc.id {
				t.Errorf("String() = %q, want %q", got, tc.id)
			}
			if got := len(tc.id); got != v.textLen() {
				t.Errorf("textLen() = %d, want %d", v.textLen(), got)
			}
			b, err := v.MarshalText()
			if err != nil || string(b) != tc.id {
				t.Errorf("MarshalText() = %q, %v, want %q", b, err, tc.id)
			}
			b, err = v.AppendText([]byte("id: "))
			if err != nil || string(b) != "id: "+tc.id {
				t.Errorf("AppendText() = %q, %v, want %q", b, err, "id: "+tc.id)
			}
			var u Vector
			if err := u.UnmarshalText([]byte(tc.id)); err != nil || !u.Equal(v) {
				t.Errorf("UnmarshalText(%q) = %v, %v, want %v", tc.id, u, err, v)
			}
			w, err := FromEntries(tc.want)
			if err != nil || !w.Equal(v) {
				t.Errorf("FromEntries(%v) = %v, %v, want %v", tc.want, w, err, v)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range invalidIDs {
		t.Run(tc.name, func(t *testing.T) {
			v, err := Parse(tc.id)
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want error", tc.id, v)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("Parse(%q) = %v, want errors.Is %v", tc.id, err, tc.err)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error %T is not a *SyntaxError", tc.id, err)
			}
			if se.Offset != tc.off {
				t.Errorf("Parse(%q) Offset = %d, want %d (%v)", tc.id, se.Offset, tc.off, err)
			}
			if v.Len() != 0 {
				t.Errorf("Parse(%q) returned %d entries with an error", tc.id, v.Len())
			}
			if len(err.Error()) > 160 {
				t.Errorf("error message is %d bytes long: %s", len(err.Error()), err)
			}
			// UnmarshalText follows the same rules and leaves v alone.
			u := MustParse("v1:4-4")
			uerr := u.UnmarshalText([]byte(tc.id))
			if uerr == nil || uerr.Error() != err.Error() {
				t.Errorf("UnmarshalText error = %v, want %v", uerr, err)
			}
			if u.String() != "v1:4-4" {
				t.Errorf("UnmarshalText changed the vector to %v on error", u)
			}
		})
	}
}

func TestParseMaxLen(t *testing.T) {
	id := maxLenID()
	if len(id) != MaxLen {
		t.Fatalf("maxLenID() is %d bytes, want %d", len(id), MaxLen)
	}
	v, err := Parse(id)
	if err != nil {
		t.Fatalf("Parse of a valid %d-byte id: %v", MaxLen, err)
	}
	if v.String() != id {
		t.Fatal("String() of the longest id does not round-trip")
	}
	// Exactly MaxLen bytes of garbage is a syntax error, not ErrTooLong.
	_, err = Parse(Prefix + strings.Repeat("x", MaxLen-len(Prefix)))
	if !errors.Is(err, ErrSyntax) {
		t.Fatalf("Parse of %d bytes of garbage = %v, want ErrSyntax", MaxLen, err)
	}
}

func TestSyntaxErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want string
	}{
		{"range", "v1:2147483648-0", `position: malformed id at byte 3 near "2147483648-0": number out of range`},
		{"unexpected end", "v1:0-1.", `position: malformed id at byte 7 (unexpected end): invalid syntax`},
		{"version", "v2:0-1", `position: malformed id at byte 0 near "v2:0-1": unknown version prefix`},
		{"empty", "", `position: malformed id at byte 0: empty id`},
		{"too long", strings.Repeat("v", MaxLen+1), `position: malformed id at byte 32768: id too long`},
		{"escaped", "v1:0-1\xff\n\"", `position: malformed id at byte 6 near "\xff\n\"": invalid syntax`},
		{
			"excerpt cut at 32 bytes", "v1:0-1<script>" + strings.Repeat("A", 100),
			`position: malformed id at byte 6 near "<script>AAAAAAAAAAAAAAAAAAAAAAAA"...: invalid syntax`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.id)
			if err == nil || err.Error() != tc.want {
				t.Errorf("Parse(%q) error\n got: %v\nwant: %s", tc.id, err, tc.want)
			}
		})
	}
}

func TestSyntaxErrorLiteral(t *testing.T) {
	// A SyntaxError built by hand, without excerpt, still reads well.
	err := error(&SyntaxError{Offset: 4, Err: ErrOrder})
	if got, want := err.Error(), "position: malformed id at byte 4: partitions not ascending"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrOrder) {
		t.Error("errors.Is(err, ErrOrder) = false")
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		r := recover()
		err, ok := r.(error)
		if !ok || !errors.Is(err, ErrVersion) {
			t.Errorf("MustParse panicked with %v, want an ErrVersion error", r)
		}
	}()
	MustParse("v0:")
}

// entries returns the entries of v in order, nil for the empty vector.
func entries(v Vector) []Entry {
	var es []Entry
	for i := range v.Len() {
		es = append(es, v.At(i))
	}
	return es
}

// maxLenID returns a valid id of exactly MaxLen bytes.
func maxLenID() string {
	// Entries "p-0" until less than one more entry fits, then widen the
	// offsets from the end (each can grow from 1 to 19 digits) to fill up.
	var es []Entry
	n := len(Prefix) - 1 // minus the "." the first entry does not need
	for p := int32(0); ; p++ {
		w := decLen(uint64(p)) + 3 // ".p-0"
		if n+w > MaxLen {
			break
		}
		es = append(es, Entry{Partition: p})
		n += w
	}
	gap := MaxLen - n
	for i := len(es) - 1; gap > 0; i-- {
		d := min(gap, 18)
		es[i].Offset = 1
		for range d {
			es[i].Offset *= 10
		}
		gap -= d
	}
	v, err := FromEntries(es)
	if err != nil {
		panic(err)
	}
	return v.String()
}
