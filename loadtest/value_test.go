package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

func TestMakeValue(t *testing.T) {
	for _, size := range []int{0, 10, 200, 1000} {
		v := makeValue(1_700_000_000_123_456_789, 42, size)
		if size > 60 && len(v) != size {
			t.Errorf("size %d: value is %d bytes", size, len(v))
		}
		var got struct {
			TS  int64  `json:"ts"`
			Seq int64  `json:"seq"`
			Pad string `json:"pad"`
		}
		if err := json.Unmarshal(v, &got); err != nil {
			t.Fatalf("size %d: %s is not JSON: %v", size, v, err)
		}
		if got.TS != 1_700_000_000_123_456_789 || got.Seq != 42 {
			t.Fatalf("size %d: decoded %+v", size, got)
		}
		ts, ok := sendTime(string(v))
		if !ok || !ts.Equal(time.Unix(0, 1_700_000_000_123_456_789)) {
			t.Fatalf("sendTime = %v, %v", ts, ok)
		}
	}
	if _, ok := sendTime(`{"other":1}`); ok {
		t.Fatal("sendTime accepted a foreign value")
	}
}

func TestReadOpening(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            bool
	}{
		{"retry and id", "retry: 3000\nid: v1:0-4.1-2\n\ndata: x\n\n", "v1:0-4.1-2", false},
		{"empty vector", "retry: 3000\nid: v1:\n\n", "v1:", false},
		{"crlf", "retry: 3000\r\nid: v1:0-1\r\n\r\n", "v1:0-1", false},
		{"leading blank block", "retry: 3000\n\nid: v1:0-1\n\n", "v1:0-1", false},
		{"resync first", "retry: 3000\nevent: resync\ndata: {}\n\n", "", true},
		{"ended early", "retry: 3000\nid: v1:0-1\n", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readOpening(bufio.NewReader(strings.NewReader(tc.in)))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("readOpening = %q, %v; want %q, err %v", got, err, tc.want, tc.err)
			}
		})
	}
}

// TestRecordValueAvro: with a schema id, the value is the wire format's header and an Avro datum of
// testdata/avro/1.avsc (read back here with hamba/avro) holding the same ts, seq and pad as makeValue's JSON.
func TestRecordValueAvro(t *testing.T) {
	text, err := os.ReadFile("testdata/avro/1.avsc")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := avro.Parse(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{-1, 0, 42, 1 << 40} {
		for _, size := range []int{0, 200, 1000} {
			v := recordValue(7, 1_700_000_000_123_456_789, seq, size)
			if v[0] != 0 || binary.BigEndian.Uint32(v[1:5]) != 7 {
				t.Fatalf("header % x", v[:5])
			}
			var got struct {
				TS  int64  `avro:"ts" json:"ts"`
				Seq int64  `avro:"seq" json:"seq"`
				Pad string `avro:"pad" json:"pad"`
			}
			if err := avro.Unmarshal(sch, v[5:], &got); err != nil {
				t.Fatalf("seq %d size %d: %v", seq, size, err)
			}
			rendered, _ := json.Marshal(got)
			if want := makeValue(1_700_000_000_123_456_789, seq, size); string(rendered) != string(want) {
				t.Errorf("seq %d size %d: Avro holds %s, JSON is %s", seq, size, rendered, want)
			}
		}
	}
	if v := recordValue(0, 1, 2, 100); string(v) != string(makeValue(1, 2, 100)) {
		t.Errorf("without a schema id: %s", v)
	}
}
