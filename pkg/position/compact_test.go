package position

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestCompactRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		ref       Ref
		base, pos string
		want      string // "" means not encodable
	}{
		{"equal", Ref{Partition: 0, Offset: 0}, "v1:0-5.1-7", "v1:0-5.1-7", "v2:AAA"},
		{"steps", Ref{Partition: 0, Offset: 0}, "v1:0-5.1-7.9-1", "v1:0-6.1-10.9-5", ""},
		{"step in a new partition", Ref{Partition: 0, Offset: 0}, "v1:0-5", "v1:0-5.1-2", ""},
		{"one moved", Ref{Partition: 0, Offset: 300}, "v1:0-5.1-7", "v1:0-5.1-8", ""},
		{"new partition", Ref{Partition: 2, Offset: 1}, "v1:0-5", "v1:0-5.3-100", ""},
		{"empty base", Ref{Partition: 0, Offset: 9}, "v1:", "v1:0-1.7-2", ""},
		{"both empty", Ref{Partition: 0, Offset: 9}, "v1:", "v1:", ""},
		{"behind", Ref{Partition: 0, Offset: 1}, "v1:0-5", "v1:0-4", "-"},
		{"partition dropped", Ref{Partition: 0, Offset: 1}, "v1:0-5.1-1", "v1:0-5", "-"},
		{"large", Ref{Partition: math.MaxInt32, Offset: math.MaxInt64}, "v1:0-0", "v1:0-9223372036854775807.2147483647-9223372036854775807", ""},
		// The check takes the low 7 bits of the first varint: partition 0's fits one byte, as before.
		{"check", Ref{Partition: 0, Offset: 0, Check: 127}, "v1:0-5.1-7", "v1:0-5.1-7", "v2:fwA"},
		{"check and partition", Ref{Partition: 1, Offset: 0, Check: 1}, "v1:0-5", "v1:0-5", "v2:gQEA"},
		{"large with a check", Ref{Partition: math.MaxInt32, Offset: math.MaxInt64, Check: 99}, "v1:0-0", "v1:0-1", ""},
		{"gateway.md's example", Ref{Partition: 0, Offset: 140, Check: 42}, "v1:0-5812.1-5790.2-5833", "v1:0-5812.1-5792.2-5834", "v2:KowBBgE"},
		{"check out of range", Ref{Partition: 0, Offset: 0, Check: 128}, "v1:0-5", "v1:0-5", "-"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base, pos := MustParse(tc.base), MustParse(tc.pos)
			id, ok := AppendCompact(nil, tc.ref, base, pos, MaxCompactLen)
			if tc.want == "-" {
				if ok {
					t.Fatalf("AppendCompact = %q, want refusal", id)
				}
				return
			}
			if !ok {
				t.Fatal("AppendCompact refused")
			}
			if tc.want != "" && string(id) != tc.want {
				t.Fatalf("AppendCompact = %q, want %q", id, tc.want)
			}
			c, err := ParseCompact(string(id))
			if err != nil {
				t.Fatalf("ParseCompact(%q): %v", id, err)
			}
			if c.Ref() != tc.ref {
				t.Fatalf("ref %v, want %v", c.Ref(), tc.ref)
			}
			got, err := c.Apply(base)
			if err != nil || !got.Equal(pos) {
				t.Fatalf("Apply = %v, %v; want %v", got, err, pos)
			}
		})
	}
}

func TestCompactShortForFewChanges(t *testing.T) {
	var base, pos Vector
	for p := range int32(256) {
		base.Set(p, 1_000_000+int64(p))
		pos.Set(p, 1_000_000+int64(p))
	}
	for _, p := range []int32{3, 40, 41, 200, 255} {
		off, _ := pos.Offset(p)
		pos.Set(p, off+2)
	}
	id, ok := AppendCompact(nil, Ref{Partition: 0, Offset: 123456}, base, pos, 64)
	if !ok || len(id) > 32 {
		t.Fatalf("AppendCompact = %q, %v: want a short id", id, ok)
	}
	if _, ok := AppendCompact(nil, Ref{Partition: 0, Offset: 123456}, base, pos, 12); ok {
		t.Fatal("AppendCompact ignored maxLen")
	}
}

func TestParseCompactRejects(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want error
	}{
		{"empty", "", ErrEmpty},
		{"v1", "v1:0-1", ErrVersion},
		{"no ref", "v2:", ErrSyntax},
		{"half ref", "v2:AA", ErrSyntax}, // one byte: the offset is missing
		{"bad base64", "v2:AA*A", ErrSyntax},
		{"padding", "v2:AAA=", ErrSyntax},
		{"line break", "v2:\r0000", ErrSyntax}, // the base64 decoder would skip it
		{"newline", "v2:AA\nA", ErrSyntax},
		{"std alphabet", "v2:AAA+", ErrSyntax},
		{"non-zero trailing bits", "v2:AAB", ErrSyntax},
		{"overlong varint", "v2:gAAA", ErrSyntax}, // 0x80 0x00: zero spelled in two bytes
		{"entry without offset", "v2:AAAA", ErrSyntax},
		{"partition too large", "v2:gICAgIAIAA", ErrRange}, // partition 1<<31: past MaxInt32
		{"too long", "v2:" + strings.Repeat("A", MaxCompactLen), ErrTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCompact(tc.id)
			if !errors.Is(err, tc.want) {
				t.Fatalf("ParseCompact(%q) = %+v, %v; want %v", tc.id, c, err, tc.want)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *SyntaxError", err)
			}
		})
	}
}

