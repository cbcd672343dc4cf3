// Command chartdoc generates the chart's values.schema.json and the values table of its README.md from the
// comments in values.yaml, and with -check fails when the committed files differ from what it generates.
//
// In values.yaml a value is documented by a "# -- text" comment right above it. Types come from the
// defaults; a few values get an enum here.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goccy/go-yaml"
)

// enums restrict values whose default alone does not say what is allowed.
var enums = map[string][]any{
	"kafka.sasl.mechanism":   {"", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"},
	"gateway.keyPartitioner": {"murmur2", "any"},
	"gateway.logLevel":       {"debug", "info", "warn", "error"},
	"image.pullPolicy":       {"Always", "IfNotPresent", "Never"},
	"gateway.service.type":   {"ClusterIP", "NodePort", "LoadBalancer"},
}

// openObjects take keys of the user's own beside their defaults (resources, annotations).
var openObjects = map[string]bool{
	"gateway.resources": true, "ingest.resources": true, "gateway.ingress.annotations": true,
	"metrics.grafanaDashboard.labels": true,
}

// minimums of numeric values.
var minimums = map[string]int{
	"gateway.replicas": 1, "gateway.port": 1, "gateway.adminPort": 1, "gateway.drainSeconds": 0,
	"gateway.endpointPropagationSeconds": 0, "gateway.writeTimeoutSeconds": 1, "gateway.minReadySeconds": 0,
	"gateway.prefill": 0, "gateway.service.port": 1, "ingest.replicas": 0, "ingest.port": 1,
	"gateway.autoscaling.minReplicas": 1, "gateway.autoscaling.maxReplicas": 1,
	"gateway.memory.connections": 0, "gateway.memory.connectionKiB": 0, "gateway.memory.baseMiB": 0,
	"gateway.memory.goMemLimitPercent": 1, "gateway.probes.timeoutSeconds": 1,
	"gateway.probes.startupSeconds": 1, "gateway.probes.startupPeriodSeconds": 1,
	"gateway.probes.readinessPeriodSeconds": 1, "gateway.probes.readinessFailureThreshold": 2,
	"gateway.probes.livenessPeriodSeconds": 1, "gateway.probes.livenessFailureThreshold": 1,
}

func main() {
	chart := flag.String("chart", "helm/ssegate", "the chart's folder")
	check := flag.Bool("check", false, "fail when the committed files differ instead of writing them")
	flag.Parse()
	if err := run(*chart, *check); err != nil {
		fmt.Fprintln(os.Stderr, "chartdoc:", err)
		os.Exit(1)
	}
}

func run(dir string, check bool) error {
	src, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return err
	}
	schema, table, err := Generate(src)
	if err != nil {
		return err
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		return err
	}
	newReadme, err := replaceTable(readme, table)
	if err != nil {
		return err
	}
	files := map[string][]byte{"values.schema.json": schema, "README.md": newReadme}
	for name, want := range files {
		path := filepath.Join(dir, name)
		if check {
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got, want) {
				return fmt.Errorf("%s is not what values.yaml says: run `make helm-docs`", path)
			}
			continue
		}
		if err := os.WriteFile(path, want, 0o644); err != nil { //nolint:gosec // documentation
			return err
		}
	}
	return nil
}

const tableStart, tableEnd = "<!-- values:start -->", "<!-- values:end -->"

func replaceTable(readme []byte, table string) ([]byte, error) {
	s := string(readme)
	a, b := strings.Index(s, tableStart), strings.Index(s, tableEnd)
	if a < 0 || b < a {
		return nil, errors.New("README.md has no " + tableStart + " ... " + tableEnd + " section")
	}
	return []byte(s[:a+len(tableStart)] + "\n" + table + s[b:]), nil
}

// Generate returns the JSON schema and the Markdown table of the values in values.yaml.
func Generate(src []byte) (schema []byte, table string, err error) {
	docs := comments(src)
	var vals yaml.MapSlice
	if err := yaml.UnmarshalWithOptions(src, &vals, yaml.UseOrderedMap()); err != nil {
		return nil, "", err
	}
	var rows []string
	root := object("", vals, docs, &rows)
	for _, r := range rows {
		if strings.HasSuffix(r, "|  |\n") {
			return nil, "", fmt.Errorf("value without a \"# --\" comment: %s", r)
		}
	}
	root["$schema"] = "https://json-schema.org/draft-07/schema#"
	root["title"] = "ssegate chart values"
	schema, err = json.MarshalIndent(root, "", "  ")
	if err != nil {
		return nil, "", err
	}
	table = "| value | default | description |\n|---|---|---|\n" + strings.Join(rows, "")
	return append(schema, '\n'), table, nil
}

func object(prefix string, vals yaml.MapSlice, docs map[string]string, rows *[]string) map[string]any {
	props := map[string]any{}
	for _, it := range vals {
		key := fmt.Sprint(it.Key)
		path := strings.TrimPrefix(prefix+"."+key, ".")
		props[key] = value(path, it.Value, docs, rows)
	}
	return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
}

func value(path string, v any, docs map[string]string, rows *[]string) map[string]any {
	doc := docs[path]
	s := map[string]any{}
	if doc != "" {
		s["description"] = doc
	}
	leaf := func(typ string) {
		s["type"] = typ
		def, _ := json.Marshal(plain(v))
		*rows = append(*rows, fmt.Sprintf("| `%s` | `%s` | %s |\n", path, strings.ReplaceAll(string(def), "|", "\\|"), doc))
	}
	switch x := v.(type) {
	case yaml.MapSlice:
		if len(x) == 0 || openObjects[path] {
			leaf("object")
			s["additionalProperties"] = true
			return s
		}
		o := object(path, x, docs, rows)
		for k, w := range s {
			o[k] = w
		}
		return o
	case []any:
		leaf("array")
	case bool:
		leaf("boolean")
	case uint64, int64, int, float64:
		leaf("integer")
		if m, ok := minimums[path]; ok {
			s["minimum"] = m
		}
	case nil:
		leaf("null")
	default:
		leaf("string")
	}
	if e, ok := enums[path]; ok {
		s["enum"] = e
	}
	return s
}

// comments maps each value's dotted path to its "# --" comment.
func comments(src []byte) map[string]string {
	out := map[string]string{}
	var stack []string // keys by indent level (2 spaces)
	pending := ""
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if strings.HasPrefix(trim, "# --") {
			pending = strings.TrimSpace(strings.TrimPrefix(trim, "# --"))
			continue
		}
		if trim == "" || strings.HasPrefix(trim, "#") || strings.HasPrefix(trim, "-") {
			continue
		}
		key, _, ok := strings.Cut(trim, ":")
		if !ok {
			continue
		}
		depth := (len(line) - len(strings.TrimLeft(line, " "))) / 2
		if depth > len(stack) {
			continue // inside a value (a map default)
		}
		stack = append(stack[:depth], key)
		if pending != "" {
			out[strings.Join(stack, ".")] = pending
			pending = ""
		}
	}
	return out
}

// plain turns ordered maps into maps, for JSON.
func plain(v any) any {
	switch x := v.(type) {
	case yaml.MapSlice:
		m := map[string]any{}
		for _, it := range x {
			m[fmt.Sprint(it.Key)] = plain(it.Value)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	}
	return v
}
