//go:build kube

package cluster

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// apiValues turns on every part of the chart whose kinds a bare API server knows (the Prometheus Operator's
// and Gateway API's kinds need their CRDs, so they stay off).
func apiValues(replicas, drain int, logLevel string) map[string]any {
	return map[string]any{
		"kafka": map[string]any{"brokers": []any{"kafka-0.kafka:9092", "kafka-1.kafka:9092"}},
		"gateway": map[string]any{
			"topics": []any{"orders", "payments"}, "replicas": replicas, "drainSeconds": drain, "logLevel": logLevel,
			"ingress": map[string]any{"enabled": true, "hosts": []any{"events.example.com"}},
		},
		"ingest": map[string]any{
			"enabled": true,
			"sources": []any{map[string]any{"name": "wiki", "url": "https://stream.example.com/sse", "topic": "wiki"}},
		},
		"redis": map[string]any{"bundled": true},
	}
}

// TestChartOnAPIServer installs, upgrades, rolls back and uninstalls the chart on a real API server. Helm
// applies every object server-side with strict field validation; each object is also sent again as a dry
// run, as it is and with an unknown field, which the server must refuse, so the validation is proven real.
// No controller runs at this tier: the StatefulSet keeps zero pods, and the test asserts the stored objects.
func TestChartOnAPIServer(t *testing.T) {
	c := newCluster(t)
	ns := c.namespace(t, "chart-api")
	cfg := c.helm(t, ns)
	const name = "sse"

	rel, err := install(t, cfg, ns, name, apiValues(3, 10, "info"), 0)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	if rel.Version != 1 || rel.Info.Status != common.StatusDeployed {
		t.Fatalf("install: revision %d status %s", rel.Version, rel.Info.Status)
	}
	objs := manifestObjects(t, rel.Manifest)
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
	}
	for kind, n := range map[string]int{
		"StatefulSet": 1, "Service": 3, "PodDisruptionBudget": 1, "ConfigMap": 2, "NetworkPolicy": 1,
		"Deployment": 2, "Ingress": 1,
	} {
		if kinds[kind] != n {
			t.Errorf("the release has %d %s objects, want %d (all kinds: %v)", kinds[kind], kind, n, kinds)
		}
	}

	t.Run("strict field validation", func(t *testing.T) {
		for _, o := range objs {
			what := o.GetKind() + " " + o.GetName()
			if err := c.applyDryRun(t, o, ns); err != nil {
				t.Errorf("%s: the server refuses the chart's own object: %v", what, err)
			}
			// A copy under another name with an unknown field: refused under Strict, accepted (the field
			// dropped) under Ignore, so the refusal is the server's field validation and nothing else.
			bogus := o.DeepCopy()
			bogus.SetName(o.GetName() + "-dry")
			path := []string{"spec", "bogusField"}
			if _, ok := bogus.Object["spec"]; !ok {
				path = []string{"bogusField"}
			}
			if err := unstructured.SetNestedField(bogus.Object, true, path...); err != nil {
				t.Fatal(err)
			}
			field := strings.Join(path, ".")
			want := fmt.Sprintf("unknown field %q", field)
			if err := c.createDryRun(t, bogus, ns, "Strict"); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s with %s, strict: error %v, want one with %s", what, field, err, want)
			}
			if err := c.createDryRun(t, bogus, ns, "Ignore"); err != nil {
				t.Errorf("%s with %s, validation off: %v, want it accepted", what, field, err)
			}
			// Server-side apply, as Helm applies, checks the patch against the schema too.
			if err := c.applyDryRun(t, bogus, ns); err == nil || !strings.Contains(err.Error(), "."+field+": field not declared in schema") {
				t.Errorf("%s with %s, server-side apply: error %v, want .%s: field not declared in schema", what, field, err, field)
			}
		}
		// The same through Helm, with its client-side schema check off: only the server can refuse it.
		in := action.NewInstall(c.helm(t, ns))
		in.Namespace, in.ReleaseName = ns, "bogus"
		in.WaitStrategy, in.DisableOpenAPIValidation = kube.HookOnlyStrategy, true
		in.PostRenderer = bogusField{kind: "StatefulSet"}
		_, err := in.RunWithContext(t.Context(), loadChart(t), apiValues(1, 10, "info"))
		if err == nil || !strings.Contains(err.Error(), ".spec.bogusField: field not declared in schema") {
			t.Errorf("helm install with a bogus StatefulSet field: %v, want .spec.bogusField: field not declared in schema", err)
		}
		un := action.NewUninstall(c.helm(t, ns))
		un.WaitStrategy = kube.HookOnlyStrategy
		_, _ = un.Run("bogus")
	})

	sts := checkInstalled(t, c, ns, name, 3, 10, "info")
	checksum1 := sts.Spec.Template.Annotations["checksum/config"]

	// Upgrade: more replicas, a longer drain (so a longer grace period) and another log level (so another
	// configuration, and another checksum: the pods would roll).
	rel, err = upgrade(t, cfg, ns, name, apiValues(4, 20, "debug"), 0)
	if err != nil {
		t.Fatalf("helm upgrade: %v", err)
	}
	if rel.Version != 2 || rel.Info.Status != common.StatusDeployed {
		t.Fatalf("upgrade: revision %d status %s", rel.Version, rel.Info.Status)
	}
	sts = checkInstalled(t, c, ns, name, 4, 20, "debug")
	if sts.Spec.Template.Annotations["checksum/config"] == checksum1 {
		t.Error("the configuration changed but the pod template's checksum/config did not")
	}

	// Rollback to the first revision: a third revision with the first one's objects.
	rb := action.NewRollback(cfg)
	rb.Version, rb.WaitStrategy = 1, kube.HookOnlyStrategy
	if err := rb.Run(name); err != nil {
		t.Fatalf("helm rollback: %v", err)
	}
	sts = checkInstalled(t, c, ns, name, 3, 10, "info")
	if got := sts.Spec.Template.Annotations["checksum/config"]; got != checksum1 {
		t.Errorf("after the rollback checksum/config is %s, want the first revision's %s", got, checksum1)
	}
	var revs []string
	for _, r := range history(t, cfg, name) {
		revs = append(revs, fmt.Sprintf("%d:%s", r.Version, r.Info.Status))
	}
	if want := "1:superseded 2:superseded 3:deployed"; strings.Join(revs, " ") != want {
		t.Errorf("history %v, want %s", revs, want)
	}

	// Uninstall: every object of the release and the release's own records go.
	un := action.NewUninstall(cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	if _, err := un.Run(name); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	for _, o := range objs {
		if !c.gone(t, o, ns) {
			t.Errorf("%s %s still exists after uninstall", o.GetKind(), o.GetName())
		}
	}
	secrets, err := c.clients.CoreV1().Secrets(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 0 {
		t.Errorf("%d release records left after uninstall", len(secrets.Items))
	}
	if _, err := action.NewHistory(cfg).Run(name); err == nil {
		t.Error("helm history finds the uninstalled release")
	}
}

// checkInstalled asserts the stored objects of release name: the StatefulSet and its pod template, the two
// gateway Services, the PDB, the ConfigMaps and the NetworkPolicy, for the given replicas, drain and log
// level. It returns the StatefulSet.
func checkInstalled(t *testing.T, c *cluster, ns, name string, replicas, drain int, logLevel string) *appsv1.StatefulSet {
	t.Helper()
	ctx := t.Context()
	full := name + "-ssegate"
	sts, err := c.clients.AppsV1().StatefulSets(ns).Get(ctx, full+"-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("StatefulSet: %v", err)
	}
	if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != replicas {
		t.Errorf("StatefulSet replicas %v, want %d", sts.Spec.Replicas, replicas)
	}
	if sts.Spec.ServiceName != full+"-gateway-headless" || sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("StatefulSet serviceName %q podManagementPolicy %q", sts.Spec.ServiceName, sts.Spec.PodManagementPolicy)
	}
	// Without a controller manager nothing creates the pods: the API server alone stores the object.
	if sts.Status.Replicas != 0 {
		t.Errorf("StatefulSet status.replicas %d with no controller running", sts.Status.Replicas)
	}
	if sts.Labels["app.kubernetes.io/managed-by"] != "Helm" || sts.Annotations["meta.helm.sh/release-name"] != name {
		t.Errorf("StatefulSet labels %v annotations %v: not Helm's", sts.Labels, sts.Annotations)
	}
	pod := sts.Spec.Template.Spec
	// The API server applied its defaults to the stored object: the chart's own fields must survive them.
	if g := pod.TerminationGracePeriodSeconds; g == nil || int(*g) != 5+drain+10+5 {
		t.Errorf("grace period %v, want propagation 5 + drain %d + write timeout 10 + 5", g, drain)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("a service account token is mounted")
	}
	ctr := pod.Containers[0]
	if ctr.SecurityContext == nil || ctr.SecurityContext.ReadOnlyRootFilesystem == nil || !*ctr.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the gateway's root file system is writable")
	}
	if ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet == nil || ctr.ReadinessProbe.HTTPGet.Path != "/readyz" || ctr.ReadinessProbe.FailureThreshold < 2 {
		t.Errorf("readiness probe %+v, want /readyz failing more than once", ctr.ReadinessProbe)
	}
	// A pod that is alive but unready (waiting for Kafka, a topic or its prefill) is never restarted.
	for what, pr := range map[string]*corev1.Probe{"startup": ctr.StartupProbe, "liveness": ctr.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/healthz" {
			t.Errorf("%s probe %+v, want /healthz", what, pr)
		}
	}

	svc, err := c.clients.CoreV1().Services(ns).Get(ctx, full+"-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("client Service: %v", err)
	}
	// The API server allocated a cluster IP from the cluster's service range.
	if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !netip.MustParsePrefix("198.51.100.128/25").Contains(ip) {
		t.Errorf("client Service cluster IP %q not allocated from the service range", svc.Spec.ClusterIP)
	}
	if svc.Spec.SessionAffinity != corev1.ServiceAffinityNone || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "http" {
		t.Errorf("client Service affinity %q ports %+v: want no affinity and the stream port only", svc.Spec.SessionAffinity, svc.Spec.Ports)
	}
	hl, err := c.clients.CoreV1().Services(ns).Get(ctx, full+"-gateway-headless", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("headless Service: %v", err)
	}
	if hl.Spec.ClusterIP != corev1.ClusterIPNone || !hl.Spec.PublishNotReadyAddresses || len(hl.Spec.Ports) != 2 {
		t.Errorf("headless Service clusterIP %q publishNotReadyAddresses %v ports %d", hl.Spec.ClusterIP, hl.Spec.PublishNotReadyAddresses, len(hl.Spec.Ports))
	}

	pdb, err := c.clients.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, full+"-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("PodDisruptionBudget: %v", err)
	}
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
	}

	cm, err := c.clients.CoreV1().ConfigMaps(ns).Get(ctx, full+"-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("gateway ConfigMap: %v", err)
	}
	conf := cm.Data["gateway.yaml"]
	for _, want := range []string{`topics: "orders,payments"`, fmt.Sprintf(`drain: "%ds"`, drain), fmt.Sprintf(`log-level: %q`, logLevel), "kafka-0.kafka:9092"} {
		if !strings.Contains(conf, want) {
			t.Errorf("gateway.yaml lacks %s:\n%s", want, conf)
		}
	}
	if _, err := c.clients.CoreV1().ConfigMaps(ns).Get(ctx, full+"-ingest", metav1.GetOptions{}); err != nil {
		t.Errorf("ingest ConfigMap: %v", err)
	}

	np, err := c.clients.NetworkingV1().NetworkPolicies(ns).Get(ctx, full+"-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("NetworkPolicy: %v", err)
	}
	if len(np.Spec.Ingress) != 2 {
		t.Errorf("NetworkPolicy has %d ingress rules, want 2 (streams from anywhere, admin from the allowed namespaces)", len(np.Spec.Ingress))
	}
	ing, err := c.clients.NetworkingV1().Ingresses(ns).Get(ctx, full+"-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Ingress: %v", err)
	}
	if ing.Annotations["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" {
		t.Errorf("Ingress annotations %v: buffering not off", ing.Annotations)
	}
	return sts
}
