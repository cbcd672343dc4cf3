package app

import (
	"io"
	"strings"
	"testing"
)

// TestLoadSASLPlaintext: ingest shares the gateway's Kafka settings: SASL PLAIN without TLS is refused at
// start, on one line naming kafka-sasl-allow-plaintext, unless that setting allows it; SCRAM needs no allowance.
func TestLoadSASLPlaintext(t *testing.T) {
	file := "sources:\n  - name: s\n    url: http://up\n    topic: out\n"
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string // a substring of the error; "" for none
	}{
		{"PLAIN without TLS", nil, []string{"--kafka-sasl-mechanism=PLAIN"}, "kafka-sasl-allow-plaintext"},
		{"PLAIN allowed by flag", nil, []string{"--kafka-sasl-mechanism=PLAIN", "--kafka-sasl-allow-plaintext"}, ""},
		{"PLAIN allowed by env", map[string]string{"SSEGATE_INGEST_KAFKA_SASL_ALLOW_PLAINTEXT": "true"}, []string{"--kafka-sasl-mechanism=PLAIN"}, ""},
		{"PLAIN with TLS", nil, []string{"--kafka-sasl-mechanism=PLAIN", "--kafka-tls"}, ""},
		{"SCRAM without TLS", nil, []string{"--kafka-sasl-mechanism=SCRAM-SHA-512"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"KAFKA_BROKERS": "k:9092", "SSEGATE_INGEST_KAFKA_SASL_USERNAME": "u"}
			for k, v := range tt.env {
				e[k] = v
			}
			args := append([]string{"--config", writeConfig(t, file)}, tt.args...)
			c, err := Load(args, env(e), io.Discard)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if strings.Contains(tt.name, "allowed") && !c.Kafka.SASL.AllowPlaintext {
					t.Fatal("the allowance did not reach the Kafka configuration")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Load: %v, want one line mentioning %q", err, tt.want)
			}
		})
	}
}