func TestCompactApplyOverflow(t *testing.T) {
	id, ok := AppendCompact(nil, Ref{Partition: 0, Offset: 0}, MustParse("v1:0-0"), MustParse("v1:0-9223372036854775807"), MaxCompactLen)
	if !ok {
		t.Fatal("AppendCompact refused")
	}
	c, err := ParseCompact(string(id))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(MustParse("v1:0-5")); !errors.Is(err, ErrRange) {
		t.Fatalf("Apply against a later base = %v, want ErrRange", err)
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	c := Checkpoint{Topic: "orders", TopicID: [16]byte{1, 2, 3, 15: 9}, Writer: "gateway-0", Vector: MustParse("v1:0-5.3-9223372036854775807.2147483647-0")}
	b := AppendCheckpoint(nil, c)
	got, err := ParseCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Topic != c.Topic || got.TopicID != c.TopicID || got.Writer != c.Writer || !got.Vector.Equal(c.Vector) {
		t.Fatalf("ParseCheckpoint = %+v, want %+v", got, c)
	}
	if got.Sum != CheckpointSum(b) || got.Sum < 1 || got.Sum > 127 {
		t.Fatalf("Sum = %d, want CheckpointSum of the record (%d), from 1 to 127", got.Sum, CheckpointSum(b))
	}
	other := c
	other.Writer = "gateway-1"
	if CheckpointSum(AppendCheckpoint(nil, other)) == got.Sum {
		t.Fatal("another checkpoint has the same sum")
	}
	for i := range b {
		if _, err := ParseCheckpoint(b[:i]); !errors.Is(err, ErrCheckpoint) {
			t.Fatalf("truncated to %d bytes: %v, want ErrCheckpoint", i, err)
		}
	}
	if _, err := ParseCheckpoint(append(b, 0)); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("trailing byte: %v, want ErrCheckpoint", err)
	}
}

func FuzzParseCompact(f *testing.F) {
	f.Add("v2:AAA")
	f.Add("v2:AMCEPQ")
	f.Add("v2:gAAA")
	f.Add("v2:KowBBgE") // a check (42), as gateway.md spells it
	f.Add("v1:0-1")
	f.Fuzz(func(t *testing.T, id string) {
		c, err := ParseCompact(id)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("ParseCompact(%q) error %v is not a *SyntaxError", id, err)
			}
			return
		}
		// One accepted spelling: against a base holding (at offset 0) exactly the partitions the id steps in,
		// the entries with a second varint are absolute, and encoding the result gives the id back.
		var base Vector
		for k, p := range c.parts {
			if c.vals[k] < 0 {
				base.Set(p, 0)
			}
		}
		v, err := c.Apply(base)
		if err != nil {
			return // an offset out of range
		}
		checkInvariants(t, v)
		back, ok := AppendCompact(nil, c.Ref(), base, v, MaxCompactLen)
		if !ok || string(back) != id {
			t.Fatalf("ParseCompact(%q) accepted a non-canonical id; re-encoded %q, %v", id, back, ok)
		}
		es, err := c.AppendEntries(nil, base)
		if err != nil || len(es) != c.Len() {
			t.Fatalf("AppendEntries = %v, %v", es, err)
		}
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add(AppendCheckpoint(nil, Checkpoint{Topic: "t", Writer: "w", Vector: MustParse("v1:0-5.2-7")}))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrCheckpoint) {
				t.Fatalf("error %v does not wrap ErrCheckpoint", err)
			}
			return
		}
		checkInvariants(t, c.Vector)
		if back := AppendCheckpoint(nil, c); string(back) != string(b) {
			t.Fatalf("ParseCheckpoint accepted a non-canonical record %x; re-encoded %x", b, back)
		}
	})
}

func TestCompactAppendEntriesAgreesWithApply(t *testing.T) {
	base := MustParse("v1:0-5.2-9.4-1")
	pos := MustParse("v1:0-5.1-3.2-12.4-2.7-0")
	id, ok := AppendCompact(nil, Ref{Partition: 0, Offset: 1}, base, pos, MaxCompactLen)
	if !ok {
		t.Fatal("AppendCompact refused")
	}
	c, err := ParseCompact(string(id))
	if err != nil {
		t.Fatal(err)
	}
	es, err := c.AppendEntries(nil, base)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{1, 3}, {2, 12}, {4, 2}, {7, 0}}
	if !slices.Equal(es, want) {
		t.Fatalf("AppendEntries = %v, want %v", es, want)
	}
}

// TestCompactStepOnlyInBasePartitions: a step (1 to 3) names a move past the checkpoint, so against a
// checkpoint that lacks the partition the id is wrong, not some other position.
func TestCompactStepOnlyInBasePartitions(t *testing.T) {
	id, ok := AppendCompact(nil, Ref{Partition: 0, Offset: 0}, MustParse("v1:0-5"), MustParse("v1:0-6"), MaxCompactLen)
	if !ok || len(id) != len("v2:AAAB") {
		t.Fatalf("AppendCompact = %q, %v: want one byte for the entry", id, ok)
	}
	c, err := ParseCompact(string(id))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(MustParse("v1:1-5")); !errors.Is(err, ErrSyntax) {
		t.Fatalf("Apply against a checkpoint without the partition = %v, want ErrSyntax", err)
	}
}
