package app

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"

	"github.com/goccy/go-yaml"
	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
)

var updateChart = flag.Bool("update-chart", false, "rewrite the chart's golden files in testdata/chart and k8s/base (go test ... -args -update-chart)")

// chartValueSets are the value sets the chart is rendered with: what a first install sets, everything on,
// and everything optional off.
var chartValueSets = map[string]map[string]any{
	"default": {
		"kafka":   map[string]any{"brokers": []any{"kafka-0.kafka:9092"}},
		"gateway": map[string]any{"topics": []any{"orders"}},
	},
	"everything": {
		"kafka": map[string]any{
			"brokers": []any{"b1:9093", "b2:9093"},
			"tls":     map[string]any{"enabled": true, "caSecret": "kafka-ca", "clientCertSecret": "kafka-client", "serverName": "kafka.example.com"},
			"sasl":    map[string]any{"mechanism": "SCRAM-SHA-512", "username": "ssegate", "passwordSecret": map[string]any{"name": "kafka-pw", "key": "pw"}},
		},
		"gateway": map[string]any{
			"topics": []any{"orders", "payments"}, "topicConflate": map[string]any{"payments": "250ms"}, "topicSlowConflate": map[string]any{"orders": "500ms"},
			"topicSnapshotIndex": map[string]any{"payments": "32MiB"}, "replicas": 3, "drainSeconds": 30, "endpointPropagationSeconds": 8,
			"autoscaling": map[string]any{"enabled": true, "targetConnectionsPerPod": 5000},
			"ingress":     map[string]any{"enabled": true, "hosts": []any{"events.example.com"}},
			"httpRoute":   map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public"}}},
			"pprof":       true,
			"tls":         map[string]any{"secretName": "ssegate-tls"},
			"auth": map[string]any{
				"topicModes": map[string]any{"payments": "none"}, "algorithms": []any{"RS256", "ES256"},
				"keySecret": map[string]any{"name": "issuer-keys", "key": "keys.pem", "format": "pem"},
				"issuer":    "https://issuer.example.com", "audience": []any{"ssegate"}, "leeway": "30s",
				"cookie": "session_token", "expiryNotice": "2m",
				"hook": map[string]any{
					"url": "http://sessions.app.svc:8080/authorize", "topicUrls": map[string]any{"payments": "https://pay.example.com/authorize"},
					"timeout": "1500ms", "ttl": "45s", "cacheEntries": 500,
				},
			},
			"cors":   map[string]any{"origins": []any{"https://app.example.com", "https://*.example.com"}, "credentials": true},
			"limits": map[string]any{"maxStreams": 20000, "streamRate": 500, "maxStreamsPerIP": 50, "maxStreamsPerSubject": 10, "maxTopicsPerStream": 4, "trustedProxies": []any{"198.51.100.0/24"}, "quotaFailure": "closed"},
			"publish": map[string]any{
				"topics": []any{"orders"}, "rate": 100, "burst": 200, "maxValueBytes": "256KiB", "maxRecords": 100,
				"pendingBytes": "32MiB", "timeout": "20s", "idempotencyWindow": "1h",
			},
			"websocket": map[string]any{"maxMessageBytes": "256KiB", "compression": true},
			"memory":    map[string]any{"websocketPercent": 10},
		},
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}, "grafanaDashboard": map[string]any{"enabled": true}},
		"ingest": map[string]any{
			"enabled": true, "sources": []any{map[string]any{"name": "wiki", "url": "https://stream.example.com/sse", "topic": "wiki"}},
			"secretMounts": map[string]any{"upstream-token": "/etc/ssegate/upstream"},
		},
		"redis":   map[string]any{"bundled": true, "passwordSecret": map[string]any{"name": "redis-pw"}},
		"tracing": map[string]any{"otlpEndpoint": "http://otel-collector.observability:4318"},
	},
	"oauthbearer": {
		"kafka": map[string]any{
			"brokers": []any{"pkc-1.eu-west-1.aws.confluent.cloud:9092"}, "tls": map[string]any{"enabled": true},
			"sasl": map[string]any{"mechanism": "OAUTHBEARER", "oauth": map[string]any{
				"tokenUrl": "https://login.example.com/oauth2/token", "clientId": "ssegate", "scope": "kafka", "audience": "kafka",
				"extensions":         map[string]any{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"},
				"clientSecretSecret": map[string]any{"name": "kafka-oauth"},
			}},
		},
		"gateway": map[string]any{"topics": []any{"orders"}},
	},
	"minimal": {
		"kafka": map[string]any{"brokers": []any{"k:9092"}},
		"gateway": map[string]any{
			"topics": []any{"t"}, "replicas": 1, "podDisruptionBudget": map[string]any{"enabled": false},
			"networkPolicy": map[string]any{"enabled": false}, "topologySpread": false,
		},
		"test": map[string]any{"enabled": false},
	},
}

