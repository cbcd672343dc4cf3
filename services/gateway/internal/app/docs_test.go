package app

import (
	"os"
	"strings"
	"testing"
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
