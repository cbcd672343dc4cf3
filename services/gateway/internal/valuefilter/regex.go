package valuefilter

import (
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Limits of the regexes of an expression (the matches function), in instructions of the compiled regex
// program (Go's regexp/syntax; about one per character of a literal, and a repetition {1,n} repeats its
// operand n times: [a-z]{1,100} is 201). A regex is compiled once with its expression, never per evaluation,
// so these bound what a cached program holds as much as what a match costs.
const (
	// MaxRegexSize is the largest regex accepted in an expression.
	MaxRegexSize = 1000
	// MaxRegexTotal is the most instructions all the constant regexes of one expression may have together.
	MaxRegexTotal = 4000
	// regexStepsPerCost is how many steps of a regex match (input bytes times program instructions, the
	// worst case of Go's regexp) count as one unit of CostLimit.
	regexStepsPerCost = 100
)

// regexSizes returns the program size of each constant regex of a checked expression and their sum (a regex
// used twice counts twice: each use is compiled), or an error when one is
// too large (one over MaxRegexSize is refused by the environment's RegexProgramSizeLimit first) or all of them
// together are.
func regexSizes(checked *cel.Ast) (sizes map[string]int, total int, err error) {
	sizes = map[string]int{}
	root := ast.NavigateAST(checked.NativeRep())
	for _, call := range ast.MatchDescendants(root, ast.FunctionMatcher(overloads.Matches)) {
		c := call.AsCall()
		args := c.Args()
		if c.IsMemberFunction() {
			args = append([]ast.Expr{c.Target()}, args...)
		}
		if len(args) != 2 || args[1].Kind() != ast.LiteralKind {
			continue
		}
		pattern, ok := args[1].AsLiteral().Value().(string)
		if !ok {
			continue
		}
		n, err := types.RegexProgramSize(pattern)
		if err != nil {
			return nil, 0, fmt.Errorf("%w: regex %q: %w", ErrInvalid, pattern, err)
		}
		sizes[pattern] = n
		total += n
	}
	if total > MaxRegexTotal {
		return nil, 0, fmt.Errorf("%w: its regexes are %d regex instructions together, at most %d", ErrInvalid, total, MaxRegexTotal)
	}
	return sizes, total, nil
}

// regexCost returns the options that count a match by what it can cost: the input's length times the size
// of the regex program (a constant regex's size known from sizes, another one's measured), or the standard
// estimate (input length times pattern length) when that is more.
func regexCost(sizes map[string]int) cel.ProgramOption {
	std := cost.StandardOverloadTrackers()
	track := func(id string) cost.TrackerOption {
		standard := std[id]
		return cost.OverloadTracker(id, func(args []ref.Val, result ref.Val) *uint64 {
			var c uint64
			if standard != nil {
				if s := standard(args, result); s != nil {
					c = *s
				}
			}
			if len(args) != 2 {
				return &c
			}
			in, ok1 := args[0].Value().(string)
			pattern, ok2 := args[1].Value().(string)
			if !ok1 || !ok2 {
				return &c
			}
			n, ok := sizes[pattern]
			if !ok {
				n, _ = types.RegexProgramSize(pattern) // an invalid one fails the match itself
			}
			if steps := uint64(len(in)+1) * uint64(n) / regexStepsPerCost; steps > c {
				c = steps
			}
			return &c
		})
	}
	return cel.CostTrackerOptions(track(overloads.Matches), track(overloads.MatchesString))
}
