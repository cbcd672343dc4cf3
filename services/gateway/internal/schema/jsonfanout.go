package schema

import (
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxJSONFanOut bounds the subschemas a JSON Schema expands to, each "$ref" followed as if its target were
// written in its place (a reference back to a schema being expanded counts once: recursion follows the
// value, which is bounded). Validation applies every subschema of anyOf, oneOf and allOf to the same value,
// so a schema that reuses a definition twice at each of n levels validates a one-byte value in 2^n steps;
// bounded when it compiles, a value costs at most this many steps per node of it.
const maxJSONFanOut = 20000

// checkFanOut returns an error when s expands to more than maxJSONFanOut subschemas.
func checkFanOut(s *jsonschema.Schema) error {
	f := fanOut{cost: map[*jsonschema.Schema]int{}, open: map[*jsonschema.Schema]bool{}}
	if n := f.of(s); n > maxJSONFanOut {
		return fmt.Errorf("the schema expands to more than %d subschemas (anyOf, oneOf, allOf or $ref reused at every level)", maxJSONFanOut)
	}
	return nil
}

// fanOut counts the subschemas a schema expands to, each schema's count computed once.
type fanOut struct {
	cost map[*jsonschema.Schema]int
	open map[*jsonschema.Schema]bool // being counted: a reference back to it is recursion
}

func (f *fanOut) of(s *jsonschema.Schema) int {
	if s == nil {
		return 0
	}
	if n, ok := f.cost[s]; ok {
		return n
	}
	if f.open[s] {
		return 1
	}
	f.open[s] = true
	n := 1
	for _, c := range children(s) {
		n += f.of(c)
		if n > maxJSONFanOut {
			break // saturated: the exact count does not matter
		}
	}
	delete(f.open, s)
	f.cost[s] = n
	return n
}

// children lists the subschemas that validation may apply, to the value or to its parts.
func children(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{
		s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
		s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema,
	}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	out = append(out, s.PrefixItems...)
	for _, c := range s.Properties {
		out = append(out, c)
	}
	for _, c := range s.PatternProperties {
		out = append(out, c)
	}
	for _, c := range s.DependentSchemas {
		out = append(out, c)
	}
	for _, d := range s.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok {
			out = append(out, c)
		}
	}
	for _, a := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch a := a.(type) {
		case *jsonschema.Schema:
			out = append(out, a)
		case []*jsonschema.Schema:
			out = append(out, a...)
		}
	}
	return out
}
