package projection

import (
	"errors"
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	value := `{"id":"o-1","status":"paid","amount":150.5,"customer":{"name":"Ann","email":"a@x","address":{"city":"Graz","zip":"8010"}},
		"items":[{"sku":"a"}],"note":null,"tags":{"a":1}, "multi":
		[1,
		 2]}`
	cases := []struct {
		fields, want string
	}{
		{"id", `{"id":"o-1"}`},
		{"status,id", `{"status":"paid","id":"o-1"}`},
		{"id,missing,amount", `{"id":"o-1","amount":150.5}`},
		{"customer.name", `{"customer":{"name":"Ann"}}`},
		{"customer.address.city,customer.name", `{"customer":{"address":{"city":"Graz"},"name":"Ann"}}`},
		{"customer.name,customer", `{"customer":{"name":"Ann","email":"a@x","address":{"city":"Graz","zip":"8010"}}}`},
		{"customer,customer.name", `{"customer":{"name":"Ann","email":"a@x","address":{"city":"Graz","zip":"8010"}}}`},
		{"items.sku", `{}`},
		{"id.x,status", `{"status":"paid"}`},
		{"note,multi", `{"note":null,"multi":[1,2]}`},
		{"nothing", `{}`},
	}
	for _, tc := range cases {
		f, err := Parse(tc.fields)
		if err != nil {
			t.Fatalf("%s: %v", tc.fields, err)
		}
		got, ok := f.Apply([]byte("data: "), []byte(value))
		if !ok || string(got) != "data: "+tc.want {
			t.Errorf("fields=%s: %s (%v), want %s", tc.fields, got, ok, tc.want)
		}
	}
	f, _ := Parse("id")
	for _, v := range []string{`[1,2]`, `"text"`, `42`, `not json`, ``, `{"id":`, "\xff"} {
		if got, ok := f.Apply([]byte("x"), []byte(v)); ok || string(got) != "x" {
			t.Errorf("value %q: %q, %v; want no projection", v, got, ok)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, s := range []string{
		"", ",", "id,", ",id", "a..b", ".a", "a.", "id,id", "a.b,a.b",
		strings.Repeat("a,", MaxFields) + "z", strings.Repeat("a.", MaxDepth) + "z", strings.Repeat("x", MaxLength+1),
	} {
		if _, err := Parse(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", s, err)
		}
	}
}

// BenchmarkProject: three fields of a 90-byte order, projected (no sharing).
func BenchmarkProject(b *testing.B) {
	f, _ := Parse("id,status,amount")
	v := []byte(`{"id":"o-1","amount":150,"region":"eu","status":"paid","items":[{"sku":"a","n":2},{"sku":"b","n":1}]}`)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = f.root.apply(dst[:0], v)
	}
}

// BenchmarkShared: one record through 1,000 streams asking for the same fields, each parsing its parameter as
// a stream does when it opens: projected once, then copied.
func BenchmarkShared(b *testing.B) {
	streams := make([]*Fields, 1000)
	for i := range streams {
		streams[i], _ = Parse("id,status,amount")
	}
	v := []byte(`{"id":"o-1","amount":150,"region":"eu","status":"paid","items":[{"sku":"a","n":2},{"sku":"b","n":1}]}`)
	var dst []byte
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		copy(v[7:9], []byte{byte('a' + n%26), byte('a' + n/26%26)}) // another record each round
		for _, f := range streams {
			dst, _ = f.Apply(dst[:0], v)
		}
	}
}
