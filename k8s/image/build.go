package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is what an image is built from.
type Spec struct {
	// Service names the binary in the image (/usr/local/bin/<service>) and the image (ssegate/<service>).
	Service string
	// Binaries are the service's static binaries, one per platform.
	Binaries []platformBinary
	// Version, Revision and Source go into the OCI labels; Version is the tag.
	Version, Revision, Source string
	// CACerts is the PEM bundle copied to /etc/ssl/certs/ca-certificates.crt.
	CACerts string
	// Created is the time of every file and of the image itself.
	Created time.Time
}

type platformBinary struct {
	OS, Arch, Path string
}

// nonRoot is the user the image runs as.
const nonRoot = 65532

// Ref returns the image's name and tag, as containerd and registries know it.
func (s Spec) Ref() string { return "ssegate/" + s.Service + ":" + s.Version }

// Build writes the image as an OCI image layout tarball to out and returns the digest of its manifest (one
// platform) or index (several).
func Build(s Spec, out string) (v1.Hash, error) {
	if len(s.Binaries) == 0 {
		return v1.Hash{}, errors.New("no binary")
	}
	certs, err := os.ReadFile(s.CACerts)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("CA certificates: %w", err)
	}
	var imgs []v1.Image
	for _, b := range s.Binaries {
		img, err := s.image(b, certs)
		if err != nil {
			return v1.Hash{}, err
		}
		imgs = append(imgs, img)
	}
	dir, err := os.MkdirTemp("", "ssegate-image-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	refs := layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": s.Ref(),
		"io.containerd.image.name":          "docker.io/" + s.Ref(),
	})
	var digest v1.Hash
	if len(imgs) == 1 {
		if digest, err = imgs[0].Digest(); err == nil {
			err = p.AppendImage(imgs[0], refs)
		}
	} else {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for i, img := range imgs {
			b := s.Binaries[i]
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
				Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: b.OS, Architecture: b.Arch}},
			})
		}
		if digest, err = idx.Digest(); err == nil {
			err = p.AppendIndex(idx, refs)
		}
	}
	if err != nil {
		return v1.Hash{}, err
	}
	if err := tarDir(dir, out, s.Created); err != nil {
		return v1.Hash{}, err
	}
	return digest, nil
}

// image builds the image of one platform: one layer with the binary, the CA certificates and the users.
func (s Spec) image(b platformBinary, certs []byte) (v1.Image, error) {
	bin, err := os.ReadFile(b.Path)
	if err != nil {
		return nil, fmt.Errorf("binary: %w", err)
	}
	files := []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", nonRoot)},
		{name: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil,
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRoot, nonRoot)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: nonRoot},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: "usr/local/bin/" + s.Service, mode: 0o755, data: bin},
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, files, s.Created); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = b.OS, b.Arch
	cf.Created = v1.Time{Time: s.Created}
	cf.History = []v1.History{{Created: v1.Time{Time: s.Created}, CreatedBy: "ssegate k8s/image", Comment: s.Service + " " + s.Version}}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonRoot, nonRoot),
		Entrypoint: []string{"/usr/local/bin/" + s.Service},
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "ssegate " + s.Service,
			"org.opencontainers.image.version":  s.Version,
			"org.opencontainers.image.revision": s.Revision,
			"org.opencontainers.image.source":   s.Source,
			"org.opencontainers.image.created":  s.Created.Format(time.RFC3339),
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
	return mutate.ConfigFile(img, cf)
}

type file struct {
	name string
	mode int64
	data []byte
	dir  bool
	uid  int
}

// writeTar writes files as a tar stream with every time set to at and owners numeric, in the given order.
func writeTar(w io.Writer, files []file, at time.Time) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{
			Name: f.name, Mode: f.mode, ModTime: at, Uid: f.uid, Gid: f.uid, Format: tar.FormatPAX,
			Typeflag: tar.TypeReg, Size: int64(len(f.data)),
		}
		if f.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// tarDir writes the tree under dir to the tarball out, entries sorted, every time set to at.
func tarDir(dir, out string, at time.Time) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	var files []file
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			files = append(files, file{name: rel + "/", mode: 0o755, dir: true})
			return nil
		}
		data, err := root.ReadFile(rel)
		if err != nil {
			return err
		}
		files = append(files, file{name: rel, mode: 0o644, data: data})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(files, func(a, b file) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	var buf bytes.Buffer
	if err := writeTar(&buf, files, at); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644) //nolint:gosec // an image is meant to be read
}
