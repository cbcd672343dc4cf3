package app

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/tlstest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// chartTestPair returns a self-signed certificate and its key, PEM, for the files the chart's configuration
// names (the gateway loads the pair at start).
func chartTestPair(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	p := tlstest.New(t, "sse-ssegate-gateway.events.svc", time.Now().Add(time.Hour), "sse-ssegate-gateway.events.svc")
	return p.CertPEM, p.KeyPEM
}

// chartTLSValues returns gateway.tls.secretName, certKey and keyKey (with the chart's defaults) and
// gateway.h2c of vals.
func chartTLSValues(vals map[string]any) (secret, certKey, keyKey string, h2c bool) {
	g, _ := vals["gateway"].(map[string]any)
	tv, _ := g["tls"].(map[string]any)
	secret, _ = tv["secretName"].(string)
	certKey, keyKey = "tls.crt", "tls.key"
	if k, ok := tv["certKey"].(string); ok {
		certKey = k
	}
	if k, ok := tv["keyKey"].(string); ok {
		keyKey = k
	}
	h2c, _ = g["h2c"].(bool)
	return secret, certKey, keyKey, h2c
}

// checkChartTLS checks what gateway.tls and gateway.h2c make of the chart: the gateway's settings (as it
// loaded them), the Secret mounted read-only as a folder (never subPath, whose files a rotation never
// updates), the Services' clients' port (name and appProtocol), ingress-nginx's backend protocol, and the helm
// test pod's URL and trust.
func checkChartTLS(t *testing.T, vals map[string]any, cfg Config, typed []runtime.Object) {
	t.Helper()
	secret, certKey, keyKey, h2c := chartTLSValues(vals)
	on := secret != ""
	// The gateway's settings: the configuration's files became files of a temporary folder, named after
	// their path below /etc/ssegate/.
	if on {
		if !strings.HasSuffix(cfg.TLS.CertFile, "tls_"+certKey) || !strings.HasSuffix(cfg.TLS.KeyFile, "tls_"+keyKey) || cfg.TLS.H2C {
			t.Errorf("the gateway's TLS settings %+v, want /etc/ssegate/tls/%s and /etc/ssegate/tls/%s, no h2c", cfg.TLS, certKey, keyKey)
		}
	} else if cfg.TLS.CertFile != "" || cfg.TLS.KeyFile != "" || cfg.TLS.H2C != h2c {
		t.Errorf("the gateway's TLS settings %+v, want no TLS and h2c %v", cfg.TLS, h2c)
	}
	// The Secret, mounted as a folder.
	pod := find[*appsv1.StatefulSet](typed)[0].Spec.Template.Spec
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "tls" {
			vol = &pod.Volumes[i]
		}
	}
	var mount *corev1.VolumeMount
	for i, m := range pod.Containers[0].VolumeMounts {
		if m.Name == "tls" {
			mount = &pod.Containers[0].VolumeMounts[i]
		}
	}
	switch {
	case !on && (vol != nil || mount != nil):
		t.Errorf("without gateway.tls.secretName, a tls volume %+v or mount %+v", vol, mount)
	case on && (vol == nil || vol.Secret == nil || vol.Secret.SecretName != secret || len(vol.Secret.Items) != 0):
		t.Errorf("tls volume %+v, want the whole Secret %s", vol, secret)
	case on && (mount == nil || mount.MountPath != "/etc/ssegate/tls" || mount.SubPath != "" || !mount.ReadOnly):
		t.Errorf("tls mount %+v, want /etc/ssegate/tls read-only, as a folder", mount)
	}
	// The Services' clients' port.
	wantName, wantProto := "http", ""
	switch {
	case on:
		wantName, wantProto = "https", "https"
	case h2c:
		wantProto = "kubernetes.io/h2c"
	}
	for _, svc := range find[*corev1.Service](typed) {
		if svc.Spec.Selector["app.kubernetes.io/component"] != "gateway" {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.StrVal != "http" {
				continue
			}
			proto := ""
			if p.AppProtocol != nil {
				proto = *p.AppProtocol
			}
			if p.Name != wantName || proto != wantProto {
				t.Errorf("Service %s's clients' port is named %q with appProtocol %q, want %q and %q", svc.Name, p.Name, proto, wantName, wantProto)
			}
		}
	}
	// ingress-nginx speaks HTTPS to TLS pods, unless the values' annotations say otherwise.
	g, _ := vals["gateway"].(map[string]any)
	ingv, _ := g["ingress"].(map[string]any)
	own, _ := ingv["annotations"].(map[string]any)
	for _, ing := range find[*networkingv1.Ingress](typed) {
		got, set := ing.Annotations["nginx.ingress.kubernetes.io/backend-protocol"]
		want, wantSet := own["nginx.ingress.kubernetes.io/backend-protocol"].(string)
		if on && !wantSet {
			want, wantSet = "HTTPS", true
		}
		if got != want || set != wantSet {
			t.Errorf("Ingress backend-protocol %q (set %v), want %q (set %v)", got, set, want, wantSet)
		}
	}
	// The helm test pod: https to the Service's name, trusting the Secret's certificate alone, without its key.
	for _, p := range find[*corev1.Pod](typed) {
		c := p.Spec.Containers[0]
		url := c.Args[len(c.Args)-1]
		var certFile string
		for _, e := range c.Env {
			if e.Name == "SSL_CERT_FILE" {
				certFile = e.Value
			}
		}
		if !on {
			if !strings.HasPrefix(url, "http://$(") || certFile != "" || len(p.Spec.Volumes) != 0 {
				t.Errorf("helm test pod: URL %q, SSL_CERT_FILE %q, volumes %+v; want http to the Service's address and no TLS", url, certFile, p.Spec.Volumes)
			}
			continue
		}
		if !strings.HasPrefix(url, "https://") || !strings.Contains(url, "-gateway.") || !strings.Contains(url, ".svc:") {
			t.Errorf("helm test pod URL %q, want https to the client Service's name", url)
		}
		if certFile != "/etc/ssegate/tls/"+certKey || len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/ssegate/tls" {
			t.Errorf("helm test pod: SSL_CERT_FILE %q, mounts %+v; want the Secret's certificate", certFile, c.VolumeMounts)
		}
		if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].Secret == nil || p.Spec.Volumes[0].Secret.SecretName != secret ||
			!slices.Equal(keysOf(p.Spec.Volumes[0].Secret.Items), []string{certKey}) {
			t.Errorf("helm test pod volumes %+v, want the Secret's %s alone (not its key)", p.Spec.Volumes, certKey)
		}
	}
}

