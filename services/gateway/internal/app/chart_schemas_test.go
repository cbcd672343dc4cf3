package app

import (
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// The value sets of the schema formats, rendered, linted, loaded by the gateway and compared with their
// golden files as the others (TestChartRenders, TestHelmLint): a registry with basic authentication, a CA and
// a client certificate, and schema files in the chart's ConfigMap.
func init() {
	chartValueSets["schema-registry"] = schemaRegistryValues()
	chartValueSets["schema-files"] = schemaFilesValues()
}

func schemaRegistryValues() map[string]any {
	return map[string]any{
		"kafka": map[string]any{"brokers": []any{"k:9092"}},
		"gateway": map[string]any{
			"topics": []any{"orders", "payments", "logs"}, "valueFormat": "avro",
			"topicValueFormats": map[string]any{"payments": "protobuf", "logs": "text"},
			"keyFormat":         "auto", "topicKeyFormats": map[string]any{"payments": "base64"},
			"schemaRegistry": map[string]any{
				"url": "https://psrc-1.eu-central-1.aws.confluent.cloud", "username": "API-KEY",
				"passwordSecret": map[string]any{"name": "schema-registry", "key": "api-secret"},
				"tls":            map[string]any{"caSecret": "registry-ca", "clientCertSecret": "registry-client"},
				"timeout":        "10s",
			},
		},
	}
}

func schemaFilesValues() map[string]any {
	return map[string]any{
		"kafka": map[string]any{"brokers": []any{"k:9092"}},
		"gateway": map[string]any{
			"topics": []any{"orders", "events"}, "topicValueFormats": map[string]any{"orders": "avro", "events": "json-schema"},
			"schemaFiles": map[string]any{
				"1.avsc": `{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}, {"name": "total", "type": "long"}]}`,
				// A JSON Schema written as a YAML object: the ConfigMap holds it as JSON.
				"2.json": map[string]any{"type": "object", "properties": map[string]any{"kind": map[string]any{"type": "string"}}},
			},
			"validateJSON": false,
		},
	}
}

// gatewayPod returns the rendered gateway StatefulSet's pod template and its configuration file as a map,
// and the ConfigMaps by name.
func gatewayPod(t *testing.T, out map[string]string) (corev1.PodTemplateSpec, map[string]any, map[string]*corev1.ConfigMap) {
	t.Helper()
	typed, _, _ := objects(t, out)
	sets := find[*appsv1.StatefulSet](typed)
	if len(sets) != 1 {
		t.Fatalf("%d StatefulSets", len(sets))
	}
	cms := map[string]*corev1.ConfigMap{}
	for _, m := range find[*corev1.ConfigMap](typed) {
		cms[m.Name] = m
	}
	cm := cms["sse-ssegate-gateway"]
	if cm == nil {
		t.Fatal("no gateway ConfigMap")
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["gateway.yaml"]), &cfg); err != nil {
		t.Fatalf("the gateway's configuration: %v", err)
	}
	return sets[0].Spec.Template, cfg, cms
}

// checkSettings checks the configuration file's settings: each of want with its value ("" for any), none of
// absent.
func checkSettings(t *testing.T, cfg map[string]any, want map[string]string, absent ...string) {
	t.Helper()
	for k, v := range want {
		got, ok := cfg[k]
		if !ok {
			t.Errorf("no %s in the configuration", k)
			continue
		}
		if s, _ := yaml.Marshal(got); v != "" && strings.TrimSpace(string(s)) != v {
			t.Errorf("%s: %s, want %s", k, strings.TrimSpace(string(s)), v)
		}
	}
	for _, k := range absent {
		if _, ok := cfg[k]; ok {
			t.Errorf("%s in the configuration: %v", k, cfg[k])
		}
	}
}

// mountOf returns the container's mount of the volume name, and the volume.
func mountOf(t *testing.T, pod corev1.PodTemplateSpec, name string) (corev1.VolumeMount, corev1.Volume) {
	t.Helper()
	var m corev1.VolumeMount
	var v corev1.Volume
	for _, x := range pod.Spec.Containers[0].VolumeMounts {
		if x.Name == name {
			m = x
		}
	}
	for _, x := range pod.Spec.Volumes {
		if x.Name == name {
			v = x
		}
	}
	if m.Name == "" || v.Name == "" {
		t.Fatalf("volume %s: mount %+v, volume %+v", name, m, v)
	}
	if !m.ReadOnly || m.SubPath != "" {
		t.Errorf("volume %s is mounted %+v, want read-only as a folder (no subPath: a rotated Secret must reach the pod)", name, m)
	}
	return m, v
}

