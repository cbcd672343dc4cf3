package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/layout"
)

func spec(t *testing.T, bins ...platformBinary) Spec {
	t.Helper()
	return Spec{
		Service: "gateway", Binaries: bins, Version: "v0.0.0-test", Revision: "abc123",
		Source: "https://github.com/ssegate/ssegate", CACerts: "/etc/ssl/certs/ca-certificates.crt",
		Created: time.Unix(1764720000, 0).UTC(),
	}
}

func fakeBinary(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// untar extracts a tarball into a new folder.
func untar(t *testing.T, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, h.Name)
		if h.Typeflag == tar.TypeDir {
			_ = os.MkdirAll(p, 0o755)
			continue
		}
		b, _ := io.ReadAll(tr)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReproducible: the same inputs give the same bytes and digest, built in different folders at
// different times; a different binary gives another digest.
func TestReproducible(t *testing.T) {
	bin := fakeBinary(t, "binary one")
	var outs [][]byte
	var digests []string
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "img.tar")
		d, err := Build(spec(t, platformBinary{"linux", "amd64", bin}), out)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(out)
		outs, digests = append(outs, b), append(digests, d.String())
		if i == 0 {
			time.Sleep(1100 * time.Millisecond) // a clock that moved must not change anything
		}
	}
	if !bytes.Equal(outs[0], outs[1]) || digests[0] != digests[1] {
		t.Fatalf("two builds differ: %s vs %s", digests[0], digests[1])
	}
	other, err := Build(spec(t, platformBinary{"linux", "amd64", fakeBinary(t, "binary two")}), filepath.Join(t.TempDir(), "x.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if other.String() == digests[0] {
		t.Fatal("another binary gave the same digest")
	}
}

// TestImageContents: one layer with the binary, CA certificates and users, no shell; a non-root user, the
// entrypoint and the OCI labels; the name containerd imports it under.
func TestImageContents(t *testing.T) {
	out := filepath.Join(t.TempDir(), "img.tar")
	digest, err := Build(spec(t, platformBinary{"linux", "amd64", fakeBinary(t, "the binary")}), out)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out)
	p, err := layout.FromPath(untar(t, data))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != digest ||
		im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "ssegate/gateway:v0.0.0-test" {
		t.Fatalf("index.json: %+v", im.Manifests)
	}
	img, err := p.Image(digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.Config.Entrypoint[0] != "/usr/local/bin/gateway" || cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Fatalf("config: %+v", cf.Config)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version": "v0.0.0-test", "org.opencontainers.image.revision": "abc123",
		"org.opencontainers.image.source": "https://github.com/ssegate/ssegate",
	} {
		if got := cf.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	names := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = h
	}
	for _, want := range []string{"usr/local/bin/gateway", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group"} {
		if names[want] == nil {
			t.Errorf("the layer has no %s", want)
		}
	}
	if h := names["usr/local/bin/gateway"]; h != nil && h.Mode&0o111 == 0 {
		t.Errorf("the binary is not executable: %o", h.Mode)
	}
	for name := range names {
		if strings.HasSuffix(name, "/sh") || strings.Contains(name, "bin/bash") {
			t.Errorf("the image has a shell: %s", name)
		}
	}
}

// TestMultiArch: one binary per platform makes an index with one image per platform.
func TestMultiArch(t *testing.T) {
	out := filepath.Join(t.TempDir(), "img.tar")
	digest, err := Build(spec(t, platformBinary{"linux", "amd64", fakeBinary(t, "amd64")}, platformBinary{"linux", "arm64", fakeBinary(t, "arm64")}), out)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(out)
	p, _ := layout.FromPath(untar(t, data))
	ii, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	inner, err := ii.ImageIndex(digest)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := inner.IndexManifest()
	var plats []string
	for _, m := range im.Manifests {
		plats = append(plats, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	if strings.Join(plats, ",") != "linux/amd64,linux/arm64" {
		t.Fatalf("platforms %v", plats)
	}
}

// TestServiceBinaryIsStatic: the service binaries as `make image` builds them have no dynamic loader and no
// shared libraries, so they run in an image with nothing else.
func TestServiceBinaryIsStatic(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF check")
	}
	out := filepath.Join(t.TempDir(), "gateway")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out, "../../services/gateway")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary names a dynamic loader")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary needs %v", libs)
	}
}