// renderChart renders the chart in helm/ssegate with vals, as `helm template` does (with the schema checked),
// and returns the manifests by template name.
func renderChart(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	return renderChartAs(t, "sse", "events", vals)
}

// renderChartAs renders the chart as release name in namespace.
func renderChartAs(t *testing.T, name, namespace string, vals map[string]any) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load("../../../../helm/ssegate")
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	caps := chartcommon.DefaultCapabilities.Copy()
	caps.KubeVersion = chartcommon.KubeVersion{Version: "v1.34.4", Major: "1", Minor: "34"}
	rv, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals,
		chartcommon.ReleaseOptions{Name: name, Namespace: namespace, IsInstall: true, Revision: 1}, caps, false)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, rv)
}

// objects decodes every object of the rendered manifests strictly into its k8s.io/api type (an unknown or
// misplaced field fails); kinds the client-go scheme does not know (CRDs) are decoded as YAML maps.
func objects(t *testing.T, out map[string]string) (typed []runtime.Object, other []map[string]any, all string) {
	t.Helper()
	dec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true, Strict: true})
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range out {
			if !yield(k) {
				return
			}
		}
	})
	var b strings.Builder
	for _, name := range names {
		for _, doc := range strings.Split(out[name], "\n---") {
			if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" || !strings.Contains(doc, "kind:") {
				continue
			}
			fmt.Fprintf(&b, "# %s\n%s\n---\n", name, strings.TrimSpace(doc))
			obj, gvk, err := dec.Decode([]byte(doc), nil, nil)
			if err == nil {
				typed = append(typed, obj)
				continue
			}
			if gvk != nil && runtime.IsNotRegisteredError(err) {
				var m map[string]any
				if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				other = append(other, m)
				continue
			}
			t.Fatalf("%s: strict decode: %v\n%s", name, err, doc)
		}
	}
	return typed, other, b.String()
}

