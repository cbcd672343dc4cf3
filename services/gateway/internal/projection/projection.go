// Package projection keeps chosen fields of JSON values: a stream's fields parameter
// (fields=id,status,customer.name), so that a page gets only what it shows. A field is a name of the value's
// top-level object, or a dotted path into nested objects; the projection of a value is an object with the
// fields it has, in the order they were asked for, nested as in the value, and compact (one line). A value
// that is not a JSON object has no projection: the caller sends it as it is.
package projection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Limits of a fields parameter.
const (
	// MaxLength is the longest parameter accepted, in bytes.
	MaxLength = 1024
	// MaxFields is how many fields may be asked for.
	MaxFields = 64
	// MaxDepth is how many names a dotted path may have.
	MaxDepth = 8
)

// ErrInvalid is a fields parameter that cannot be a projection.
var ErrInvalid = errors.New("projection: invalid fields")

// Fields is a compiled projection. Safe for concurrent use.
//
// Streams that ask for the same fields share one Fields (Parse keeps the latest compiled ones), and a Fields
// keeps the projections of the latest values it was applied to: a record delivered to many streams with the
// same fields is projected once, not once per stream.
type Fields struct {
	src  string
	root *node

	mu     sync.Mutex
	recent [recentValues]struct {
		hash       uint64
		value, out []byte // out nil: value had no projection
	}
	next int
}

// Sizes of the sharing: compiled projections kept, and values remembered by each.
const (
	compiled     = 1024
	recentValues = 16
)

var (
	parsed, _ = lru.New[string, *Fields](compiled)
	seed      = maphash.MakeSeed()
)

// node is a field asked for: whole (a leaf), or some of its fields (children, in the order asked).
type node struct {
	names    []string
	keys     [][]byte // each child's name as a JSON string, then ':'
	children []*node  // nil entries: take the whole value
}

// String returns the parameter as given.
func (f *Fields) String() string { return f.src }

// Parse compiles a comma-separated list of fields, each a name or a dotted path (a.b.c). Names are taken as
// they are (a name with a dot or a comma cannot be asked for); an empty name, a repeated field, and going
// over the limits are errors.
func Parse(s string) (*Fields, error) {
	if f, ok := parsed.Get(s); ok {
		return f, nil
	}
	f, err := parse(s)
	if err == nil {
		parsed.Add(s, f)
	}
	return f, err
}

func parse(s string) (*Fields, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: no field named", ErrInvalid)
	}
	if len(s) > MaxLength {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalid, MaxLength)
	}
	list := strings.Split(s, ",")
	if len(list) > MaxFields {
		return nil, fmt.Errorf("%w: more than %d fields", ErrInvalid, MaxFields)
	}
	root := &node{}
	for _, field := range list {
		path := strings.Split(field, ".")
		if len(path) > MaxDepth {
			return nil, fmt.Errorf("%w: %q is nested deeper than %d", ErrInvalid, field, MaxDepth)
		}
		if err := root.add(path, field); err != nil {
			return nil, err
		}
	}
	return &Fields{src: s, root: root}, nil
}

// add adds a path under n. A path under a field already taken whole adds nothing; a field taken whole
// replaces the parts of it asked for before.
func (n *node) add(path []string, field string) error {
	name := path[0]
	if name == "" {
		return fmt.Errorf("%w: %q has an empty name", ErrInvalid, field)
	}
	i := indexOf(n.names, name)
	if i < 0 {
		key, _ := json.Marshal(name)
		n.names, n.keys, n.children = append(n.names, name), append(n.keys, append(key, ':')), append(n.children, nil)
		i = len(n.names) - 1
		if len(path) > 1 {
			n.children[i] = &node{}
		}
	} else if len(path) == 1 || n.children[i] == nil {
		if len(path) == 1 && n.children[i] == nil {
			return fmt.Errorf("%w: %q is asked for twice", ErrInvalid, field)
		}
		n.children[i] = nil // the whole field
		return nil
	}
	if len(path) == 1 {
		return nil
	}
	return n.children[i].add(path[1:], field)
}

func indexOf(names []string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// Apply appends to dst the projection of value and reports whether value had one (a JSON object); when it
// has not, dst is returned as it was.
func (f *Fields) Apply(dst, value []byte) ([]byte, bool) {
	h := maphash.Bytes(seed, value)
	f.mu.Lock()
	for i := range f.recent {
		if r := &f.recent[i]; r.hash == h && r.value != nil && bytes.Equal(r.value, value) {
			out := r.out
			f.mu.Unlock()
			return append(dst, out...), out != nil
		}
	}
	f.mu.Unlock()
	out, ok := f.root.apply(dst, value)
	if !ok {
		out = dst
	}
	var kept []byte
	if ok {
		kept = bytes.Clone(out[len(dst):])
	}
	f.mu.Lock()
	r := &f.recent[f.next]
	r.hash, r.value, r.out = h, bytes.Clone(value), kept
	f.next = (f.next + 1) % recentValues
	f.mu.Unlock()
	return out, ok
}

// apply writes the fields of n that the object value has.
func (n *node) apply(dst, value []byte) ([]byte, bool) {
	value = bytes.TrimSpace(value)
	if len(value) == 0 || value[0] != '{' {
		return dst, false
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(value, &obj); err != nil {
		return dst, false
	}
	dst = append(dst, '{')
	first := true
	for i, name := range n.names {
		v, ok := obj[name]
		if !ok {
			continue
		}
		start := len(dst)
		if !first {
			dst = append(dst, ',')
		}
		dst = append(dst, n.keys[i]...)
		if child := n.children[i]; child != nil {
			var has bool
			if dst, has = child.apply(dst, v); !has {
				dst = dst[:start] // not an object: it has none of the fields asked for under it
				continue
			}
		} else {
			buf := bytes.NewBuffer(dst)
			_ = json.Compact(buf, v) // valid: Unmarshal checked the whole value
			dst = buf.Bytes()
		}
		first = false
	}
	return append(dst, '}'), true
}
