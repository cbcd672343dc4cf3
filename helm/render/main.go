// Command render prints the chart's objects for a user without the helm command, as `helm template` does:
// the Helm SDK renders helm/ssegate with the chart's defaults, the values files and the --set values given,
// checked against values.schema.json, and the objects go to stdout, ready for `kubectl apply -f -`.
//
//	go run ./helm/render -f my-values.yaml --set gateway.topics={orders} --namespace events | kubectl -n events apply -f -
//
// The chart's test pod and its notes are left out.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/getter"
)

// list is a repeatable string flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	var opts values.Options
	fs.Var((*list)(&opts.ValueFiles), "f", "a values file (repeatable; later ones win)")
	fs.Var((*list)(&opts.Values), "set", "a value, as helm's --set: key=value, lists as {a,b} (repeatable)")
	fs.Var((*list)(&opts.StringValues), "set-string", "a value taken as a string, as helm's --set-string (repeatable)")
	chart := fs.String("chart", "helm/ssegate", "the chart's folder")
	name := fs.String("name", "ssegate", "the release name")
	namespace := fs.String("namespace", "default", "the namespace the objects are for")
	kubeVersion := fs.String("kube-version", "v1.34.4", "the Kubernetes version the chart is rendered for")
	if err := fs.Parse(args); err != nil {
		return err
	}
	vals, err := opts.MergeValues(getter.Providers{})
	if err != nil {
		return err
	}
	ch, err := loader.Load(*chart)
	if err != nil {
		return fmt.Errorf("load chart: %w", err)
	}
	caps := chartcommon.DefaultCapabilities.Copy()
	kv, err := chartcommon.ParseKubeVersion(*kubeVersion)
	if err != nil {
		return err
	}
	caps.KubeVersion = *kv
	rv, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals,
		chartcommon.ReleaseOptions{Name: *name, Namespace: *namespace, IsInstall: true, Revision: 1}, caps, false)
	if err != nil {
		return err
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return err
	}
	for _, file := range slices.Sorted(func(yield func(string) bool) {
		for k := range out {
			if !yield(k) {
				return
			}
		}
	}) {
		doc := strings.TrimSpace(out[file])
		if doc == "" || strings.HasSuffix(file, "NOTES.txt") || strings.Contains(file, "/templates/tests/") {
			continue
		}
		if _, err := fmt.Fprintf(w, "---\n# Source: %s\n%s\n", file, doc); err != nil {
			return err
		}
	}
	return nil
}
