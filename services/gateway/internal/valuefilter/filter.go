// Package valuefilter compiles and evaluates the filter expressions of streams (the filter query parameter,
// and a token's filter claim): CEL expressions over a record's JSON value, its key and its event type, such as
//
//	value.amount > 100 && value.region == "eu"
//
// An expression is compiled once per distinct text (an LRU of them), must be at most MaxLength bytes, and
// each evaluation is bounded by a cost limit. Its constant regexes are compiled with it, bounded in size
// (regex.go), and a match counts in the cost limit by its regex's size. A record the expression cannot be evaluated on (a field it names
// is missing, a value that is not JSON where it wants an object, the cost limit reached) does not match.
package valuefilter

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
)

// Limits of an expression.
const (
	// MaxLength is the longest expression accepted, in bytes.
	MaxLength = 1024
	// CostLimit bounds the work of one evaluation (CEL's cost units: about one per operation and per element
	// a comprehension visits).
	CostLimit = 10_000
	// ProgramsBytes bounds the memory of the compiled programs kept for reuse (estimated, see programCost):
	// about 9,000 programs of short expressions, or 80 of 1 KB full of regexes.
	ProgramsBytes = 32 << 20
	// Decoded values are shared: a record filtered by many streams is decoded once, not once per stream.
	// decodedBudget is the memory the latest decoded values may take (estimated, see entryCost): 32 MiB holds
	// about 36,000 values of 200 bytes, 36 s of a topic at 1,000 records/s. decodedMax is the largest value
	// kept.
	decodedBudget = 32 << 20
	decodedMax    = 4 << 10
	// CacheBytes is the memory the package's caches (programs, decoded values) may hold together, counted in
	// a pod's memory (the chart's memory limit).
	CacheBytes = ProgramsBytes + decodedBudget
)

// programCost estimates what a compiled program takes, from its expression's length and its regexes' program
// sizes (measured: 3.4 KiB for a 40-byte expression, 28 to 72 KiB for 1 KB ones, about 65 bytes per regex
// instruction).
func programCost(exprLen, regexInsts int) int { return 2048 + 80*exprLen + 80*regexInsts }

// ErrInvalid is an expression that cannot be a filter: too long, not CEL, or not a boolean.
var ErrInvalid = errors.New("valuefilter: invalid filter")

// Program is a compiled filter. Safe for concurrent use.
type Program struct {
	src  string
	prg  cel.Program
	cost int         // programCost
	both [2]*Program // for one made by And: the two it needs, each with its own limits; prg is nil
}

// String returns the expression.
func (p *Program) String() string { return p.src }

var (
	env = sync.OnceValues(func() (*cel.Env, error) {
		return cel.NewEnv(
			cel.Variable("value", cel.DynType),
			cel.Variable("key", cel.StringType),
			cel.Variable("type", cel.StringType),
			cel.CrossTypeNumericComparisons(true),
			cel.RegexProgramSizeLimit(MaxRegexSize),
			cel.ASTValidators(cel.ValidateRegexLiterals()),
		)
	})
	programs = newProgramCache(ProgramsBytes)
	decoded  = newValueCache(decodedBudget)
)

// record is the variables of an evaluation, resolved by name without a map.
type record struct {
	value any
	key   []byte
	typ   string
}

// ResolveName implements interpreter.Activation.
func (r *record) ResolveName(name string) (any, bool) {
	switch name {
	case "value":
		return r.value, true
	case "key":
		return string(r.key), true
	case "type":
		return r.typ, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (r *record) Parent() interpreter.Activation { return nil }

// decode returns value decoded from JSON, or as a string when it is not JSON; nil for nil. The result is
// shared between the streams filtering the same value, read only (CEL does not change its input).
func decode(value []byte) any {
	if value == nil {
		return nil
	}
	small := len(value) <= decodedMax
	if small {
		if v, ok := decoded.get(value); ok {
			return v
		}
	}
	var v any
	if json.Unmarshal(value, &v) != nil {
		v = string(value)
	}
	if small {
		decoded.add(value, v)
	}
	return v
}

// Compile returns the program of expr, compiled once per distinct expression. Its error wraps ErrInvalid and
// says what is wrong in one line.
func Compile(expr string) (*Program, error) {
	if p, ok := programs.get(expr); ok {
		return p, nil
	}
	if len(expr) > MaxLength {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(expr), MaxLength)
	}
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalid)
	}
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("valuefilter: environment: %w", err)
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.ReplaceAll(iss.Err().Error(), "\n", " "))
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("%w: the expression is a %s, want a boolean", ErrInvalid, t)
	}
	sizes, insts, err := regexSizes(ast)
	if err != nil {
		return nil, err
	}
	// OptOptimize compiles each constant regex once, here, instead of at every evaluation.
	prg, err := e.Program(ast, cel.CostLimit(CostLimit), cel.EvalOptions(cel.OptOptimize), regexCost(sizes))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	p := &Program{src: expr, prg: prg, cost: programCost(len(expr), insts)}
	programs.add(p)
	return p, nil
}

// And returns the program that matches what both a and b match (either may be nil: the other alone). It is
// not compiled again: each keeps its own limits (length, regexes, cost), so a token's filter of 1024 bytes
// and a query's of 1024 make a valid program, which one expression of both would not be.
func And(a, b *Program) (*Program, error) {
	switch {
	case a == nil:
		return b, nil
	case b == nil:
		return a, nil
	}
	return &Program{src: "(" + a.src + ") && (" + b.src + ")", both: [2]*Program{a, b}}, nil
}

// Match says whether the record matches: value its value (JSON, else taken as a string; nil for a
// tombstone, which is null), key its key, typ its event type as a client sees it.
func (p *Program) Match(value, key []byte, typ string) bool {
	return p.match(&record{value: decode(value), key: key, typ: typ})
}

func (p *Program) match(r *record) bool {
	if p.prg == nil {
		return p.both[0].match(r) && p.both[1].match(r)
	}
	out, _, err := p.prg.Eval(r)
	return err == nil && out == types.True
}
