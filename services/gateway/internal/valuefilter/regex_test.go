package valuefilter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// regexFilter returns a filter of about 1 KB made of constant regexes over the key, each within the regex
// size limit, that all match the key "tenant-7/order-42".
func regexFilter() string {
	expr := ""
	for i := 0; ; i++ {
		next := fmt.Sprintf(`key.matches("^[a-z0-9-]{1,%d}/[a-z0-9-]{1,40}$")`, 30+i)
		if expr != "" {
			next = expr + " && " + next
		}
		if len(next) > MaxLength {
			return expr
		}
		expr = next
	}
}

// BenchmarkFilterConstantRegex: one evaluation of a 1 KB filter of constant regexes (per record per stream).
// Each regex is compiled once, with the program, not once per evaluation.
func BenchmarkFilterConstantRegex(b *testing.B) {
	p, err := Compile(regexFilter())
	if err != nil {
		b.Fatal(err)
	}
	key := []byte("tenant-7/order-42")
	if !p.Match([]byte(`{}`), key, "message") {
		b.Fatal("the filter does not match its key")
	}
	b.ReportAllocs()
	for b.Loop() {
		p.Match([]byte(`{}`), key, "message")
	}
}

// TestRegexCompiledOnce: a constant regex is compiled with the program: an evaluation allocates what a match
// does, not a regex program (a 900-instruction regex compiled per evaluation is thousands of allocations).
func TestRegexCompiledOnce(t *testing.T) {
	p, err := Compile(`key.matches("^[a-z]{1,300}/[a-z0-9]{1,140}$")`)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("tenant/order42")
	if !p.Match(nil, key, "message") {
		t.Fatal("the regex does not match")
	}
	if n := testing.AllocsPerRun(50, func() { p.Match(nil, key, "message") }); n > 50 {
		t.Errorf("an evaluation allocates %.0f times: the regex is compiled per evaluation", n)
	}
}

// TestRegexRefused: a regex too large, regexes too large together, or a regex that is not one, are refused
// when the expression is compiled, with a one-line message saying why.
func TestRegexRefused(t *testing.T) {
	for _, tc := range []struct{ expr, says string }{
		{`key.matches("[a-z]{1,1000}")`, "regex program size 2001 exceeds limit of 1000"},
		{`matches(key, "[a-z]{1,1000}")`, "regex program size 2001 exceeds limit of 1000"},
		{
			`key.matches("[a-z]{1,400}") && type.matches("[a-z]{1,400}") && key.matches("[0-9]{1,400}") && type.matches("[0-9]{1,400}") && key.matches("[a-f]{1,400}")`,
			"4005 regex instructions together, at most 4000",
		},
		{`key.matches("(unclosed")`, "invalid matches argument"},
	} {
		_, err := Compile(tc.expr)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Compile(%.50q) = %v, want ErrInvalid on one line saying %q", tc.expr, err, tc.says)
		}
	}
}

// TestRegexCost: a match counts in the cost limit by input length times regex program size: a 900-instruction
// regex over a 2,000-byte string (1.8 million steps at worst) is stopped, which the standard estimate (by the
// pattern's 12 characters) lets through; over 100 bytes it runs.
func TestRegexCost(t *testing.T) {
	p, err := Compile(`value.s.matches("[a-z]{1,450}")`)
	if err != nil {
		t.Fatal(err)
	}
	long := []byte(`{"s":"` + strings.Repeat("a", 2000) + `"}`)
	short := []byte(`{"s":"` + strings.Repeat("a", 100) + `"}`)
	if p.Match(long, nil, "message") {
		t.Error("a match of 1.8 million steps ran: the cost limit did not count the regex's size")
	}
	if !p.Match(short, nil, "message") {
		t.Error("a match of 90,000 steps was stopped")
	}
	// A regex from the value itself is measured when it is used.
	q, err := Compile(`value.s.matches(value.re)`)
	if err != nil {
		t.Fatal(err)
	}
	if q.Match([]byte(`{"s":"`+strings.Repeat("a", 2000)+`","re":"[a-z]{1,450}"}`), nil, "message") {
		t.Error("a regex from the value was not counted by its size")
	}
	if !q.Match([]byte(`{"s":"abc","re":"^[a-z]+$"}`), nil, "message") {
		t.Error("a small regex from the value did not match")
	}
}