func find[T runtime.Object](typed []runtime.Object) []T {
	var out []T
	for _, o := range typed {
		if x, ok := o.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// TestChartRenders renders the chart with each value set, decodes every object strictly, checks the
// invariants below, and compares the output with the golden files (-update-chart rewrites them).
func TestChartRenders(t *testing.T) {
	for name, vals := range chartValueSets {
		t.Run(name, func(t *testing.T) {
			out, err := renderChart(t, vals)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			typed, other, all := objects(t, out)
			checkChartInvariants(t, vals, typed, other)
			golden := filepath.Join("testdata", "chart", name+".yaml")
			if *updateChart {
				if err := os.MkdirAll(filepath.Dir(golden), 0o750); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(all), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update-chart)", err)
			}
			if string(want) != all {
				t.Errorf("the rendered chart differs from %s (run with -update-chart and review the diff)", golden)
			}
		})
	}
}

func intValue(vals map[string]any, key string, def int) int {
	if g, ok := vals["gateway"].(map[string]any); ok {
		if v, ok := g[key].(int); ok {
			return v
		}
	}
	return def
}

func checkChartInvariants(t *testing.T, vals map[string]any, typed []runtime.Object, other []map[string]any) {
	t.Helper()
	sts := find[*appsv1.StatefulSet](typed)
	if len(sts) != 1 {
		t.Fatalf("%d StatefulSets", len(sts))
	}
	s := sts[0]
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement || s.Spec.MinReadySeconds <= 0 {
		t.Errorf("podManagementPolicy %q minReadySeconds %d", s.Spec.PodManagementPolicy, s.Spec.MinReadySeconds)
	}
	pod := s.Spec.Template.Spec
	drain, prop := intValue(vals, "drainSeconds", 10), intValue(vals, "endpointPropagationSeconds", 5)
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < int64(drain+prop+10) {
		t.Errorf("grace period %v does not cover propagation %d + drain %d + write timeout 10", g, prop, drain)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("a service account token is mounted")
	}
	if s.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("no checksum/config annotation")
	}
	c := pod.Containers[0]
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		// The gateway waits for the endpoints itself (endpoint-propagation), unready; a preStop hook would
		// add its time to the grace period's arithmetic, and keep the gateway ready meanwhile.
		t.Errorf("preStop %+v, want none", c.Lifecycle.PreStop)
	}
	checkRestricted(t, "gateway", pod, c)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != int32(intValue(vals, "port", 8080)) || ports["admin"] != int32(intValue(vals, "adminPort", 9090)) {
		t.Errorf("container ports %v", ports)
	}
	for what, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Port.StrVal != "admin" {
			t.Errorf("%s probe %+v, want an HTTP probe on the admin port", what, pr)
		}
	}
	checkProbes(t, vals, c)
	// The gateway's configuration file is one the gateway loads, and its drain is the chart's.
	var cm *corev1.ConfigMap
	for _, m := range find[*corev1.ConfigMap](typed) {
		if strings.HasSuffix(m.Name, "-gateway") {
			cm = m
		}
	}
	if cm == nil {
		t.Fatal("no gateway ConfigMap")
	}
	// Every file the configuration names is in a volume the container mounts (a Secret's, mounted as a folder
	// so that a rotated Secret reaches the running gateway); here each becomes a file of a temporary folder,
	// the clients' port's certificate and key a pair that loads (the gateway loads it at start).
	dir := t.TempDir()
	text := cm.Data["gateway.yaml"]
	var tlsFiles struct {
		Cert string `yaml:"tls-cert-file"`
		Key  string `yaml:"tls-key-file"`
	}
	if err := yaml.Unmarshal([]byte(text), &tlsFiles); err != nil {
		t.Fatalf("the gateway's configuration: %v", err)
	}
	contents := map[string][]byte{}
	if tlsFiles.Cert != "" {
		contents[tlsFiles.Cert], contents[tlsFiles.Key] = chartTestPair(t)
	}
	for _, path := range regexp.MustCompile(`/etc/ssegate/[\w./-]+`).FindAllString(text, -1) {
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || (m.MountPath == filepath.Dir(path) && m.SubPath == "")
		}
		if !mounted {
			t.Errorf("the configuration names %s, which no volume of the container holds: %+v", path, c.VolumeMounts)
		}
		local := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(path, "/etc/ssegate/"), "/", "_"))
		content, ok := contents[path]
		if !ok {
			content = []byte("x")
		}
		_ = os.WriteFile(local, content, 0o600)
		text = strings.ReplaceAll(text, path, local)
	}
	file := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", file}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatalf("the gateway rejects the chart's configuration: %v\n%s", err, cm.Data["gateway.yaml"])
	}
	if int(cfg.Drain.Seconds()) != drain || int(cfg.Propagation.Seconds()) != prop {
		t.Errorf("drain %v, endpoint propagation %v; want %d s and %d s", cfg.Drain, cfg.Propagation, drain, prop)
	}
	checkChartAuth(t, vals, cfg)
	checkChartTLS(t, vals, cfg, typed)
	checkChartPublish(t, vals, cfg, typed)
	if tr, _ := vals["tracing"].(map[string]any); cfg.OTLPEndpoint != fmt.Sprint(map[bool]any{true: tr["otlpEndpoint"], false: ""}[tr != nil]) {
		t.Errorf("the gateway's otlp-endpoint %q, want the chart's tracing.otlpEndpoint %v", cfg.OTLPEndpoint, tr)
	}
	// The Service for clients exposes the stream port only; the admin port is on the headless Service.
	var clientPort string
	for _, svc := range find[*corev1.Service](typed) {
		if strings.HasSuffix(svc.Name, "-gateway") {
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "http" || svc.Spec.SessionAffinity != corev1.ServiceAffinityNone {
				t.Errorf("client Service %+v", svc.Spec)
			}
			clientPort = svc.Spec.Ports[0].Name
		}
	}
	for _, ing := range find[*networkingv1.Ingress](typed) {
		if ing.Annotations["nginx.ingress.kubernetes.io/proxy-buffering"] != "off" || ing.Annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"] != "3600" {
			t.Errorf("Ingress without SSE-safe settings: %v", ing.Annotations)
		}
		// The Ingress's backend is the client Service's port, by its name.
		for _, r := range ing.Spec.Rules {
			for _, p := range r.HTTP.Paths {
				if p.Backend.Service == nil || p.Backend.Service.Port.Name != clientPort {
					t.Errorf("Ingress backend %+v, want the client Service's port %q", p.Backend, clientPort)
				}
			}
		}
	}
	for _, m := range other {
		if m["kind"] == "HTTPRoute" {
			spec, _ := m["spec"].(map[string]any)
			rules, _ := spec["rules"].([]any)
			r0, _ := rules[0].(map[string]any)
			to, _ := r0["timeouts"].(map[string]any)
			if to["request"] != "0s" {
				t.Errorf("HTTPRoute timeouts %v, want request 0s", to)
			}
		}
	}
	for _, d := range find[*appsv1.Deployment](typed) {
		checkRestricted(t, d.Name, d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0])
	}
}

