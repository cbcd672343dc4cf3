package browsertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Diagnostic is one finding of the AsyncAPI parser.
type Diagnostic struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Path    string `json:"path"`
}

// Channel is a channel of a parsed AsyncAPI document: its id, address and the ids of its messages.
type Channel struct {
	ID       string   `json:"id"`
	Address  string   `json:"address"`
	Messages []string `json:"messages"`
}

// AsyncAPIResult is what the AsyncAPI parser says of a document.
type AsyncAPIResult struct {
	Errors   []Diagnostic `json:"errors"`
	Warnings []Diagnostic `json:"warnings"`
	Channels []Channel    `json:"channels"`
}

// ParseAsyncAPI runs the AsyncAPI project's own parser (@asyncapi/parser, asyncapi.mjs) on doc under node.
// Without node or the npm packages the test is skipped, and fails under CI=true (make test installs both).
func ParseAsyncAPI(t testing.TB, doc []byte) AsyncAPIResult {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, "node_modules", "@asyncapi", "parser"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the AsyncAPI parser must run under CI (make test installs node and its npm packages): %v", err)
		}
		t.Skipf("the AsyncAPI parser cannot run: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), node, filepath.Join(dir, "asyncapi.mjs")) //nolint:gosec // node and the kit's own script
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(doc)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("asyncapi.mjs: %v\n%s", err, stderr.Bytes())
	}
	var res AsyncAPIResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("asyncapi.mjs printed %q (%v); stderr:\n%s", out, err, stderr.Bytes())
	}
	return res
}
