package stream

import (
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/ssegate/ssegate/pkg/sse"
)

// TestPoolFields: a stream with fields= is parked like any filtered stream; its writer sends each JSON
// value's chosen fields, in the order asked, with the frame's event type and the stream's position; a value
// that is not a JSON object and a tombstone go as they are.
func TestPoolFields(t *testing.T) {
	f := newFeeder(t, 1<<20)
	ps := startPool(t, Config{}, &Topic{Ring: f.rg}, Params{}).start(t)
	c := dialOpen(t, ps.hs.URL+"?fields=status,id,customer.name")
	waitUntil(t, "a parked connection", func() bool { return ps.st.Parked.Load() == 1 })
	values := []struct{ typ, value, want string }{
		{"order", `{"id":1,"status":"paid","amount":5,"customer":{"name":"Ann","email":"a@x"}}`, `{"status":"paid","id":1,"customer":{"name":"Ann"}}`},
		{"", `{"amount":5}`, `{}`},
		{"", `plain text`, `plain text`},
		{"delete", `k-1`, `k-1`},
		{"", "{\"id\":2,\n\"status\":\"new\"}", `{"status":"new","id":2}`},
	}
	f.b.Reset()
	for i, v := range values {
		f.offset++
		f.b.Add(sse.AppendEvent(f.b.Buf(), f.id(), v.typ, []byte(v.value)), 0, int64(i), nil)
	}
	f.rg.Publish(&f.b, []byte(f.id()))
	for i, v := range values {
		ev, err := c.p.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		typ := v.typ
		if typ == "" {
			typ = "message"
		}
		if ev.Type != typ || ev.Data != v.want || ev.ID != fmt.Sprintf("v1:0-%d", i) {
			t.Errorf("event %d = %+v, want type %s data %s", i, ev, typ, v.want)
		}
	}
}

// TestFieldsParam: a fields parameter that cannot be a projection is refused before the stream starts,
// naming the parameter.
func TestFieldsParam(t *testing.T) {
	parse := func(query string) (Params, error) {
		q, err := url.ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		return ParseParams(q, nil, 0)
	}
	for _, q := range []string{"fields=", "fields=a,,b", "fields=a.", "fields=a,a", "fields=a&fields=b"} {
		_, err := parse(q)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != "fields" {
			t.Errorf("%s: %v, want an error of the fields parameter", q, err)
		}
	}
	p, err := parse("fields=id,customer.name")
	if err != nil || p.Fields == nil || p.Fields.String() != "id,customer.name" {
		t.Errorf("fields=id,customer.name: %+v, %v", p.Fields, err)
	}
}