// checkRestricted checks the restricted Pod Security Standard.
func checkRestricted(t *testing.T, what string, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil ||
		!*sc.ReadOnlyRootFilesystem || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.Capabilities == nil ||
		!slices.Contains(sc.Capabilities.Drop, "ALL") || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: container security context %+v is not restricted", what, sc)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: pod security context %+v", what, pod.SecurityContext)
	}
}

// TestChartRequiredValues: a first install without brokers or topics, or with SASL PLAIN over plaintext not
// allowed on purpose, fails with a message naming the value.
func TestChartRequiredValues(t *testing.T) {
	plain := map[string]any{"mechanism": "PLAIN", "username": "u", "passwordSecret": map[string]any{"name": "pw"}}
	for _, tc := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{"gateway": map[string]any{"topics": []any{"t"}}}, "kafka.brokers is required"},
		{map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}}, "gateway.topics is required"},
		{map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}, "sasl": plain}, "gateway": map[string]any{"topics": []any{"t"}}}, "kafka.sasl.allowPlaintext"},
	} {
		_, err := renderChart(t, tc.vals)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("render %v: %v, want %q", tc.vals, err, tc.want)
		}
	}
}

// TestChartSchema: values.schema.json and the README's values table are what values.yaml says, a value of
// the wrong type or an unknown value is refused before anything renders, and random values of the right
// types render.
func TestChartSchema(t *testing.T) {
	cmd := exec.Command("go", "run", "./helm/chartdoc", "-check")
	cmd.Dir = "../../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chartdoc -check: %v\n%s", err, out)
	}
	base := func() map[string]any {
		return map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}, "gateway": map[string]any{"topics": []any{"t"}}}
	}
	for _, tc := range []struct {
		name string
		set  func(v map[string]any)
	}{
		{"replicas not a number", func(v map[string]any) { v["gateway"].(map[string]any)["replicas"] = "two" }},
		{"unknown value", func(v map[string]any) { v["gateway"].(map[string]any)["replica"] = 2 }},
		{"port zero", func(v map[string]any) { v["gateway"].(map[string]any)["port"] = 0 }},
		{"bad log level", func(v map[string]any) { v["gateway"].(map[string]any)["logLevel"] = "loud" }},
		{"bad SASL mechanism", func(v map[string]any) { v["kafka"].(map[string]any)["sasl"] = map[string]any{"mechanism": "GSSAPI"} }},
	} {
		v := base()
		tc.set(v)
		if _, err := renderChart(t, v); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("%s: %v, want a schema error", tc.name, err)
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2)) //nolint:gosec // reproducible test values
	for i := range 50 {
		v := base()
		g := v["gateway"].(map[string]any)
		g["replicas"] = 1 + rnd.IntN(9)
		g["drainSeconds"] = rnd.IntN(120)
		g["endpointPropagationSeconds"] = rnd.IntN(30)
		g["heartbeat"] = fmt.Sprintf("%ds", 1+rnd.IntN(60))
		g["prefill"] = rnd.IntN(100000)
		g["port"], g["adminPort"] = 1024+rnd.IntN(1000), 3000+rnd.IntN(1000)
		g["podDisruptionBudget"] = map[string]any{"enabled": rnd.IntN(2) == 0}
		g["autoscaling"] = map[string]any{"enabled": rnd.IntN(2) == 0, "targetConnectionsPerPod": rnd.IntN(3) * 1000}
		g["probes"] = map[string]any{"startupSeconds": 1 + rnd.IntN(900), "startupPeriodSeconds": 1 + rnd.IntN(10), "readinessFailureThreshold": 2 + rnd.IntN(5)}
		out, err := renderChart(t, v)
		if err != nil {
			t.Fatalf("random values %d %v: %v", i, g, err)
		}
		typed, other, _ := objects(t, out)
		checkChartInvariants(t, v, typed, other)
	}
}

