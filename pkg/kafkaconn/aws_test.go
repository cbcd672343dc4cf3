package kafkaconn

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestAWSStaticCredentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and a session token) are used as
// they are, before any other source the environment names.
func TestAWSStaticCredentials(t *testing.T) {
	src, err := newAWSSource(envOf(map[string]string{
		"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_SESSION_TOKEN": "TOKEN",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:1/never",
	}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := src.get(t.Context())
	if err != nil || a.AccessKey != "AKID" || a.SecretKey != "SECRET" || a.SessionToken != "TOKEN" {
		t.Fatalf("get: %+v, %v", a, err)
	}
}

// TestAWSContainerCredentials: EKS Pod Identity's endpoint is asked with the token from its file, again only
// five minutes before the credentials expire; an endpoint that fails after that keeps the old credentials
// while they are valid.
func TestAWSContainerCredentials(t *testing.T) {
	var calls atomic.Int64
	var down atomic.Bool
	exp := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() || r.Header.Get("Authorization") != "pod-token" {
			http.Error(w, `{"message":"no"}`, http.StatusForbidden)
			return
		}
		n := calls.Add(1)
		_, _ = fmt.Fprintf(w, `{"AccessKeyId":"AK%d","SecretAccessKey":"S","Token":"T","Expiration":%q}`, n, exp.Format(time.RFC3339))
	}))
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte("pod-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := newAWSSource(envOf(map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": srv.URL, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokFile}))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at   time.Time
		down bool
		want string // access key, or a piece of the error
	}{
		{exp.Add(-time.Hour), false, "AK1"},
		{exp.Add(-6 * time.Minute), false, "AK1"},
		{exp.Add(-4 * time.Minute), true, "AK1"}, // due, the endpoint fails, the credentials are still valid
		{exp.Add(-4 * time.Minute), false, "AK2"},
	} {
		src.now = func() time.Time { return step.at }
		down.Store(step.down)
		a, err := src.get(t.Context())
		got := a.AccessKey
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, step.want) {
			t.Fatalf("at %v (endpoint down %v): %q, want %q", step.at, step.down, got, step.want)
		}
	}
	src.auth.AccessKey = "" // nothing cached: the failure is the answer
	down.Store(true)
	if _, err := src.get(t.Context()); !errors.Is(err, ErrAWSCredentials) || !strings.Contains(err.Error(), "403") {
		t.Fatalf("endpoint refusing: %v, want ErrAWSCredentials naming the status", err)
	}
}

// TestAWSWebIdentity: IRSA's token is exchanged at STS (AssumeRoleWithWebIdentity, the role and the token from
// the file) for temporary credentials.
func TestAWSWebIdentity(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("Action") != "AssumeRoleWithWebIdentity" || r.FormValue("RoleArn") != "arn:aws:iam::1:role/ssegate" ||
			r.FormValue("WebIdentityToken") != "sa-token" || r.FormValue("Version") != "2011-06-15" {
			http.Error(w, "<ErrorResponse><Error><Code>InvalidIdentityToken</Code></Error></ErrorResponse>", http.StatusBadRequest)
			return
		}
		_, _ = fmt.Fprint(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult><Credentials>
    <AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>S1</SecretAccessKey><SessionToken>T1</SessionToken>
    <Expiration>2030-01-01T00:00:00Z</Expiration>
  </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>`)
	}))
	defer srv.Close()
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte("sa-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": tokFile, "AWS_ROLE_ARN": "arn:aws:iam::1:role/ssegate", "AWS_ENDPOINT_URL_STS": srv.URL}
	src, err := newAWSSource(envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	a, err := src.get(t.Context())
	if err != nil || a.AccessKey != "ASIA1" || a.SecretKey != "S1" || a.SessionToken != "T1" || !src.expires.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("get: %+v (expires %v), %v", a, src.expires, err)
	}
	env["AWS_ROLE_ARN"] = "arn:aws:iam::1:role/other"
	src, _ = newAWSSource(envOf(env))
	if _, err := src.get(t.Context()); !errors.Is(err, ErrAWSCredentials) || !strings.Contains(err.Error(), "InvalidIdentityToken") {
		t.Fatalf("refused: %v, want ErrAWSCredentials quoting STS", err)
	}
}

// TestAWSConfig: AWS_MSK_IAM needs TLS, and credentials the environment names; a web identity without a
// region has no STS to ask. The regional STS endpoint comes from AWS_REGION.
func TestAWSConfig(t *testing.T) {
	tls := TLSConfig{Enabled: true}
	for _, tc := range []struct {
		name string
		cfg  Config
		env  map[string]string
		want error
	}{
		{"static", Config{TLS: tls}, map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}, nil},
		{"without TLS", Config{}, map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}, ErrAWSWithoutTLS},
		{"no credentials", Config{TLS: tls}, map[string]string{"AWS_ACCESS_KEY_ID": "a"}, ErrAWSCredentials},
		{"web identity without a region", Config{TLS: tls}, map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "r"}, ErrAWSCredentials},
		{"web identity", Config{TLS: tls}, map[string]string{"AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "r", "AWS_REGION": "eu-west-1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.Brokers, c.SASL, c.Getenv = []string{"b-1.msk.example:9098"}, SASLConfig{Mechanism: "aws_msk_iam"}, envOf(tc.env)
			if _, err := c.Opts(); !errors.Is(err, tc.want) {
				t.Fatalf("Opts: %v, want %v", err, tc.want)
			}
		})
	}
	s := &awsSource{getenv: envOf(map[string]string{"AWS_DEFAULT_REGION": "eu-west-1"})}
	if got := s.stsEndpoint(); got != "https://sts.eu-west-1.amazonaws.com" {
		t.Errorf("STS endpoint %q", got)
	}
}
