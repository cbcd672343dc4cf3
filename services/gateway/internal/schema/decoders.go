package schema

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// Source is where schemas come from: a registry (an *sr.Client is one) or files (Files).
type Source interface {
	// SchemaByID returns the schema of an id, its references named by subject and version.
	SchemaByID(ctx context.Context, id int) (sr.Schema, error)
	// SchemaByVersion returns a referenced schema.
	SchemaByVersion(ctx context.Context, subject string, version int) (sr.SubjectSchema, error)
}

// LookupOK is the outcome of a lookup that found and compiled its schema (Options.OnLookup).
const LookupOK = "ok"

// Options of Decoders.
type Options struct {
	// Timeout bounds one lookup of a schema, references included. Default 5s.
	Timeout time.Duration
	// ValidateJSON validates JSON Schema values against their schema (else they are passed through).
	ValidateJSON bool
	// OnLookup, when set, is told the outcome of every lookup in the source: LookupOK (err nil), or a Reason
	// and the error, with the schema id asked for. It is called on the lookup's goroutine, never under a lock.
	OnLookup func(result string, id int, err error)
}

// Bounds of the lookups (see the package comment).
const (
	// backoffMin and backoffMax: after a failure, from backoffMin, doubling, up to backoffMax.
	backoffMin = time.Second
	backoffMax = time.Minute
	// failedKept is how many ids that failed are remembered (their backoff); ids that worked are all kept.
	failedKept = 4096
	// maxFlights bounds the lookups under way at once: one per id, however many callers want it.
	maxFlights = 8
	// lookupRate is how many lookups of new ids start per second, after a burst of lookupBurst: values with
	// random schema ids cost the registry at most this, and the ids beyond it are asked when next seen.
	lookupRate  = 20
	lookupBurst = 50
)

// Decoders renders wire-format values, with the schemas it has looked up. Safe for concurrent use.
type Decoders struct {
	src   Source
	local bool // src is a localSource
	opts  Options
	now   func() time.Time

	mu      sync.Mutex
	ok      map[int]*compiled
	failed  *lru.Cache[int, *failure] // an id whose lookup failed: until when not to ask again
	flights map[int]*flight           // the lookups under way, one per id
	// tokens is the lookups that may start now (up to lookupBurst), as of tokensAt; lookupRate a second
	// are added.
	tokens   float64
	tokensAt time.Time
	// down is set while the source is unavailable: lookups of ids not known yet fail at once until downUntil,
	// then one of them asks in the background (probing) while the others still fail at once.
	down      bool
	downUntil time.Time
	downFor   time.Duration
	probing   bool
}

type failure struct {
	err   *Error
	until time.Time
	wait  time.Duration
}

// flight is one lookup under way; done is closed once c or err is set.
type flight struct {
	done chan struct{}
	c    *compiled
	err  *Error
}

// NewDecoders returns Decoders that look schemas up in src.
func NewDecoders(src Source, opts Options) *Decoders {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	failed, _ := lru.New[int, *failure](failedKept)
	_, local := src.(localSource)
	return &Decoders{
		src: src, local: local, opts: opts, now: time.Now, ok: map[int]*compiled{}, failed: failed,
		flights: map[int]*flight{}, tokens: lookupBurst,
	}
}

// errPending is the error of a value whose schema is being looked up.
var errPending = errors.New("the schema is being looked up; a later read of the record decodes it")

// errBusy is the error of a value whose schema could not be asked for yet: too many lookups under way, or
// started in the last second.
var errBusy = errors.New("too many schema lookups at once; the id is asked for when next seen")

// localSource is a Source that answers from memory (Files): asking it costs no network call and no wait, so
// its lookups are neither bounded in number nor rate, and lookup waits for them.
type localSource interface {
	Source
	local()
}

// lookup returns the compiled schema of id. It never waits on a registry: an id not known yet starts a
// lookup in the background (when the bounds allow) and fails with Pending. A local source's lookup (a
// compile) is waited for.
func (d *Decoders) lookup(id int) (*compiled, error) {
	if d.local {
		return d.lookupWait(id, time.Time{})
	}
	c, _, err := d.start(id)
	return c, err
}

// lookupWait is lookup that waits for the id's lookup to end, until deadline at the latest; a zero deadline
// waits for the lookup's end, which its own timeout bounds.
func (d *Decoders) lookupWait(id int, deadline time.Time) (*compiled, error) {
	c, fl, err := d.start(id)
	if fl == nil {
		return c, err
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-fl.done:
		if fl.err != nil {
			return nil, fl.err
		}
		return fl.c, nil
	case <-timeout:
		return nil, err
	}
}

// start returns the compiled schema of id, or why not: when a lookup of id is under way (one this call
// started, or an earlier one), it is returned too, with a Pending error. It never waits on the source.
func (d *Decoders) start(id int) (*compiled, *flight, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.ok[id]; ok {
		return c, nil, nil
	}
	if fl := d.flights[id]; fl != nil {
		return nil, fl, &Error{Reason: Pending, ID: id, Err: errPending}
	}
	now := d.now()
	if f, ok := d.failed.Get(id); ok && now.Before(f.until) {
		return nil, nil, f.err
	}
	probe := false
	if d.down {
		if now.Before(d.downUntil) || d.probing {
			return nil, nil, &Error{Reason: Unavailable, ID: id, Err: errors.New("the registry failed lately; asking again later")}
		}
		probe = true
	}
	if !d.local {
		d.tokens = min(lookupBurst, d.tokens+now.Sub(d.tokensAt).Seconds()*lookupRate)
		d.tokensAt = now
		if len(d.flights) >= maxFlights || d.tokens < 1 {
			return nil, nil, &Error{Reason: Pending, ID: id, Err: errBusy}
		}
		d.tokens--
	}
	d.probing = d.probing || probe
	fl := &flight{done: make(chan struct{})}
	d.flights[id] = fl
	go d.fetch(id, fl)
	if probe {
		return nil, fl, &Error{Reason: Unavailable, ID: id, Err: errors.New("the registry failed lately; asking it again")}
	}
	return nil, fl, &Error{Reason: Pending, ID: id, Err: errPending}
}

