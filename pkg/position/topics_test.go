package position

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseTopics(t *testing.T) {
	tps, err := ParseTopics("v1:orders~0-5812.1-5790,pay.ments_2~,x-y~3-0")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(tps); got != "[{orders v1:0-5812.1-5790} {pay.ments_2 v1:} {x-y v1:3-0}]" {
		t.Errorf("ParseTopics = %s", got)
	}
	for id, want := range map[string]error{
		"v2:a~0-1":                             ErrVersion,
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
