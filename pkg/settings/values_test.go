package settings

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMapSet(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]string
		wantErr string
	}{
		{name: "pairs", in: "orders=base64,logs=text", want: map[string]string{"orders": "base64", "logs": "text"}},
		{name: "blanks and empty items", in: " orders = base64 ,, logs=text, ", want: map[string]string{"orders": "base64", "logs": "text"}},
		{name: "empty value", in: "orders=", want: map[string]string{"orders": ""}},
		{name: "value with =", in: "a=b=c", want: map[string]string{"a": "b=c"}},
		{name: "empty", in: "", want: map[string]string{}},
		{name: "no =", in: "orders", wantErr: `want key=value pairs, comma-separated, got "orders"`},
		{name: "empty key", in: "=base64", wantErr: `got "=base64"`},
		{name: "key twice", in: "a=text,a=base64", wantErr: `"a" given more than once`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{"old": "x"}
			err := Map(&m).Set(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Set(%q) error = %v, want %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(m, tc.want) {
				t.Fatalf("Set(%q) = %v, %v; want %v", tc.in, m, err, tc.want)
			}
		})
	}
	m := map[string]string{"b": "2", "a": "1"}
	if s := Map(&m).String(); s != "a=1,b=2" {
		t.Errorf("String() = %q, want a=1,b=2", s)
	}
}

// TestMapFromFile: a Map setting takes in the YAML file a string, a list of pairs, or a map; other settings
// still refuse a map.
func TestMapFromFile(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, wantErr string
		want                map[string]string
	}{
		{name: "string", yaml: "formats: orders=base64,logs=text\n", want: map[string]string{"orders": "base64", "logs": "text"}},
		{name: "list", yaml: "formats: [orders=base64, logs=text]\n", want: map[string]string{"orders": "base64", "logs": "text"}},
		{name: "map", yaml: "formats:\n  orders: base64\n  logs: text\n", want: map[string]string{"orders": "base64", "logs": "text"}},
		{name: "map with a number", yaml: "formats: {n: 5}\n", want: map[string]string{"n": "5"}},
		{name: "map of lists", yaml: "formats: {orders: [a, b]}\n", wantErr: "setting formats from config file"},
		{name: "map of maps", yaml: "formats: {orders: {a: b}}\n", wantErr: "setting formats from config file"},
		{name: "map for a non-map setting", yaml: "name: {a: b}\n", wantErr: "got a map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var name string
			var m map[string]string
			ss := []Setting{
				{Name: "name", Value: String(&name)},
				{Name: "formats", Value: Map(&m)},
			}
			_, err := Load(ss, []string{"--config", path}, func(string) string { return "" }, Options{Out: io.Discard})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !maps.Equal(m, tc.want) {
				t.Fatalf("got %v, %v; want %v", m, err, tc.want)
			}
		})
	}
}
