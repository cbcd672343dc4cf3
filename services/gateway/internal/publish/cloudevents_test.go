package publish

import (
	"errors"
	"strings"
	"testing"
)

// TestFromMessage: a structured CloudEvent becomes its record in the Kafka binding's binary mode; anything
// else the data of a new event; a CloudEvent that is not well-formed is refused.
func TestFromMessage(t *testing.T) {
	lim := DefaultLimits
	r, err := FromMessage([]byte(`{"specversion":"1.0","id":"e1","source":"/shop","type":"order.placed","subject":"o-1",`+
		`"partitionkey":"user-1","datacontenttype":"application/json","seq":7,"data":{"n": 1}}`), "/ws/t", lim)
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	if string(r.Key) != "user-1" || string(r.Value) != `{"n":1}` || r.IdemKey != "/shop e1" || h["ce_type"] != "order.placed" ||
		h["ce_id"] != "e1" || h["ce_source"] != "/shop" || h["ce_subject"] != "o-1" || h["ce_seq"] != "7" ||
		h["content-type"] != "application/json" || h["ce_specversion"] != "1.0" {
		t.Fatalf("record %+v, headers %v", r, h)
	}
	if r, err = FromMessage([]byte(`{"specversion":"1.0","id":"e2","source":"/s","type":"t","data_base64":"/w=="}`), "/ws/t", lim); err != nil || string(r.Value) != "\xff" {
		t.Fatalf("data_base64: %+v, %v", r, err)
	}
	for _, msg := range []string{"plain words", `{"no":"specversion"}`, `[1,2]`} {
		r, err := FromMessage([]byte(msg), "/ws/t", lim)
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		if err != nil || string(r.Value) != msg || h["ce_type"] != "message" || h["ce_source"] != "/ws/t" || len(h["ce_id"]) != 32 || r.IdemKey != "" {
			t.Errorf("%q: %+v %v, %v", msg, r, h, err)
		}
	}
	for _, bad := range []struct{ msg, want string }{
		{`{"specversion":"0.3","id":"e","source":"s","type":"t"}`, "only 1.0"},
		{`{"specversion":"1.0","source":"s","type":"t"}`, "id must be"},
		{`{"specversion":"1.0","id":"e","source":"s","type":"t","Bad":"x"}`, "lower-case"},
		{`{"specversion":"1.0","id":"e","source":"s","type":"t","data":1,"data_base64":"AA=="}`, "not both"},
		{`{"specversion":"1.0","id":"e","source":"s","type":"t","ext":{"a":1}}`, "string, number or boolean"},
		{`{"specversion":"1.0","id":"e","source":"s","type":"token-expired"}`, `CloudEvents type: the event type "token-expired" is reserved`},
		{`{"specversion":"1.0","id":"e","source":"s","type":"resync","data":{}}`, `the event type "resync" is reserved`},
		{`{"specversion":"1.0","id":"e","source":"s","type":"t","data":"` + strings.Repeat("x", lim.MaxValueBytes+1) + `"}`, "the value has"},
	} {
		_, err := FromMessage([]byte(bad.msg), "/ws/t", lim)
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(ie.Msg, bad.want) {
			t.Errorf("%.60s: %v, want %q", bad.msg, err, bad.want)
		}
	}
}
