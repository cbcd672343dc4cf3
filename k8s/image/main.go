// Command image builds an OCI image of one ssegate service, without a Docker engine, as an OCI image layout
// in a tarball that `ctr images import`, `skopeo copy oci-archive:...` and `crane push` take.
//
// The image holds the static binary, CA certificates and a passwd/group naming a non-root user, and nothing
// else: no shell, no package manager. It runs as that user (65532). Its labels carry the version, source and
// revision. It is reproducible: every time and owner in it is fixed (the creation time comes from a flag,
// the build's SOURCE_DATE_EPOCH), entries are sorted and compression is deterministic, so the same inputs
// give the same digest.
//
//	image --service gateway --binary linux/amd64=.run/image/amd64/gateway [--binary linux/arm64=...] \
//	      --version v1.2.3 --revision abc123 --created 1764720000 --out ssegate-gateway.tar
//
// With several --binary flags the image is an index of one image per platform (a multi-arch image).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// binaries is a repeatable os/arch=path flag.
type binaries []platformBinary

func (b *binaries) String() string { return fmt.Sprint(*b) }

func (b *binaries) Set(v string) error {
	plat, path, ok := strings.Cut(v, "=")
	osName, arch, ok2 := strings.Cut(plat, "/")
	if !ok || !ok2 || osName == "" || arch == "" || path == "" {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	*b = append(*b, platformBinary{OS: osName, Arch: arch, Path: path})
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var spec Spec
	var bins binaries
	var created int64
	fs.StringVar(&spec.Service, "service", "", "service name: gateway or ingest (required)")
	fs.Var(&bins, "binary", "os/arch=path of the service's static binary; repeat for a multi-arch image (required)")
	fs.StringVar(&spec.Version, "version", "dev", "version label and tag")
	fs.StringVar(&spec.Revision, "revision", "", "source revision label (a commit)")
	fs.StringVar(&spec.Source, "source", "https://github.com/ssegate/ssegate", "source label")
	fs.StringVar(&spec.CACerts, "ca-certs", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle of CA certificates put in the image")
	fs.Int64Var(&created, "created", 0, "creation time in Unix seconds (SOURCE_DATE_EPOCH); every time in the image is this")
	out := fs.String("out", "", "the tarball to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if spec.Service == "" || len(bins) == 0 || *out == "" {
		return errors.New("--service, --binary and --out are required")
	}
	spec.Binaries = bins
	spec.Created = time.Unix(created, 0).UTC()
	digest, err := Build(spec, *out)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n", *out, digest)
	return nil
}
