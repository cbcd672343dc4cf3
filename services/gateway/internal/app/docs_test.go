package app

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// TestSettingsDocumented: every gateway setting has a row in docs/gateway.md's settings table naming its flag
// and every environment variable that sets it, so that a setting cannot ship undocumented.
func TestSettingsDocumented(t *testing.T) {
	page, err := os.ReadFile("../../../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // flag name -> its row
	for _, line := range strings.Split(string(page), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Trim(strings.TrimSpace(strings.Split(line, "|")[1]), "`")
		rows[strings.TrimPrefix(first, "--")] = line
	}
	c := defaults()
	for _, s := range settingsOf(&c) {
		row, ok := rows[s.Name]
		if !ok {
			t.Errorf("setting %s has no row in docs/gateway.md's settings table", s.Name)
			continue
		}
		for _, env := range s.Envs {
			if !s.FlagOnly && !strings.Contains(row, "`"+env+"`") {
				t.Errorf("docs/gateway.md's row of %s does not name %s", s.Name, env)
			}
		}
	}
}

// TestMetricsDocumented: every ssegate_ metric a running gateway exports has a row in docs/gateway.md's
// metrics table, so that a metric cannot ship undocumented; and every row names a metric some code of the
// gateway defines (a documented metric that no longer exists fails too).
func TestMetricsDocumented(t *testing.T) {
	page, err := os.ReadFile("../../../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, line := range strings.Split(string(page), "\n") {
		if name, ok := strings.CutPrefix(line, "| `ssegate_"); ok {
			documented["ssegate_"+name[:strings.IndexByte(name, '`')]] = true
		}
	}
	g := startGateway(t, []string{kafkatest.NewTopic(t, 1, nil)}, nil)
	g.waitReady(t)
	_, body := get(t, g.admin+"/metrics")
	exported := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE ssegate_"); ok {
			name := "ssegate_" + strings.Fields(rest)[0]
			exported[name] = true
			if !documented[name] {
				t.Errorf("%s is exported but has no row in docs/gateway.md's metrics table", name)
			}
		}
	}
	src := sourceText(t, "../../..")
	for name := range documented {
		if exported[name] {
			continue
		}
		// Not exported yet by an idle gateway (a counter of events that did not happen): its instrument must
		// still exist, under its OpenTelemetry name.
		otel := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_total"), "_seconds"), "_bytes")
		otel = strings.ReplaceAll(otel, "_", ".")
		if !strings.Contains(src, `"`+otel) {
			t.Errorf("docs/gateway.md documents %s, which no code of the gateway defines (looked for %q)", name, otel)
		}
	}
}

// TestMetricNamesInDocs: every metric name the docs mention (pages, runbooks, the chart's) is a row of a
// metrics table (docs/gateway.md's or docs/ingest.md's), or one of its histogram's series: prose cannot name a
// metric that does not exist. Names that are not metrics (the auth cookie) are listed here.
func TestMetricNamesInDocs(t *testing.T) {
	notMetrics := map[string]bool{"ssegate_token": true}
	rows := map[string]bool{}
	for _, page := range []string{"gateway.md", "ingest.md"} {
		b, err := os.ReadFile("../../../../docs/" + page)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "| `ssegate_"); ok {
				rows["ssegate_"+name[:strings.IndexByte(name, '`')]] = true
			}
		}
	}
	// A full name: not a prefix (ssegate_replay_...) or the start of a pattern (ssegate_resync(s|...)).
	name := regexp.MustCompile(`ssegate_[a-z_]*[a-z]\b[^_(|]`)
	pages, err := filepath.Glob("../../../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("../../../../docs/runbooks/*.md")
	pages = append(append(pages, more...), "../../../../helm/ssegate/README.md")
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllString(string(b), -1) {
			n := m[:len(m)-1]
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_count"), "_sum")
			if !rows[n] && !rows[base] && !notMetrics[n] {
				t.Errorf("%s names %s, which no metrics table has a row for", filepath.Base(page), n)
			}
		}
	}
}

// sourceText returns the Go source below dir, tests left out, as one string.
func sourceText(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		b.Write(src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
