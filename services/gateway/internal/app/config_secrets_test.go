package app

import (
	"fmt"
	"strings"
	"testing"
)

// TestConfigHidesSecrets: the gateway's whole configuration printed with %v, %+v or %#v (a debugging log line)
// shows none of the secrets it was given, while saying that each is set.
func TestConfigHidesSecrets(t *testing.T) {
	c, err := loadConfig(t, nil, withEnv(map[string]string{
		"SSEGATE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "SSEGATE_KAFKA_SASL_USERNAME": "u",
		"SSEGATE_KAFKA_SASL_PASSWORD": "kafka-SECRET", "SSEGATE_KAFKA_SASL_OAUTH_CLIENT_SECRET": "oauth-SECRET",
		"REDIS_ADDR": "r:6379", "SSEGATE_REDIS_PASSWORD": "redis-SECRET", "SSEGATE_MAX_STREAMS_PER_IP": "5",
	}), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		s := fmt.Sprintf(verb, c)
		if strings.Contains(s, "SECRET") {
			t.Errorf("%s of the configuration shows a secret: %s", verb, s)
		}
		if n := strings.Count(s, "(hidden)"); n != 3 {
			t.Errorf("%s of the configuration says %d secrets are set, want 3", verb, n)
		}
	}
}