// TestPlainManifests: k8s/base holds the chart's objects rendered for release "ssegate" with k8s/values.yaml,
// without the helm test pod (-update-chart rewrites it), so users without Helm install the same objects.
func TestPlainManifests(t *testing.T) {
	root := "../../../../k8s"
	src, err := os.ReadFile(filepath.Join(root, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(src, &vals); err != nil {
		t.Fatal(err)
	}
	out, err := renderChartAs(t, "ssegate", "ssegate", vals)
	if err != nil {
		t.Fatal(err)
	}
	for name := range out {
		if strings.Contains(name, "/tests/") {
			delete(out, name)
		}
	}
	_, _, all := objects(t, out)
	all = "# Generated from helm/ssegate with k8s/values.yaml by TestPlainManifests (go test -run TestPlainManifests\n" +
		"# ./services/gateway/internal/app -args -update-chart). Do not edit: change the chart or the values.\n" + all
	path := filepath.Join(root, "base", "ssegate.yaml")
	if *updateChart {
		if err := os.WriteFile(path, []byte(all), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != all {
		t.Fatalf("%s is not the chart's rendering (%v): run with -update-chart", path, err)
	}
}

// checkChartAuth checks that the values of who may read what reach the gateway's configuration as they say,
// and that values left empty keep the gateway's defaults.
func checkChartAuth(t *testing.T, vals map[string]any, cfg Config) {
	t.Helper()
	g, _ := vals["gateway"].(map[string]any)
	a, _ := g["auth"].(map[string]any)
	def := defaults()
	if a == nil {
		// The Redis address is checkChartPublish's: publishing takes it without limits.
		limits := cfg.Limits
		limits.Redis = def.Limits.Redis
		if !reflect.DeepEqual(cfg.Auth, def.Auth) || !reflect.DeepEqual(cfg.CORS, def.CORS) || !reflect.DeepEqual(limits, def.Limits) {
			t.Errorf("without auth, CORS or limits values the gateway's settings differ from its defaults: %+v %+v %+v", cfg.Auth, cfg.CORS, cfg.Limits)
		}
		return
	}
	ks, _ := a["keySecret"].(map[string]any)
	if want := "/etc/ssegate/auth/" + ks["key"].(string); !strings.HasSuffix(cfg.Auth.KeyFile, strings.ReplaceAll(strings.TrimPrefix(want, "/etc/ssegate/"), "/", "_")) {
		t.Errorf("auth key file %q, want the Secret's key %s", cfg.Auth.KeyFile, want)
	}
	if fmt.Sprint(cfg.Auth.Algorithms) != fmt.Sprint(a["algorithms"]) || cfg.Auth.Issuer != a["issuer"] || fmt.Sprint(cfg.Auth.Audience) != fmt.Sprint(a["audience"]) ||
		cfg.Auth.Cookie != a["cookie"] || cfg.Auth.Leeway != parseDur(t, a["leeway"]) || cfg.Auth.ExpiryNotice != parseDur(t, a["expiryNotice"]) {
		t.Errorf("auth settings %+v, want the values %v", cfg.Auth, a)
	}
	h, _ := a["hook"].(map[string]any)
	if cfg.Auth.Hook.URL != h["url"] || fmt.Sprint(cfg.Auth.Hook.TopicURLs) != fmt.Sprint(h["topicUrls"]) || cfg.Auth.Hook.Timeout != parseDur(t, h["timeout"]) ||
		cfg.Auth.Hook.TTL != parseDur(t, h["ttl"]) || cfg.Auth.Hook.CacheEntries != h["cacheEntries"] {
		t.Errorf("authorization hook %+v, want the values %v", cfg.Auth.Hook, h)
	}
	if fmt.Sprint(cfg.Auth.TopicModes) != fmt.Sprint(a["topicModes"]) || cfg.Auth.KeyRefresh != def.Auth.KeyRefresh || cfg.Auth.Claim != def.Auth.Claim {
		t.Errorf("auth modes %v, key refresh %v, claim %q; want %v and the gateway's defaults", cfg.Auth.TopicModes, cfg.Auth.KeyRefresh, cfg.Auth.Claim, a["topicModes"])
	}
	c, _ := g["cors"].(map[string]any)
	if fmt.Sprint(cfg.CORS.Origins) != fmt.Sprint(c["origins"]) || cfg.CORS.Credentials != c["credentials"] {
		t.Errorf("CORS %+v, want %v", cfg.CORS, c)
	}
	if fmt.Sprint(cfg.TopicSnapshotIndex) != fmt.Sprint(g["topicSnapshotIndex"]) {
		t.Errorf("key indexes %v, want %v", cfg.TopicSnapshotIndex, g["topicSnapshotIndex"])
	}
	if fmt.Sprint(cfg.TopicConflate) != fmt.Sprint(g["topicConflate"]) || fmt.Sprint(cfg.TopicSlowConflate) != fmt.Sprint(g["topicSlowConflate"]) {
		t.Errorf("conflation %v and %v, want %v and %v", cfg.TopicConflate, cfg.TopicSlowConflate, g["topicConflate"], g["topicSlowConflate"])
	}
	l, _ := g["limits"].(map[string]any)
	if cfg.Limits.MaxStreams != l["maxStreams"] || cfg.Limits.StreamRate != l["streamRate"] || cfg.Limits.MaxPerIP != l["maxStreamsPerIP"] ||
		cfg.Limits.MaxPerSubject != l["maxStreamsPerSubject"] || cfg.Limits.MaxTopicsPerStream != l["maxTopicsPerStream"] || cfg.Limits.QuotaFailure != l["quotaFailure"] || fmt.Sprint(cfg.Limits.TrustedProxies) != fmt.Sprint(l["trustedProxies"]) {
		t.Errorf("limits %+v, want %v", cfg.Limits, l)
	}
	if _, pw, err := cfg.Limits.Redis.Credentials()(t.Context()); !strings.HasSuffix(cfg.Limits.Redis.Addr, "-redis:6379") || err != nil || pw != "x" {
		t.Errorf("the limits' Redis %v, want the bundled one with the Secret's password", cfg.Limits.Redis)
	}
}

// parseDur parses a duration value.
func parseDur(t *testing.T, v any) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(fmt.Sprint(v))
	if err != nil {
		t.Fatalf("value %v: %v", v, err)
	}
	return d
}

// TestHelmLint: `helm lint --strict` (the Helm v4 SDK's) finds nothing, not even an informational message,
// for every value set the chart is rendered with.
func TestHelmLint(t *testing.T) {
	for name, vals := range chartValueSets {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict = true
			res := l.Run([]string{"../../../../helm/ssegate"}, vals)
			for _, err := range res.Errors {
				t.Errorf("helm lint: %v", err)
			}
			for _, m := range res.Messages {
				t.Errorf("helm lint: %s", m)
			}
		})
	}
}
