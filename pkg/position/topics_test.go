package position

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestParseTopics(t *testing.T) {
	tps, err := ParseTopics("v1:orders~0-5812.1-5790,pay.ments_2~,x-y~3-0")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tps); got != "[{orders v1:0-5812.1-5790 } {pay.ments_2 v1: } {x-y v1:3-0 }]" {
		t.Errorf("ParseTopics = %s", got)
	}
	for id, want := range map[string]error{
		"v3:a~0-1":                             ErrVersion,
		"v2:a~0-1":                             ErrTopics, // the compact form has a compact part
		"v1:a~:AQID":                           ErrTopics, // and only it has one
		"v2:a~:!!":                             ErrSyntax,
		"v1:~0-1":                              ErrTopics,
		"v1:a~0-1,":                            ErrTopics,
		"v1:c~0-1,b~0-1,a~0-1":                 ErrTopics,
		"v1:b~0-1,a~0-1,b~1-1":                 ErrTopics,
		"v1:a~0-1,a~0-2":                       ErrTopics,
		"v1:a b~0-1":                           ErrTopics,
		"v1:a~1-0.0-0":                         ErrOrder,
		"v1:a~0-01":                            ErrSyntax,
		"v1:a~0-1,b~0-1~":                      ErrSyntax,
		"v1:" + strings.Repeat("a", 250) + "~": ErrTopics,
		"v1:a~" + strings.Repeat("0-1.", MaxLen/4): ErrTooLong,
	} {
		if _, err := ParseTopics(id); !errors.Is(err, want) {
			t.Errorf("ParseTopics(%.40q) = %v, want %v", id, err, want)
		}
	}
	// The error's offset points into the whole id.
	var se *SyntaxError
	if _, err := ParseTopics("v1:a~0-1,bb~0-x"); !errors.As(err, &se) || se.Offset != 14 {
		t.Errorf("offset of the error in v1:a~0-1,bb~0-x: %v, want 14", err)
	}
}

func TestAppendTopicsRoundTrip(t *testing.T) {
	names := []string{"a", "b", "c"}
	ids := [][]byte{[]byte("v1:0-1.2-3"), nil, []byte("v1:")}
	id := string(AppendTopics(nil, names, ids, -1))
	if id != "v1:a~0-1.2-3,c~" || !IsTopics(id) || IsTopics("v1:0-1") {
		t.Fatalf("AppendTopics = %q", id)
	}
	if id := string(AppendTopics(nil, names, ids, 2)); id != "v1:c~,a~0-1.2-3" {
		t.Fatalf("AppendTopics, c first = %q", id)
	}
	if tps, err := ParseTopics("v1:c~,a~0-1,b~"); err != nil || tps[0].Topic != "c" || tps[2].Topic != "b" {
		t.Fatalf("ParseTopics, c first = %v, %v", tps, err)
	}
	tps, err := ParseTopics(id)
	if err != nil || len(tps) != 2 || tps[0].Pos.String() != "v1:0-1.2-3" || tps[1].Topic != "c" || tps[1].Pos.Len() != 0 {
		t.Errorf("ParseTopics(%q) = %v, %v", id, tps, err)
	}
}

// TestTopicsCompact: a several-topic id with compact parts (the "v2:" form) round-trips: each compact part is
// the one-topic compact id it was made of, the others their v1 positions.
func TestTopicsCompact(t *testing.T) {
	compact, ok := AppendCompact(nil, Ref{Partition: 0, Offset: 4321}, MustParse("v1:0-100.1-200"), MustParse("v1:0-103.1-200"), MaxCompactLen)
	if !ok {
		t.Fatal("no compact id")
	}
	names := []string{"a", "b", "c"}
	ids := [][]byte{[]byte("v1:0-7"), compact, nil}
	id := string(AppendTopics(nil, names, ids, 1))
	if want := "v2:b~:" + string(compact[len(PrefixCompact):]) + ",a~0-7"; id != want || !IsTopics(id) || IsTopics(string(compact)) {
		t.Fatalf("AppendTopics = %q, want %q", id, want)
	}
	tps, err := ParseTopics(id)
	if err != nil || len(tps) != 2 || tps[0].Topic != "b" || tps[0].Compact != string(compact) || tps[0].Pos.Len() != 0 ||
		tps[1].Compact != "" || tps[1].Pos.String() != "v1:0-7" {
		t.Fatalf("ParseTopics(%q) = %+v, %v", id, tps, err)
	}
	// Without compact parts the id stays v1.
	if id := string(AppendTopics(nil, names, [][]byte{[]byte("v1:0-7"), nil, []byte("v1:")}, -1)); id != "v1:a~0-7,c~" {
		t.Fatalf("AppendTopics of v1 parts = %q", id)
	}
}

// FuzzParseTopics: any several-topic id is read without panicking, and one that is accepted is written back
// byte for byte by AppendTopics (the canonical form is the only accepted form, compact parts included).
func FuzzParseTopics(f *testing.F) {
	compact, _ := AppendCompact(nil, Ref{Partition: 1, Offset: 9}, MustParse("v1:0-1"), MustParse("v1:0-5"), MaxCompactLen)
	for _, s := range []string{"v1:a~0-1,b~", "v1:b~0-1,a~2-3,c~", "v2:a~:" + string(compact[3:]) + ",b~0-1", "v2:a~0-1", "v1:a~:x", "v2:~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		tps, err := ParseTopics(id)
		if err != nil {
			return
		}
		if back := string(AppendTopicPositions(nil, tps)); back != id {
			t.Fatalf("ParseTopics(%q) then AppendTopicPositions = %q", id, back)
		}
	})
}

// TestTopicsLenBound: the bound is the length of the longest id such topics can have, and an id over
// MaxLen, which topics of enough partitions make, is one ParseTopics refuses.
func TestTopicsLenBound(t *testing.T) {
	for _, tc := range []struct {
		names []string
		parts []int
	}{{[]string{"a", "orders"}, []int{1, 3}}, {[]string{"payments", "x.y_z-1"}, []int{600, 600}}} {
		ids := make([][]byte, len(tc.names))
		for i, n := range tc.parts {
			var v Vector
			for p := range n {
				v.Set(int32(1_000_000_000+p), math.MaxInt64)
			}
			ids[i], _ = v.AppendText(nil)
		}
		id := AppendTopics(nil, tc.names, ids, -1)
		if bound := TopicsLenBound(tc.names, tc.parts); len(id) > bound || bound > len(id)+len(tc.names)+1 {
			t.Errorf("%v of %v partitions: longest id %d bytes, bound %d", tc.names, tc.parts, len(id), bound)
		}
		if _, err := ParseTopics(string(id)); (err == nil) != (len(id) <= MaxLen) {
			t.Errorf("an id of %d bytes: %v", len(id), err)
		}
	}
}
