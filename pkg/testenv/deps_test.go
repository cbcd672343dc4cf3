package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sparsePath returns a PATH of one folder holding links to the named commands only, so that deps.sh sees a
// machine that lacks everything else.
func sparsePath(t *testing.T, commands ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range commands {
		target, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s is needed to run this test: %v", name, err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runDeps runs deps.sh with the arguments under the given PATH and returns its exit status and stderr.
func runDeps(t *testing.T, path string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"deps.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String()
	default:
		t.Fatalf("deps.sh %v: %v", args, err)
		return 0, ""
	}
}

// The commands deps.sh itself runs, which every machine has.
var essentials = []string{"bash", "sed", "dirname", "id", "go"}

func TestDepsNamesWhatIsMissing(t *testing.T) {
	code, stderr := runDeps(t, sparsePath(t, essentials...), "check")
	if code != 1 {
		t.Fatalf("check on a bare machine: exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, pkg := range []string{"default-jre-headless", "maven", "redis-server", "nodejs", "npm", "kcat", "jq", "curl", "openssl"} {
		if !strings.Contains(stderr, " "+pkg) {
			t.Errorf("check does not name package %s:\n%s", pkg, stderr)
		}
	}
	if !strings.Contains(stderr, "apt-get install -y --no-install-recommends default-jre-headless maven") {
		t.Errorf("check does not give the one command to run:\n%s", stderr)
	}
	if strings.Contains(stderr, "iproute2") {
		t.Errorf("the test tier asks for the node's iproute2:\n%s", stderr)
	}
	if _, k8s := runDeps(t, sparsePath(t, essentials...), "check", "k8s"); !strings.Contains(k8s, "iproute2") {
		t.Errorf("the k8s tier does not ask for iproute2:\n%s", k8s)
	}
}

func TestDepsWithoutAptStopsAtOnce(t *testing.T) {
	code, stderr := runDeps(t, sparsePath(t, essentials...), "install")
	if code != 1 || !strings.Contains(stderr, "has no apt-get") || !strings.Contains(stderr, "redis-server") {
		t.Fatalf("install without apt-get: exit %d, stderr:\n%s", code, stderr)
	}
}

func TestDepsWithoutGo(t *testing.T) {
	code, stderr := runDeps(t, sparsePath(t, "bash", "sed", "dirname", "id"), "check")
	if code != 1 || !strings.Contains(stderr, "go not found: install Go 1.") {
		t.Fatalf("check without go: exit %d, stderr:\n%s", code, stderr)
	}
}

// On the machine that runs the tests, `make test` has just run deps.sh install: check must find nothing
// missing there, or the list and the install disagree.
func TestDepsCompleteAfterInstall(t *testing.T) {
	if os.Getenv("CI") == "" {
		t.Skip("only where make test installed the dependencies (CI=true)")
	}
	if code, stderr := runDeps(t, os.Getenv("PATH"), "check"); code != 0 {
		t.Fatalf("check after install: exit %d:\n%s", code, stderr)
	}
}
