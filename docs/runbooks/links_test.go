package runbooks

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks: every relative link of the docs (docs/, its runbooks, the README and the chart's README)
// names a file that exists, and a heading of it when it has an anchor (GitHub's slugs), so that a renamed
// heading cannot leave a link to nothing. It needs no Kafka.
func TestDocLinks(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join(root, "docs", "runbooks", "*.md"))
	pages = append(append(pages, more...), filepath.Join(root, "README.md"), filepath.Join(root, "helm", "ssegate", "README.md"))
	slugs := map[string]map[string]bool{}
	slugsOf := func(page string) map[string]bool {
		if s, ok := slugs[page]; ok {
			return s
		}
		s := headingSlugs(t, page)
		slugs[page] = s
		return s
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		for i, line := range proseLines(t, page) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), path)
				}
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s:%d links to %s, which does not exist", rel(page), i+1, target)
					continue
				}
				if anchor != "" && strings.HasSuffix(file, ".md") && !slugsOf(file)[anchor] {
					t.Errorf("%s:%d links to %s, which has no heading #%s", rel(page), i+1, rel(file), anchor)
				}
			}
		}
	}
}

// proseLines returns page's lines with those inside fenced code blocks blanked (their brackets are code).
func proseLines(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	fenced := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// headingSlugs returns the anchors GitHub gives page's headings: lower case, without punctuation, spaces as
// hyphens, and -1, -2, ... after a slug seen before.
func headingSlugs(t *testing.T, page string) map[string]bool {
	t.Helper()
	linkText := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(t, page) {
		text, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " ")
		if !strings.HasPrefix(l, "#") || !ok {
			continue
		}
		text = linkText.ReplaceAllString(text, "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}
