package browsertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Node returns the node binary and this kit's node_modules folder, which holds the npm packages named (as
// "eventsource", "typescript", ...). Without node or one of them the test is skipped, and fails under CI=true
// (make test installs both).
func Node(t testing.TB, packages ...string) (node, modules string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	modules = filepath.Join(filepath.Dir(file), "node_modules")
	node, err := exec.LookPath("node")
	for _, p := range packages {
		if err == nil {
			_, err = os.Stat(filepath.Join(modules, p, "package.json"))
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and the npm packages %v must be there under CI (make test installs them): %v", packages, err)
		}
		t.Skipf("node or the npm packages %v are missing: %v", packages, err)
	}
	return node, modules
}