// TestChartSchemaRegistry: a registry with basic authentication, a CA and a client certificate reaches the
// gateway's configuration as its schema-registry-* settings, with the formats; the password, CA and client
// certificate are files of Secrets mounted as folders, never values of the ConfigMap. A bearer token is
// mounted the same way.
func TestChartSchemaRegistry(t *testing.T) {
	out, err := renderChart(t, schemaRegistryValues())
	if err != nil {
		t.Fatal(err)
	}
	pod, cfg, _ := gatewayPod(t, out)
	checkSettings(t, cfg, map[string]string{
		"value-format": "avro", "topic-value-format": "logs: text\npayments: protobuf", "key-format": "auto",
		"topic-key-format":              "payments: base64",
		"schema-registry-url":           "https://psrc-1.eu-central-1.aws.confluent.cloud",
		"schema-registry-username":      "API-KEY",
		"schema-registry-password-file": "/etc/ssegate/schema-registry-auth/password",
		"schema-registry-ca-file":       "/etc/ssegate/schema-registry-ca/ca.crt",
		"schema-registry-cert-file":     "/etc/ssegate/schema-registry-client/tls.crt",
		"schema-registry-key-file":      "/etc/ssegate/schema-registry-client/tls.key",
		"schema-registry-timeout":       "10s",
	}, "schema-registry-token-file", "schema-files", "json-schema-validate")
	for name, dir := range map[string]string{
		"schema-registry-auth": "/etc/ssegate/schema-registry-auth", "schema-registry-ca": "/etc/ssegate/schema-registry-ca",
		"schema-registry-client": "/etc/ssegate/schema-registry-client",
	} {
		m, _ := mountOf(t, pod, name)
		if m.MountPath != dir {
			t.Errorf("%s mounted at %s, want %s", name, m.MountPath, dir)
		}
	}
	_, auth := mountOf(t, pod, "schema-registry-auth")
	if s := auth.Secret; s == nil || s.SecretName != "schema-registry" || len(s.Items) != 1 || s.Items[0].Key != "api-secret" || s.Items[0].Path != "password" {
		t.Errorf("schema-registry-auth volume %+v, want the key api-secret of Secret schema-registry as the file password", auth.VolumeSource)
	}
	_, ca := mountOf(t, pod, "schema-registry-ca")
	_, client := mountOf(t, pod, "schema-registry-client")
	if ca.Secret == nil || ca.Secret.SecretName != "registry-ca" || client.Secret == nil || client.Secret.SecretName != "registry-client" {
		t.Errorf("CA volume %+v, client volume %+v", ca.VolumeSource, client.VolumeSource)
	}
	if _, ok := pod.Annotations["checksum/schemas"]; ok {
		t.Error("a checksum/schemas annotation without schema files")
	}

	// A bearer token instead: the same folder, the token's file; no username or password.
	v := schemaRegistryValues()
	r := v["gateway"].(map[string]any)["schemaRegistry"].(map[string]any)
	delete(r, "username")
	delete(r, "passwordSecret")
	delete(r, "tls")
	r["url"] = "http://registry.kafka:8081, http://registry-2.kafka:8081"
	r["tokenSecret"] = map[string]any{"name": "registry-token"}
	if out, err = renderChart(t, v); err != nil {
		t.Fatal(err)
	}
	pod, cfg, _ = gatewayPod(t, out)
	checkSettings(t, cfg, map[string]string{
		"schema-registry-url":        "http://registry.kafka:8081, http://registry-2.kafka:8081",
		"schema-registry-token-file": "/etc/ssegate/schema-registry-auth/token",
	}, "schema-registry-username", "schema-registry-password-file", "schema-registry-ca-file", "schema-registry-cert-file")
	_, auth = mountOf(t, pod, "schema-registry-auth")
	if s := auth.Secret; s == nil || s.SecretName != "registry-token" || len(s.Items) != 1 || s.Items[0].Key != "token" || s.Items[0].Path != "token" {
		t.Errorf("schema-registry-auth volume %+v, want the key token of Secret registry-token as the file token", auth.VolumeSource)
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.Name == "schema-registry-ca" || vol.Name == "schema-registry-client" {
			t.Errorf("volume %s without its Secret", vol.Name)
		}
	}
}