func keysOf(items []corev1.KeyToPath) []string {
	var out []string
	for _, it := range items {
		out = append(out, it.Key)
	}
	return out
}

// TestChartTLS: gateway.tls.secretName mounts a TLS Secret as a folder and points the gateway's tls-cert-file
// and tls-key-file at it; the Services' clients' port then says https (name and appProtocol), ingress-nginx is
// told to speak HTTPS to the pods, the helm test asks over https and the notes give https URLs. gateway.h2c
// sets h2c and appProtocol kubernetes.io/h2c. Both together fail with a message naming both; neither leaves
// the port as it was.
func TestChartTLS(t *testing.T) {
	ingress := map[string]any{"enabled": true, "hosts": []any{"events.example.com"}}
	for _, tc := range []struct {
		name    string
		gateway map[string]any
		wantErr string
		// config lines the gateway's configuration has and has not
		config, notConfig []string
		// notes lines the notes have
		notes []string
	}{
		{
			name:      "neither",
			gateway:   map[string]any{"ingress": ingress},
			notConfig: []string{"tls-cert-file", "tls-key-file", "h2c"},
			notes:     []string{"curl -N http://127.0.0.1:8080/streams/orders", "http://sse-ssegate-gateway.events.svc:80/streams/<topic>"},
		},
		{
			name:      "TLS",
			gateway:   map[string]any{"tls": map[string]any{"secretName": "gateway-tls"}, "ingress": ingress, "httpRoute": map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public"}}}},
			config:    []string{`tls-cert-file: "/etc/ssegate/tls/tls.crt"`, `tls-key-file: "/etc/ssegate/tls/tls.key"`},
			notConfig: []string{"h2c"},
			notes: []string{
				"curl -N --insecure https://127.0.0.1:8080/streams/orders", "https://sse-ssegate-gateway.events.svc:80/streams/<topic>",
				"Secret gateway-tls", "BackendTLSPolicy",
			},
		},
		{
			name: "TLS with the Secret's own keys and the Ingress's own backend protocol",
			gateway: map[string]any{
				"tls":     map[string]any{"secretName": "gateway-tls", "certKey": "cert.pem", "keyKey": "key.pem"},
				"ingress": map[string]any{"enabled": true, "hosts": []any{"events.example.com"}, "annotations": map[string]any{"nginx.ingress.kubernetes.io/backend-protocol": "AUTO_HTTP"}},
			},
			config: []string{`tls-cert-file: "/etc/ssegate/tls/cert.pem"`, `tls-key-file: "/etc/ssegate/tls/key.pem"`},
		},
		{
			name:      "h2c",
			gateway:   map[string]any{"h2c": true, "ingress": ingress},
			config:    []string{"h2c: true"},
			notConfig: []string{"tls-cert-file", "tls-key-file"},
			notes:     []string{"curl -N --http2-prior-knowledge http://127.0.0.1:8080/streams/orders", "http://sse-ssegate-gateway.events.svc:80/streams/<topic>"},
		},
		{
			name:    "h2c with TLS",
			gateway: map[string]any{"h2c": true, "tls": map[string]any{"secretName": "gateway-tls"}},
			wantErr: "gateway.h2c and gateway.tls.secretName are set together",
		},
		{
			name:    "an unknown TLS value",
			gateway: map[string]any{"tls": map[string]any{"secret": "gateway-tls"}},
			wantErr: "schema",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.gateway["topics"] = []any{"orders"}
			vals := map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}, "gateway": tc.gateway}
			_, typed, ok := renderCase(t, vals, tc.wantErr, tc.config, tc.notConfig, tc.notes) // with checkChartTLS
			if !ok {
				return
			}
			if pods := find[*corev1.Pod](typed); len(pods) != 1 {
				t.Errorf("%d helm test pods, want 1", len(pods))
			}
		})
	}
}

// renderCase renders vals for a table case of the chart: it checks the render fails with wantErr when one
// is given (and returns false), else renders, checks the chart's invariants on the objects, and that the
// gateway's configuration holds every line of config and none of notConfig and the notes every line of notes.
func renderCase(t *testing.T, vals map[string]any, wantErr string, config, notConfig, notes []string) (map[string]string, []runtime.Object, bool) {
	t.Helper()
	out, err := renderChart(t, vals)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("render: %v, want an error saying %q", err, wantErr)
		}
		return nil, nil, false
	}
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	typed, other, _ := objects(t, out)
	checkChartInvariants(t, vals, typed, other)
	cm := out["ssegate/templates/gateway-configmap.yaml"]
	for _, w := range config {
		if !strings.Contains(cm, w) {
			t.Errorf("the gateway's configuration lacks %q:\n%s", w, cm)
		}
	}
	for _, w := range notConfig {
		if strings.Contains(cm, w) {
			t.Errorf("the gateway's configuration has %q:\n%s", w, cm)
		}
	}
	for _, w := range notes {
		if n := out["ssegate/templates/NOTES.txt"]; !strings.Contains(n, w) {
			t.Errorf("the notes lack %q:\n%s", w, n)
		}
	}
	return out, typed, true
}
