package app

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// bothServices are chart values with kafka as given, the gateway on one topic and ingest on one source: a
// Kafka setting must reach both services' configurations.
func bothServices(kafka map[string]any) map[string]any {
	return map[string]any{
		"kafka":   kafka,
		"gateway": map[string]any{"topics": []any{"t"}},
		"ingest": map[string]any{
			"enabled": true, "sources": []any{map[string]any{"name": "wiki", "url": "https://stream.example.com/sse", "topic": "wiki"}},
		},
		"redis": map[string]any{"addr": "redis:6379"},
	}
}

// TestChartSASLPlaintext: SASL PLAIN renders without TLS only with kafka.sasl.allowPlaintext, which reaches both
// services' configuration as kafka-sasl-allow-plaintext; with TLS, or with SCRAM, no allowance is needed.
func TestChartSASLPlaintext(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tls   bool
		sasl  map[string]any
		allow bool // kafka-sasl-allow-plaintext in the configuration
	}{
		{"PLAIN allowed without TLS", false, map[string]any{"mechanism": "PLAIN", "allowPlaintext": true}, true},
		{"PLAIN with TLS", true, map[string]any{"mechanism": "PLAIN"}, false},
		{"SCRAM without TLS", false, map[string]any{"mechanism": "SCRAM-SHA-256"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.sasl["username"], tc.sasl["passwordSecret"] = "u", map[string]any{"name": "pw"}
			out, err := renderChart(t, bothServices(map[string]any{"brokers": []any{"k:9092"}, "tls": map[string]any{"enabled": tc.tls}, "sasl": tc.sasl}))
			if err != nil {
				t.Fatal(err)
			}
			configs := 0
			for name, body := range out {
				if !strings.Contains(body, "kafka-sasl-mechanism:") {
					continue
				}
				configs++
				if got := strings.Contains(body, "kafka-sasl-allow-plaintext: true"); got != tc.allow {
					t.Errorf("%s: kafka-sasl-allow-plaintext %v, want %v", name, got, tc.allow)
				}
			}
			if configs < 2 {
				t.Fatalf("%d configurations with SASL rendered, want the gateway's and the ingest's", configs)
			}
		})
	}
}

// TestChartOAuthBearer: with OAUTHBEARER both services get the token endpoint, client id, scope and the
// client secret as a file from its Secret, and no username or password; a missing token endpoint, client id
// or Secret fails the install with a message naming the value.
func TestChartOAuthBearer(t *testing.T) {
	vals := func(oauth map[string]any) map[string]any {
		return bothServices(map[string]any{
			"brokers": []any{"k:9092"}, "tls": map[string]any{"enabled": true},
			"sasl": map[string]any{"mechanism": "OAUTHBEARER", "oauth": oauth},
		})
	}
	full := func() map[string]any {
		return map[string]any{
			"tokenUrl": "https://idp.example/oauth2/token", "clientId": "ssegate", "scope": "kafka",
			"extensions":         map[string]any{"logicalCluster": "lkc-1"},
			"clientSecretSecret": map[string]any{"name": "kafka-oauth", "key": "secret"},
		}
	}
	out, err := renderChart(t, vals(full()))
	if err != nil {
		t.Fatal(err)
	}
	configs, volumes := 0, 0
	for name, body := range out {
		if strings.Contains(body, "kafka-sasl-mechanism:") {
			configs++
			for _, want := range []string{
				`kafka-sasl-oauth-token-url: "https://idp.example/oauth2/token"`, `kafka-sasl-oauth-client-id: "ssegate"`,
				"kafka-sasl-oauth-client-secret-file: /etc/ssegate/kafka-sasl/client-secret", `kafka-sasl-oauth-scope: "kafka"`,
				`kafka-sasl-oauth-extensions: {"logicalCluster":"lkc-1"}`,
			} {
				if !strings.Contains(body, want) {
					t.Errorf("%s: no %q", name, want)
				}
			}
			if strings.Contains(body, "kafka-sasl-username") || strings.Contains(body, "kafka-sasl-password-file") {
				t.Errorf("%s: a username or password with OAUTHBEARER", name)
			}
		}
		if strings.Contains(body, `secretName: "kafka-oauth"`) && strings.Contains(body, `{key: "secret", path: client-secret}`) {
			volumes++
		}
	}
	if configs < 2 || volumes < 2 {
		t.Fatalf("%d configurations with OAUTHBEARER and %d workloads mounting its Secret, want 2 of each (gateway and ingest)", configs, volumes)
	}
	for value, del := range map[string]func(map[string]any){
		"kafka.sasl.oauth.tokenUrl":                func(o map[string]any) { delete(o, "tokenUrl") },
		"kafka.sasl.oauth.clientId":                func(o map[string]any) { delete(o, "clientId") },
		"kafka.sasl.oauth.clientSecretSecret.name": func(o map[string]any) { delete(o, "clientSecretSecret") },
	} {
		o := full()
		del(o)
		if _, err := renderChart(t, vals(o)); err == nil || !strings.Contains(err.Error(), value) {
			t.Errorf("without %s: %v, want an error naming it", value, err)
		}
	}
}

// TestChartClientRack: kafka.clientRack reaches both services' configuration as kafka-client-rack; with
// kafka.clientRackFromZone the gateway's pods take it from their topology.kubernetes.io/zone label instead.
func TestChartClientRack(t *testing.T) {
	out, err := renderChart(t, bothServices(map[string]any{"brokers": []any{"k:9092"}, "clientRack": "zone-b", "clientRackFromZone": true}))
	if err != nil {
		t.Fatal(err)
	}
	configs := 0
	for _, body := range out {
		if strings.Contains(body, `kafka-client-rack: "zone-b"`) {
			configs++
		}
	}
	typed, _, _ := objects(t, out)
	sets := find[*appsv1.StatefulSet](typed)
	if configs < 2 || len(sets) != 1 {
		t.Fatalf("%d configurations with the rack (want the gateway's and the ingest's), %d StatefulSets", configs, len(sets))
	}
	found := false
	for _, e := range sets[0].Spec.Template.Spec.Containers[0].Env {
		if e.Name == "SSEGATE_KAFKA_CLIENT_RACK" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.labels['topology.kubernetes.io/zone']" {
			found = true
		}
	}
	if !found {
		t.Errorf("no SSEGATE_KAFKA_CLIENT_RACK from the zone label in %+v", sets[0].Spec.Template.Spec.Containers[0].Env)
	}
}

// TestChartAWSMSKIAM: with AWS_MSK_IAM the services get the mechanism and TLS, and neither a username nor a
// password file nor a Secret to mount: the credentials come from the pod's AWS environment.
func TestChartAWSMSKIAM(t *testing.T) {
	out, err := renderChart(t, map[string]any{
		"kafka": map[string]any{
			"brokers": []any{"b-1.msk.example:9098"}, "tls": map[string]any{"enabled": true},
			"sasl": map[string]any{"mechanism": "AWS_MSK_IAM"},
		},
		"gateway": map[string]any{"topics": []any{"t"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	configs := 0
	for name, body := range out {
		if strings.Contains(body, `kafka-sasl-mechanism: "AWS_MSK_IAM"`) {
			configs++
		}
		if strings.Contains(body, "kafka-sasl-password-file") || strings.Contains(body, "kafka-sasl-username") || strings.Contains(body, "name: kafka-sasl") {
			t.Errorf("%s: a password, username or SASL Secret with AWS_MSK_IAM", name)
		}
	}
	if configs == 0 {
		t.Fatal("no configuration with AWS_MSK_IAM")
	}
}
