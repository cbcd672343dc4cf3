package settings

import (
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ssegate/ssegate/pkg/secret"
)

// String returns a flag.Value that sets *p to the text as it is.
func String(p *string) flag.Value { return (*stringValue)(p) }

// List returns a flag.Value that sets *p from a comma list, trimming blanks and dropping empty items.
func List(p *[]string) flag.Value { return (*listValue)(p) }

// Map returns a flag.Value that sets *p from a comma list of key=value pairs ("orders=base64,logs=text"),
// trimming blanks around keys and values and dropping empty items. A pair without "=", an empty key or a key
// given twice is an error. In the YAML file the setting may also be a map of keys to values.
func Map(p *map[string]string) flag.Value { return (*mapValue)(p) }

// Bool returns a flag.Value that parses true or false (and the other strconv.ParseBool forms).
func Bool(p *bool) flag.Value { return (*boolValue)(p) }

// Duration returns a flag.Value that parses a Go duration such as 15s or 500ms.
func Duration(p *time.Duration) flag.Value { return (*durationValue)(p) }

// Bytes returns a flag.Value that parses a size in bytes, optionally with KiB, MiB, GiB, KB, MB, GB or B.
func Bytes(p *int64) flag.Value { return (*bytesValue)(p) }

// Level returns a flag.Value that parses a slog level: debug, info, warn or error.
func Level(p *slog.Level) flag.Value { return (*levelValue)(p) }

// SecretFile returns a flag.Value that sets *p to the path of a secret file (a password or token mounted from a
// Kubernetes Secret) after reading the file once, so that a file that is missing, unreadable or empty is an
// error at start. The services read it again when it changes (see package secret).
func SecretFile(p *string) flag.Value { return (*secretFileValue)(p) }

// Int returns a flag.Value that parses a whole number.
func Int(p *int) flag.Value { return (*intValue)(p) }

// Int64 returns a flag.Value that parses a whole number.
func Int64(p *int64) flag.Value { return (*int64Value)(p) }

type stringValue string

func (v *stringValue) String() string     { return string(*v) }
func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }

type listValue []string

func (v *listValue) String() string { return strings.Join(*v, ",") }

func (v *listValue) Set(s string) error {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	*v = out
	return nil
}

type mapValue map[string]string

func (v *mapValue) String() string {
	keys := slices.Sorted(maps.Keys(*v))
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + (*v)[k]
	}
	return strings.Join(pairs, ",")
}

func (v *mapValue) Set(s string) error {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		k, val, ok := strings.Cut(item, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" {
			return fmt.Errorf("want key=value pairs, comma-separated, got %q", item)
		}
		if _, dup := out[k]; dup {
			return fmt.Errorf("%q given more than once", k)
		}
		out[k] = val
	}
	*v = out
	return nil
}

// acceptsMap marks a value whose YAML form may be a map (see scalar).
func (v *mapValue) acceptsMap() {}

type boolValue bool

func (v *boolValue) String() string   { return strconv.FormatBool(bool(*v)) }
func (v *boolValue) IsBoolFlag() bool { return true }

func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	*v = boolValue(b)
	return nil
}

type durationValue time.Duration

func (v *durationValue) String() string { return time.Duration(*v).String() }

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 15s or 500ms, got %q", s)
	}
	*v = durationValue(d)
	return nil
}

type bytesValue int64

func (v *bytesValue) String() string { return strconv.FormatInt(int64(*v), 10) }

func (v *bytesValue) Set(s string) error {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1000}, {"MB", 1000_000}, {"GB", 1000_000_000}, {"B", 1}}
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("want a size in bytes such as 67108864 or 64MiB, got %q", s)
	}
	*v = bytesValue(n * mult)
	return nil
}

type levelValue slog.Level

func (v *levelValue) String() string { return slog.Level(*v).String() }

func (v *levelValue) Set(s string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return fmt.Errorf("want debug, info, warn or error, got %q", s)
	}
	*v = levelValue(l)
	return nil
}

type secretFileValue string

func (v *secretFileValue) String() string { return string(*v) }

func (v *secretFileValue) Set(path string) error {
	if _, err := secret.NewFile("file", path).Read(); err != nil {
		return err
	}
	*v = secretFileValue(path)
	return nil
}

type int64Value int64

func (v *int64Value) String() string { return strconv.FormatInt(int64(*v), 10) }

func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("want a whole number, got %q", s)
	}
	*v = int64Value(n)
	return nil
}

type intValue int

func (v *intValue) String() string { return strconv.Itoa(int(*v)) }

func (v *intValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want a whole number, got %q", s)
	}
	*v = intValue(n)
	return nil
}