// fetch looks id up in the source, records the outcome and ends fl.
func (d *Decoders) fetch(id int, fl *flight) {
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.Timeout)
	defer cancel()
	c, err := d.load(ctx, id)
	var e *Error
	if err != nil && !errors.As(err, &e) {
		e = &Error{Reason: BadSchema, ID: id, Err: err}
	}
	if d.opts.OnLookup != nil {
		if e != nil {
			d.opts.OnLookup(string(e.Reason), id, e.Err)
		} else {
			d.opts.OnLookup(LookupOK, id, nil)
		}
	}
	fl.c, fl.err = c, e
	d.record(id, c, e)
	close(fl.done)
}

// record keeps the outcome of a lookup of id, its compiled schema or its failure and backoff, and ends its
// flight.
func (d *Decoders) record(id int, c *compiled, e *Error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.flights, id)
	now := d.now()
	d.probing = false
	if e == nil {
		d.ok[id] = c
		d.down, d.downFor = false, 0
		d.failed.Remove(id)
		return
	}
	if e.Reason == Unavailable {
		d.downFor = min(max(2*d.downFor, backoffMin), backoffMax)
		d.down, d.downUntil = true, now.Add(d.downFor)
		return
	}
	// The source answered: it is up, and the next outage backs off from the start again.
	d.down, d.downFor = false, 0
	wait := backoffMin
	if f, ok := d.failed.Get(id); ok {
		wait = min(2*f.wait, backoffMax)
	}
	d.failed.Add(id, &failure{err: e, until: now.Add(wait), wait: wait})
}

// load fetches the schema of id with its references and compiles it.
func (d *Decoders) load(ctx context.Context, id int) (*compiled, error) {
	s, err := d.src.SchemaByID(ctx, id)
	if err != nil {
		return nil, sourceError(id, err)
	}
	refs, err := d.references(ctx, s.References, map[string]bool{}, 0)
	if err != nil {
		return nil, sourceError(id, err)
	}
	c := &compiled{}
	switch s.Type {
	case sr.TypeAvro:
		texts := make([]string, len(refs))
		for i, r := range refs {
			texts[i] = r.text
		}
		c.kind = Avro
		c.avro, err = compileAvro(s.Schema, texts)
	case sr.TypeProtobuf:
		c.kind = Protobuf
		c.proto, err = compileProto(ctx, s.Schema, byName(refs))
	case sr.TypeJSON:
		c.kind = JSONSchema
		c.json, err = compileJSONSchema(s.Schema, byName(refs), d.opts.ValidateJSON)
	default:
		err = fmt.Errorf("schema type %q", s.Type)
	}
	if err != nil {
		return nil, &Error{Reason: BadSchema, ID: id, Err: err}
	}
	return c, nil
}

// reference is a referenced schema's name (an import path, a "$ref", an Avro type name) and text.
type reference struct{ name, text string }

// maxReferences bounds how deep references go, and how many a schema brings.
const maxReferences = 64

// references fetches refs and what they reference, depth first: every schema comes after those it refers to.
func (d *Decoders) references(ctx context.Context, refs []sr.SchemaReference, seen map[string]bool, depth int) ([]reference, error) {
	var out []reference
	for _, r := range refs {
		key := r.Subject + "\x00" + strconv.Itoa(r.Version)
		if seen[key] {
			continue
		}
		seen[key] = true
		if depth > maxReferences || len(seen) > maxReferences {
			return nil, &Error{Reason: BadSchema, Err: fmt.Errorf("more than %d references", maxReferences)}
		}
		s, err := d.src.SchemaByVersion(ctx, r.Subject, r.Version)
		if err != nil {
			return nil, fmt.Errorf("reference %q (subject %q version %d): %w", r.Name, r.Subject, r.Version, err)
		}
		deeper, err := d.references(ctx, s.References, seen, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(append(out, deeper...), reference{name: r.Name, text: s.Schema.Schema})
	}
	return out, nil
}

func byName(refs []reference) map[string]string {
	m := make(map[string]string, len(refs))
	for _, r := range refs {
		m[r.name] = r.text
	}
	return m
}

// sourceError says which Reason a failed lookup is: a registry that answered "not found" knows no such
// schema; anything else (no answer, a timeout, 401, 5xx) is the registry unavailable.
func sourceError(id int, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		e.ID = id
		return e
	}
	var re *sr.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound || errors.Is(err, errNoSchemaFile) {
		return &Error{Reason: UnknownSchema, ID: id, Err: err}
	}
	if errors.Is(err, errAnswerTooLong) {
		return &Error{Reason: BadSchema, ID: id, Err: err}
	}
	return &Error{Reason: Unavailable, ID: id, Err: err}
}
