package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/position"
)

// vectors are the cases k6/common.js and this tool must agree on (k6/testdata/vectors.json).
type vectors struct {
	IDs []struct {
		ID   string           `json:"id"`
		Want map[string]int64 `json:"want"` // nil: refused
	} `json:"ids"`
	Streams []struct {
		Name                 string      `json:"name"`
		Steps                [][2]string `json:"steps"` // ["open", id] or ["frame", id]
		Delivered, Lost, Dup int64
	} `json:"streams"`
}

func readVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("k6", "testdata", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVectors: the gateway's id decoder and the tool's tracker give the vectors' answers.
func TestVectors(t *testing.T) {
	v := readVectors(t)
	for _, c := range v.IDs {
		got, err := position.Parse(c.ID)
		if c.Want == nil {
			if err == nil {
				t.Errorf("Parse(%q) = %v, want an error", c.ID, got)
			}
			continue
		}
		m := map[string]int64{}
		for i := range got.Len() {
			e := got.At(i)
			m[strconv.Itoa(int(e.Partition))] = e.Offset
		}
		if err != nil || !reflect.DeepEqual(m, c.Want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.ID, m, err, c.Want)
		}
	}
	for _, s := range v.Streams {
		var tr tracker
		now := time.Now()
		for _, step := range s.Steps {
			if step[0] == "open" {
				if err := tr.open(step[1], now); err != nil {
					t.Fatalf("%s: %v", s.Name, err)
				}
			} else {
				tr.frame(step[1], &lazyClock{now})
			}
		}
		if tr.delivered != s.Delivered || tr.lost != s.Lost || tr.dup != s.Dup {
			t.Errorf("stream %q: delivered %d lost %d dup %d; want %d %d %d", s.Name, tr.delivered, tr.lost, tr.dup, s.Delivered, s.Lost, s.Dup)
		}
	}
}

// TestK6AgreesWithGo: k6/common.js gives the vectors' answers too (run with Node, since k6 is not installed
// here), and every k6 script parses.
func TestK6AgreesWithGo(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is required under CI (the k6 scripts' checks)")
		}
		t.Skip("node not installed")
	}
	if out, err := exec.Command(node, filepath.Join("k6", "vectors.test.mjs")).CombinedOutput(); err != nil {
		t.Fatalf("k6/common.js disagrees with the vectors: %v\n%s", err, out)
	}
	scripts, _ := filepath.Glob(filepath.Join("k6", "*.js"))
	if len(scripts) < 3 {
		t.Fatalf("k6 scripts: %v", scripts)
	}
	for _, s := range scripts {
		if out, err := exec.Command(node, "--check", s).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", s, err, out)
		}
	}
}
