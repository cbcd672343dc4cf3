//go:build kube

package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

const chartPath = "../../helm/ssegate"

// cluster is the test cluster named by SSEGATE_KUBECONFIG, with the clients the tests use.
type cluster struct {
	kubeconfig string
	rest       *rest.Config
	clients    kubernetes.Interface
	dynamic    dynamic.Interface
	mapper     meta.RESTMapper
}

// needEnv returns the environment variable name, or skips t (fails it under CI=true) when it is not set.
func needEnv(t *testing.T, name, how string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: under CI the cluster tests must not be skipped (run them with %s)", name, how)
		}
		t.Skipf("%s is not set: run with %s", name, how)
	}
	return v
}

// newCluster connects to the cluster of SSEGATE_KUBECONFIG, or skips t (fails it under CI=true).
func newCluster(t *testing.T) *cluster {
	t.Helper()
	path := needEnv(t, "SSEGATE_KUBECONFIG", "`make test-k8s` or k8s/cluster/with-cluster.sh")
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", path, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{
		kubeconfig: path, rest: cfg, clients: cs, dynamic: dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery())),
	}
}

// namespace creates a namespace named prefix-<random> for t; it is deleted when t ends.
func (c *cluster) namespace(t *testing.T, prefix string) string {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := prefix + "-" + hex.EncodeToString(b[:])
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.clients.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.clients.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// helm returns a Helm action configuration for namespace, storing releases in Secrets as the helm
// command does, with Helm's own log at warning level and above in the test's output.
func (c *cluster) helm(t *testing.T, namespace string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &c.kubeconfig
	flags.Namespace = &namespace
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(
		slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		t.Fatalf("helm configuration: %v", err)
	}
	return cfg
}

// loadChart loads helm/ssegate.
func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	ch, err := loader.Load(chartPath)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	return ch
}

// install runs `helm install` of the chart as name in namespace with vals, without waiting unless wait.
func install(t *testing.T, cfg *action.Configuration, namespace, name string, vals map[string]any, wait time.Duration) (*release.Release, error) {
	t.Helper()
	in := action.NewInstall(cfg)
	in.Namespace, in.ReleaseName = namespace, name
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, time.Minute
	if wait > 0 {
		in.WaitStrategy, in.Timeout = kube.StatusWatcherStrategy, wait
	}
	rel, err := in.RunWithContext(t.Context(), loadChart(t), vals)
	return asRelease(rel), err
}

// upgrade runs `helm upgrade` of name with vals (not reusing the previous values), waiting when wait > 0.
func upgrade(t *testing.T, cfg *action.Configuration, namespace, name string, vals map[string]any, wait time.Duration) (*release.Release, error) {
	t.Helper()
	up := action.NewUpgrade(cfg)
	up.Namespace = namespace
	up.WaitStrategy, up.Timeout = kube.HookOnlyStrategy, time.Minute
	if wait > 0 {
		up.WaitStrategy, up.Timeout = kube.StatusWatcherStrategy, wait
	}
	rel, err := up.RunWithContext(t.Context(), name, loadChart(t), vals)
	return asRelease(rel), err
}

func asRelease(r any) *release.Release {
	rel, _ := r.(*release.Release)
	return rel
}

// history returns the revisions of name, oldest first.
func history(t *testing.T, cfg *action.Configuration, name string) []*release.Release {
	t.Helper()
	rs, err := action.NewHistory(cfg).Run(name)
	if err != nil {
		t.Fatalf("helm history %s: %v", name, err)
	}
	out := make([]*release.Release, 0, len(rs))
	for _, r := range rs {
		out = append(out, asRelease(r))
	}
	return out
}

// manifestObjects decodes a release manifest into its objects.
func manifestObjects(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatalf("decode manifest: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// resource returns the dynamic client of obj's kind in namespace (cluster-scoped kinds ignore it).
func (c *cluster) resource(t *testing.T, obj *unstructured.Unstructured, namespace string) dynamic.ResourceInterface {
	t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("no resource for %s: %v", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dynamic.Resource(m.Resource).Namespace(namespace)
	}
	return c.dynamic.Resource(m.Resource)
}

// applyDryRun sends obj to the API server as a server-side apply with dryRun=All and strict field
// validation: the server checks every field against its schema and stores nothing.
func (c *cluster) applyDryRun(t *testing.T, obj *unstructured.Unstructured, namespace string) error {
	t.Helper()
	body, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.resource(t, obj, namespace).Patch(t.Context(), obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: "ssegate-test", FieldValidation: "Strict", Force: ptr(true),
	})
	return err
}

// createDryRun sends obj to the API server as a create with dryRun=All and the given field validation
// (Strict, Warn or Ignore): stored nothing, but decoded, defaulted and validated by the server.
func (c *cluster) createDryRun(t *testing.T, obj *unstructured.Unstructured, namespace, validation string) error {
	t.Helper()
	_, err := c.resource(t, obj, namespace).Create(t.Context(), obj, metav1.CreateOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: "ssegate-test", FieldValidation: validation,
	})
	return err
}

// gone reports whether obj no longer exists in namespace.
func (c *cluster) gone(t *testing.T, obj *unstructured.Unstructured, namespace string) bool {
	t.Helper()
	_, err := c.resource(t, obj, namespace).Get(t.Context(), obj.GetName(), metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("get %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return apierrors.IsNotFound(err)
}

func ptr[T any](v T) *T { return &v }

// checkFor polls f every interval until it returns nil or timeout passes, then fails t with f's last error.
func checkFor(t *testing.T, timeout, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended: %v", err)
		case <-time.After(interval):
		}
	}
}

// bogusField is a post-renderer that adds an unknown field to the spec of every object of kind, so that a
// release can prove the API server refuses it.
type bogusField struct{ kind string }

// Run implements postrenderer.PostRenderer.
func (b bogusField) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	docs := strings.Split(in.String(), "\n---")
	for i, d := range docs {
		if strings.Contains(d, "\nkind: "+b.kind+"\n") {
			docs[i] = strings.Replace(d, "\nspec:\n", "\nspec:\n  bogusField: true\n", 1)
		}
	}
	return bytes.NewBufferString(strings.Join(docs, "\n---")), nil
}
