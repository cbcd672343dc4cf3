package clientjs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ssegate/ssegate/pkg/browsertest"
)

// tsc checks testdata/usage.ts against the package as npm would install it (node_modules/ssegate: its
// package.json's exports, ssegate.d.ts, ssegate.js), with decl in place of ssegate.d.ts, under
// tsc --noEmit --strict. It returns the compiler's output and whether it passed.
func tsc(t *testing.T, decl string) (string, bool) {
	t.Helper()
	node, modules := browsertest.Node(t, "typescript", "eventsource")
	dir := t.TempDir()
	pkg := filepath.Join(dir, "node_modules", "ssegate")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{filepath.Join(pkg, "ssegate.d.ts"): decl}
	for _, name := range []string{"package.json", "ssegate.js"} {
		files[filepath.Join(pkg, name)] = read(t, name)
	}
	for _, name := range []string{"usage.ts", "tsconfig.json"} {
		files[filepath.Join(dir, name)] = read(t, filepath.Join("testdata", name))
	}
	for path, text := range files {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(modules, "eventsource"), filepath.Join(dir, "node_modules", "eventsource")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, filepath.Join(modules, "typescript", "bin", "tsc"), "-p", "tsconfig.json", "--noEmit", "--strict") //nolint:gosec // node and the pinned compiler
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDeclarations: ssegate.d.ts declares every export as testdata/usage.ts uses it (with the eventsource
// package's EventSource and a WebSocket), found through package.json's exports as a program importing
// "ssegate" finds it; and the misuses usage.ts marks with @ts-expect-error are refused: a declaration that lets
// one through (here, any string as transport) fails the check.
func TestDeclarations(t *testing.T) {
	decl := read(t, "ssegate.d.ts")
	if out, ok := tsc(t, decl); !ok {
		t.Fatalf("tsc --strict over testdata/usage.ts:\n%s", out)
	}
	loose := strings.Replace(decl, `transport?: "eventsource" | "websocket";`, `transport?: string;`, 1)
	if loose == decl {
		t.Fatal("ssegate.d.ts no longer declares transport as this test expects")
	}
	out, ok := tsc(t, loose)
	if ok || !strings.Contains(out, "TS2578") {
		t.Fatalf("with transport declared a string, tsc must report the unused @ts-expect-error (TS2578); it said (passed %v):\n%s", ok, out)
	}
}

// TestServedSource: Source is ssegate.js as it is in the package (what /ssegate.js serves and npm ships).
func TestServedSource(t *testing.T) {
	if string(Source) != read(t, "ssegate.js") || !strings.Contains(string(Source), "export function connect(") {
		t.Fatal("Source is not ssegate.js")
	}
}
