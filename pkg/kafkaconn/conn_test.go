package kafkaconn

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestValidate: what Validate refuses, with the sentinel and the setting named; SASL PLAIN, which sends the
// password in clear, needs TLS or an explicit allowance, SCRAM does not.
func TestValidate(t *testing.T) {
	brokers := []string{"k:9092"}
	plain := SASLConfig{Mechanism: MechanismPlain, Username: "u", Password: "p"}
	allowed := plain
	allowed.AllowPlaintext = true
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    error  // nil: valid
		setting string // a substring the error must name
	}{
		{"plaintext, no SASL", Config{Brokers: brokers}, nil, ""},
		{"no brokers", Config{}, ErrNoBrokers, "brokers"},
		{"broker without port", Config{Brokers: []string{"k"}}, ErrBadBroker, "brokers"},
		{"cert without key", Config{Brokers: brokers, TLS: TLSConfig{CertFile: "c.pem"}}, ErrTLSPair, "tls cert file"},
		{"unknown mechanism", Config{Brokers: brokers, SASL: SASLConfig{Mechanism: "GSSAPI", Username: "u"}}, ErrMechanism, "sasl mechanism"},
		{"no username", Config{Brokers: brokers, SASL: SASLConfig{Mechanism: MechanismPlain}}, ErrNoUsername, "sasl username"},
		{"PLAIN without TLS", Config{Brokers: brokers, SASL: plain}, ErrPlainWithoutTLS, "kafka-sasl-allow-plaintext"},
		{"plain in lower case without TLS", Config{Brokers: brokers, SASL: SASLConfig{Mechanism: "plain", Username: "u"}}, ErrPlainWithoutTLS, "kafka-tls"},
		{"PLAIN without TLS, allowed", Config{Brokers: brokers, SASL: allowed}, nil, ""},
		{"PLAIN with TLS", Config{Brokers: brokers, TLS: TLSConfig{Enabled: true}, SASL: plain}, nil, ""},
		{"PLAIN with a CA file, which implies TLS", Config{Brokers: brokers, TLS: TLSConfig{CAFile: "ca.pem"}, SASL: plain}, nil, ""},
		{"SCRAM-SHA-256 without TLS", Config{Brokers: brokers, SASL: SASLConfig{Mechanism: MechanismScramSHA256, Username: "u"}}, nil, ""},
		{"SCRAM-SHA-512 without TLS", Config{Brokers: brokers, SASL: SASLConfig{Mechanism: MechanismScramSHA512, Username: "u"}}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.setting) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Validate: %v, want %v on one line naming %q", err, tc.want, tc.setting)
			}
			if _, err := tc.cfg.Opts(); !errors.Is(err, tc.want) {
				t.Fatalf("Opts: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestConfigHidesSecrets: a Config printed with %v, %+v, %#v or %s shows its settings but neither the SASL
// password nor the OAuth client secret.
func TestConfigHidesSecrets(t *testing.T) {
	c := Config{Brokers: []string{"k:9092"}, SASL: SASLConfig{
		Mechanism: MechanismScramSHA512, Username: "the-user", Password: "pw-SECRET", PasswordFile: "/run/pw",
		OAuth: OAuthConfig{TokenURL: "https://idp.example/token", ClientID: "the-client", ClientSecret: "oauth-SECRET"},
	}}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{c, &c, c.SASL, c.SASL.OAuth} {
			s := fmt.Sprintf(verb, v)
			if strings.Contains(s, "SECRET") {
				t.Errorf("%s of %T shows a secret: %s", verb, v, s)
			}
			if !strings.Contains(s, "(hidden)") {
				t.Errorf("%s of %T does not say a secret is set: %s", verb, v, s)
			}
		}
	}
	if s := fmt.Sprintf("%+v", c); !strings.Contains(s, "Username:the-user") || !strings.Contains(s, "ClientID:the-client") || !strings.Contains(s, "PasswordFile:/run/pw") {
		t.Errorf("%%+v hides more than the secrets: %s", s)
	}
}
