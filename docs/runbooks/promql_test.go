package runbooks

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// promqlFunctions are PromQL's functions and aggregation operators (Prometheus 3); a name followed by "(" must
// be one of them.
var promqlFunctions = strings.Fields(`
	sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
	abs absent absent_over_time ceil changes clamp clamp_max clamp_min day_of_month day_of_week day_of_year
	days_in_month delta deriv exp floor histogram_avg histogram_count histogram_fraction histogram_quantile
	histogram_stddev histogram_stdvar histogram_sum hour idelta increase irate label_join label_replace ln
	log2 log10 minute month predict_linear rate resets round scalar sgn sort sort_desc sort_by_label
	sort_by_label_desc sqrt time timestamp vector year avg_over_time min_over_time max_over_time
	sum_over_time count_over_time quantile_over_time stddev_over_time stdvar_over_time last_over_time
	present_over_time mad_over_time acos acosh asin asinh atan atanh cos cosh sin sinh tan tanh deg pi rad`)

// promqlKeywords are words of PromQL that are not metric names; the modifiers among them take a label list.
var (
	promqlKeywords  = strings.Fields("and or unless bool offset by without on ignoring group_left group_right inf nan")
	promqlModifiers = strings.Fields("by without on ignoring group_left group_right")
)

var (
	promqlIdent    = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlNumber   = regexp.MustCompile(`^(0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?)`)
	promqlDuration = regexp.MustCompile(`^(([0-9]+(ms|s|m|h|d|w|y))+|\$__rate_interval|\$__interval|\$__range)$`)
	promqlOperator = regexp.MustCompile(`^(==|!=|>=|<=|=~|!~|[-+*/%^<>=,@])`)
)

// promqlMetrics checks the expression as far as a lexer can, without Prometheus's parser: brackets balance and
// nest, strings end, every range selector is a duration (or a Grafana interval variable), every name called is
// a PromQL function, and every label list follows a modifier. It returns the metric names the expression
// selects (not label names, functions or keywords).
func promqlMetrics(expr string) ([]string, error) {
	var metrics, stack []string
	s := expr
	prevIdent := "" // the identifier just before, when the last token was one
	for s != "" {
		switch c := s[0]; {
		case c == ' ' || c == '\t' || c == '\n':
			s = s[1:]
			continue
		case c == '"' || c == '\'' || c == '`':
			end := 1
			for end < len(s) && s[end] != c {
				if s[end] == '\\' && c != '`' {
					end++
				}
				end++
			}
			if end >= len(s) {
				return nil, fmt.Errorf("string not closed: %s", s)
			}
			s = s[end+1:]
		case c == '(' || c == '{':
			if c == '(' && prevIdent != "" && !slices.Contains(promqlFunctions, prevIdent) && !slices.Contains(promqlModifiers, prevIdent) {
				return nil, fmt.Errorf("%s( is not a PromQL function", prevIdent)
			}
			if c == '(' && slices.Contains(promqlModifiers, prevIdent) {
				end := strings.IndexByte(s, ')')
				if end < 0 {
					return nil, fmt.Errorf("label list after %s not closed", prevIdent)
				}
				for _, l := range strings.Split(s[1:end], ",") {
					if l = strings.TrimSpace(l); l != "" && !promqlIdent.MatchString(l) {
						return nil, fmt.Errorf("label list after %s: %q is not a label name", prevIdent, l)
					}
				}
				s = s[end+1:]
				break
			}
			stack = append(stack, string(c))
			s = s[1:]
			if c == '{' {
				// Label matchers: names, operators and strings, up to the closing brace.
				end := 0
				for end < len(s) && s[end] != '}' {
					if s[end] == '"' {
						q := strings.IndexByte(s[end+1:], '"')
						if q < 0 {
							return nil, fmt.Errorf("string not closed in matchers: %s", s)
						}
						end += q + 1
					}
					end++
				}
				if end >= len(s) {
					return nil, fmt.Errorf("matchers not closed: %s", expr)
				}
				if m := strings.TrimSpace(s[:end]); m != "" && !regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*"[^"]*"\s*,?\s*)+$`).MatchString(m) {
					return nil, fmt.Errorf("matchers %q", m)
				}
				s = s[end:]
			}
		case c == '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, fmt.Errorf("range not closed: %s", s)
			}
			r := s[1:end]
			for _, part := range strings.Split(r, ":") {
				if part != "" && !promqlDuration.MatchString(part) {
					return nil, fmt.Errorf("range [%s]: %q is not a duration", r, part)
				}
			}
			s = s[end+1:]
		case c == ')' || c == '}':
			want := map[byte]string{')': "(", '}': "{"}[c]
			if len(stack) == 0 || stack[len(stack)-1] != want {
				return nil, fmt.Errorf("unbalanced %q in %s", c, expr)
			}
			stack = stack[:len(stack)-1]
			s = s[1:]
		case promqlIdent.MatchString(s):
			id := promqlIdent.FindString(s)
			s = s[len(id):]
			rest := strings.TrimLeft(s, " \t\n")
			aggregation := regexp.MustCompile(`^(by|without)\s*\(`).MatchString(rest) && slices.Contains(promqlFunctions, id)
			if !strings.HasPrefix(rest, "(") && !slices.Contains(promqlKeywords, id) && !aggregation {
				metrics = append(metrics, id)
			}
			prevIdent = id
			continue
		case promqlNumber.MatchString(s) && promqlNumber.FindString(s) != "":
			s = s[len(promqlNumber.FindString(s)):]
		case promqlOperator.MatchString(s):
			s = s[len(promqlOperator.FindString(s)):]
		default:
			return nil, fmt.Errorf("unexpected %q in %s", s, expr)
		}
		prevIdent = ""
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("%v not closed in %s", stack, expr)
	}
	return metrics, nil
}

func TestPromQLLexer(t *testing.T) {
	tests := []struct {
		expr    string
		metrics []string
		err     string
	}{
		{`max by (namespace, pod) (ssegate_consumer_lag) > 1000`, []string{"ssegate_consumer_lag"}, ""},
		{`sum by (topic) (rate(ssegate_frames_written_total{namespace=~"$namespace", topic=~"$topic"}[$__rate_interval]))`, []string{"ssegate_frames_written_total"}, ""},
		{`(time() - max by (s) (a_seconds) > 300) and on (s) (sum by (s) (increase(b_total[5m])) > 0)`, []string{"a_seconds", "b_total"}, ""},
		{`ssegate_ring_frames / rate(ssegate_ring_evicted_total[5m])`, []string{"ssegate_ring_frames", "ssegate_ring_evicted_total"}, ""},
		{`kube_pod_status_ready{condition="true", pod=~"x-gateway-[0-9]+"} == 0`, []string{"kube_pod_status_ready"}, ""},
		{`max_over_time(x[1h:5m])`, []string{"x"}, ""},
		{`sum(rate(x[5m])`, nil, "not closed"},
		{`sum(rate(x[5m])))`, nil, "unbalanced"},
		{`rate(x[5 minutes])`, nil, "not a duration"},
		{`sums(x)`, nil, "not a PromQL function"},
		{`x{topic="a}`, nil, "not closed"},
		{`sum by (topic, "x") (y)`, nil, "not a label name"},
		{`x{topic}`, nil, "matchers"},
	}
	for _, tc := range tests {
		got, err := promqlMetrics(tc.expr)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.expr, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.metrics) {
			t.Errorf("%s: %v, %v; want %v", tc.expr, got, err, tc.metrics)
		}
	}
}