// TestChartSchemaFiles: schemaFiles become the ConfigMap <fullname>-schemas (an object's content written as
// JSON), mounted read-only at the configuration's schema-files, and the pods roll when a schema changes
// (checksum/schemas); schemaFilesConfigMap mounts an existing ConfigMap instead, with no ConfigMap of the
// chart's and no checksum.
func TestChartSchemaFiles(t *testing.T) {
	out, err := renderChart(t, schemaFilesValues())
	if err != nil {
		t.Fatal(err)
	}
	pod, cfg, cms := gatewayPod(t, out)
	checkSettings(t, cfg, map[string]string{
		"topic-value-format": "events: json-schema\norders: avro", "schema-files": "/etc/ssegate/schemas/", "json-schema-validate": "false",
	}, "schema-registry-url", "value-format")
	cm := cms["sse-ssegate-schemas"]
	if cm == nil {
		t.Fatalf("no ConfigMap sse-ssegate-schemas among %v", cms)
	}
	if got := cm.Data["1.avsc"]; got != schemaFilesValues()["gateway"].(map[string]any)["schemaFiles"].(map[string]any)["1.avsc"] {
		t.Errorf("1.avsc: %q", got)
	}
	if got := cm.Data["2.json"]; got != `{"properties":{"kind":{"type":"string"}},"type":"object"}` {
		t.Errorf("2.json: %q, want the object as JSON", got)
	}
	m, vol := mountOf(t, pod, "schemas")
	if m.MountPath != "/etc/ssegate/schemas" || vol.ConfigMap == nil || vol.ConfigMap.Name != "sse-ssegate-schemas" {
		t.Errorf("schemas mounted %+v from %+v", m, vol.VolumeSource)
	}
	sum := pod.Annotations["checksum/schemas"]
	if sum == "" {
		t.Fatal("no checksum/schemas annotation")
	}
	v := schemaFilesValues()
	v["gateway"].(map[string]any)["schemaFiles"].(map[string]any)["3.proto"] = "syntax = \"proto3\";\nmessage Event { string kind = 1; }\n"
	if out, err = renderChart(t, v); err != nil {
		t.Fatal(err)
	}
	if pod, _, _ = gatewayPod(t, out); pod.Annotations["checksum/schemas"] == sum {
		t.Error("checksum/schemas unchanged by a new schema file: the pods would not roll")
	}

	v = schemaFilesValues()
	g := v["gateway"].(map[string]any)
	delete(g, "schemaFiles")
	g["schemaFilesConfigMap"] = "my-schemas"
	if out, err = renderChart(t, v); err != nil {
		t.Fatal(err)
	}
	pod, cfg, cms = gatewayPod(t, out)
	checkSettings(t, cfg, map[string]string{"schema-files": "/etc/ssegate/schemas/"})
	if _, vol = mountOf(t, pod, "schemas"); vol.ConfigMap == nil || vol.ConfigMap.Name != "my-schemas" {
		t.Errorf("schemas volume %+v, want ConfigMap my-schemas", vol.VolumeSource)
	}
	if cms["sse-ssegate-schemas"] != nil || pod.Annotations["checksum/schemas"] != "" {
		t.Error("a ConfigMap of schemas or a checksum with schemaFilesConfigMap")
	}
}

// TestChartSchemaRefusals: what the gateway refuses at start the chart refuses before install, with a
// message naming the values: a registry and files together, a schema format without either, unknown formats
// and topics, credentials that do not go together, registry values without a URL.
func TestChartSchemaRefusals(t *testing.T) {
	files := map[string]any{"1.avsc": `"string"`}
	for _, tc := range []struct {
		name string
		g    map[string]any
		want string
	}{
		{
			"registry and files",
			map[string]any{"valueFormat": "avro", "schemaRegistry": map[string]any{"url": "http://r:8081"}, "schemaFiles": files},
			"gateway.schemaRegistry.url and gateway.schemaFiles (or schemaFilesConfigMap) are set together",
		},
		{
			"registry and a ConfigMap",
			map[string]any{"schemaRegistry": map[string]any{"url": "http://r:8081"}, "schemaFilesConfigMap": "s"},
			"gateway.schemaRegistry.url and gateway.schemaFiles (or schemaFilesConfigMap) are set together",
		},
		{"files twice", map[string]any{"schemaFiles": files, "schemaFilesConfigMap": "s"}, "gateway.schemaFiles and gateway.schemaFilesConfigMap"},
		{"no source", map[string]any{"topicValueFormats": map[string]any{"t": "protobuf"}}, "topic t has a schema format"},
		{"no source for keys", map[string]any{"keyFormat": "avro"}, "topic t has a schema format"},
		{"unknown format", map[string]any{"valueFormat": "json"}, `gateway.valueFormat is "json"`},
		{"unknown topic format", map[string]any{"topicKeyFormats": map[string]any{"t": "AVRO"}}, `gateway.topicKeyFormats.t is "AVRO"`},
		{"topic not served", map[string]any{"topicValueFormats": map[string]any{"other": "text"}}, `gateway.topicValueFormats names "other"`},
		{
			"username without password",
			map[string]any{"schemaRegistry": map[string]any{"url": "https://r", "username": "u"}},
			"gateway.schemaRegistry.passwordSecret.name is required",
		},
		{
			"password without username",
			map[string]any{"schemaRegistry": map[string]any{"url": "https://r", "passwordSecret": map[string]any{"name": "p"}}},
			"gateway.schemaRegistry.username is required",
		},
		{
			"basic and bearer",
			map[string]any{"schemaRegistry": map[string]any{"url": "https://r", "username": "u", "passwordSecret": map[string]any{"name": "p"}, "tokenSecret": map[string]any{"name": "t"}}},
			"basic or bearer authentication, not both",
		},
		{"no URL", map[string]any{"schemaRegistry": map[string]any{"tls": map[string]any{"caSecret": "ca"}}}, "gateway.schemaRegistry.url is required"},
		{"not a URL", map[string]any{"schemaRegistry": map[string]any{"url": "https://r,registry:8081"}}, `"registry:8081" is not an http or https URL`},
		{"bad file name", map[string]any{"schemaFiles": map[string]any{"schemas/1.avsc": `"string"`}}, "gateway.schemaFiles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.g["topics"] = []any{"t"}
			_, err := renderChart(t, map[string]any{"kafka": map[string]any{"brokers": []any{"k:9092"}}, "gateway": tc.g})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want an error saying %q", err, tc.want)
			}
		})
	}
}
