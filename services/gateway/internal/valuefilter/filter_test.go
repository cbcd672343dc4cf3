package valuefilter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestMatch: expressions over the JSON value, the key and the event type; what cannot be evaluated does not
// match.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		expr, value, key, typ string
		want                  bool
	}{
		{`value.amount > 100 && value.region == "eu"`, `{"amount":150,"region":"eu"}`, "o-1", "message", true},
		{`value.amount > 100 && value.region == "eu"`, `{"amount":150,"region":"us"}`, "o-1", "message", false},
		{`value.amount > 100`, `{"amount":100.5}`, "", "message", true},   // a double against an int
		{`value.amount > 100`, `{"region":"eu"}`, "", "message", false},   // no such field
		{`value.amount > 100`, `not json`, "", "message", false},          // a string has no fields
		{`value == "plain text"`, `plain text`, "", "message", true},      // not JSON: the value as a string
		{`key.startsWith("user-42")`, `{}`, "user-42/a", "message", true}, // the key
		{`type == "order.paid"`, `{}`, "", "order.paid", true},            // the event type
		{`has(value.items) && value.items.exists(i, i.sku == "x")`, `{"items":[{"sku":"y"},{"sku":"x"}]}`, "", "message", true},
		{`value == null`, ``, "k", "delete", true}, // a tombstone (nil value)
		{`value.tags.all(t, t.size() < 3)`, `{"tags":["a","bb"]}`, "", "message", true},
	} {
		p, err := Compile(tc.expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.expr, err)
		}
		var value []byte
		if tc.value != "" {
			value = []byte(tc.value)
		}
		if got := p.Match(value, []byte(tc.key), tc.typ); got != tc.want {
			t.Errorf("%s on %s (key %q, type %q) = %v, want %v", tc.expr, tc.value, tc.key, tc.typ, got, tc.want)
		}
	}
}

// TestCompileRefuses: what is refused, with a one-line message.
func TestCompileRefuses(t *testing.T) {
	for _, expr := range []string{
		"",
		"   ",
		"value.amount >",                         // a syntax error
		"value.amount + 1",                       // a number, not a boolean: dyn + int is dyn, checked at evaluation; an int literal is not
		"1 + 2",                                  // an int
		"unknown_variable == 1",                  // no such variable
		strings.Repeat("true && ", 200) + "true", // too long
	} {
		_, err := Compile(expr)
		if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Compile(%.40q) = %v, want ErrInvalid on one line", expr, err)
		}
	}
	// A field of the value is dyn, accepted: it matches only where it is true.
	p, err := Compile("value.flag")
	if err != nil || p.Match([]byte(`{"flag":1}`), nil, "message") || !p.Match([]byte(`{"flag":true}`), nil, "message") {
		t.Errorf("a dyn expression: %v, or it matched a number, or not true", err)
	}
}

// TestCostLimit: an expression whose evaluation would run long is stopped by the cost limit, and does not
// match.
func TestCostLimit(t *testing.T) {
	p, err := Compile(`value.xs.all(a, value.xs.all(b, value.xs.all(c, a + b + c >= 0)))`)
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]string, 100)
	for i := range xs {
		xs[i] = fmt.Sprint(i)
	}
	big := []byte(`{"xs":[` + strings.Join(xs, ",") + `]}`)
	if p.Match(big, nil, "message") {
		t.Error("an evaluation of a million steps matched: the cost limit did not stop it")
	}
	if !p.Match([]byte(`{"xs":[1,2]}`), nil, "message") {
		t.Error("a small one did not match")
	}
}

// TestCompileOnce: the same text gives the same program; And combines two.
func TestCompileOnce(t *testing.T) {
	a, _ := Compile(`value.a == 1`)
	b, _ := Compile(`value.a == 1`)
	if a != b {
		t.Error("the same expression was compiled twice")
	}
	c, _ := Compile(`value.b == 2`)
	both, err := And(a, c)
	if err != nil || !both.Match([]byte(`{"a":1,"b":2}`), nil, "") || both.Match([]byte(`{"a":1,"b":3}`), nil, "") {
		t.Errorf("And: %v", err)
	}
	if p, _ := And(nil, c); p != c {
		t.Error("And(nil, c) is not c")
	}
}

func BenchmarkMatch(b *testing.B) {
	p, err := Compile(`value.amount > 100 && value.region == "eu"`)
	if err != nil {
		b.Fatal(err)
	}
	v := []byte(`{"id":"o-1","amount":150,"region":"eu","status":"paid","items":[{"sku":"a","n":1}]}`)
	b.ReportAllocs()
	for b.Loop() {
		p.Match(v, []byte("o-1"), "message")
	}
}

// BenchmarkDistinctFilters: one record through 1,000 streams' filters, each a distinct expression (what a pod
// does per record for 1,000 streams with distinct filters): ns/op is the CPU one record costs them all.
func BenchmarkDistinctFilters(b *testing.B) {
	var ps []*Program
	for i := range 1000 {
		p, err := Compile(fmt.Sprintf(`value.amount > %d && value.region == "eu"`, i))
		if err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	v := []byte(`{"id":"o-1","amount":150,"region":"eu","status":"paid","items":[{"sku":"a","n":1}]}`)
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range ps {
			p.Match(v, []byte("o-1"), "message")
		}
	}
}

// TestAndLong: two filters of up to MaxLength bytes each (a token's and a query's) combine, and the
// combination matches what both match; neither's limits are lost.
func TestAndLong(t *testing.T) {
	long := func(field string) string {
		e := fmt.Sprintf(`value.%s == 1`, field)
		for len(e)+len(` || value.nothing == 0`) <= MaxLength {
			e += ` || value.nothing == 0`
		}
		return e
	}
	a, err := Compile(long("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Compile(long("b"))
	if err != nil {
		t.Fatal(err)
	}
	both, err := And(a, b)
	if err != nil {
		t.Fatalf("And of %d and %d bytes: %v", len(a.String()), len(b.String()), err)
	}
	for value, want := range map[string]bool{`{"a":1,"b":1}`: true, `{"a":1,"b":2}`: false, `{"a":2,"b":1}`: false, `{}`: false} {
		if got := both.Match([]byte(value), nil, "message"); got != want {
			t.Errorf("%s: %v, want %v", value, got, want)
		}
	}
	if s := both.String(); !strings.HasPrefix(s, "("+a.String()+") && (") {
		t.Errorf("String() = %.60q", s)
	}
}
