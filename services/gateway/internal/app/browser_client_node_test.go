package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestBrowserClientNode runs the checks of the client module that need no browser (testdata/client, with an
// EventSource and a sessionStorage of their own) in Node: topics named constructor or __proto__ in an id of
// several topics, and the default position key of two streams of one path with other parameters.
func TestBrowserClientNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is required under CI (the client module's checks)")
		}
		t.Skip("node not installed")
	}
	out, err := exec.Command(node, filepath.Join("testdata", "client", "ssegate.test.mjs")).CombinedOutput()
	if err != nil {
		t.Fatalf("the client module's checks failed: %v\n%s", err, out)
	}
}
