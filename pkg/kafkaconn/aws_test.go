package kafkaconn

import (
	"context"
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

	"github.com/ssegate/ssegate/pkg/kafkatest"
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

// containerEndpoint is a stand-in for the container credentials endpoint (ECS agent, EKS Pod Identity agent):
// credentials AK1, AK2, ... expiring at exp, for requests with the Authorization header auth (none when
// empty); it answers 403 while down is set and holds requests while hang is set, until the test ends.
type containerEndpoint struct {
	srv     *httptest.Server
	calls   atomic.Int64 // successful answers
	asked   atomic.Int64 // requests
	down    atomic.Bool
	hang    atomic.Bool
	lastURI atomic.Value
}

func newContainerEndpoint(t *testing.T, auth string, exp time.Time) *containerEndpoint {
	e := &containerEndpoint{}
	release := make(chan struct{})
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.asked.Add(1)
		e.lastURI.Store(r.URL.RequestURI())
		if e.hang.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		if e.down.Load() || r.Header.Get("Authorization") != auth {
			http.Error(w, `{"message":"no"}`, http.StatusForbidden)
			return
		}
		n := e.calls.Add(1)
		_, _ = fmt.Fprintf(w, `{"AccessKeyId":"AK%d","SecretAccessKey":"S","Token":"T","Expiration":%q}`, n, exp.Format(time.RFC3339))
	}))
	t.Cleanup(func() { close(release); e.srv.Close() })
	return e
}

// TestAWSContainerCredentials: EKS Pod Identity's endpoint is asked with the token from its file, again five
// minutes before the credentials expire, in the background: the old credentials are handed out meanwhile, and
// while they are valid when the endpoint fails. Without valid credentials the endpoint's refusal is the answer.
func TestAWSContainerCredentials(t *testing.T) {
	exp := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	e := newContainerEndpoint(t, "pod-token", exp)
	tokFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokFile, []byte("pod-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := newAWSSource(envOf(map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": e.srv.URL, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokFile}))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at         time.Time
		down       bool
		want, then string // the access key (or a piece of the error) handed out, and once the background fetch ended
	}{
		{exp.Add(-time.Hour), false, "AK1", "AK1"},
		{exp.Add(-6 * time.Minute), false, "AK1", "AK1"},
		{exp.Add(-4 * time.Minute), true, "AK1", "AK1"},                      // due, the endpoint fails, still valid
		{exp.Add(-4*time.Minute + 2*refreshBackoffMax), false, "AK1", "AK2"}, // due, after the backoff: renewed
	} {
		src.now = func() time.Time { return step.at }
		e.down.Store(step.down)
		for i, want := range []string{step.want, step.then} {
			a, err := src.get(t.Context())
			got := a.AccessKey
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, want) {
				t.Fatalf("at %v (endpoint down %v), get %d: %q, want %q", step.at, step.down, i, got, want)
			}
			src.r.settle()
		}
	}
	fresh, err := newAWSSource(envOf(map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": e.srv.URL, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokFile}))
	if err != nil {
		t.Fatal(err)
	}
	e.down.Store(true) // nothing cached: the failure is the answer
	if _, err := fresh.get(t.Context()); !errors.Is(err, ErrAWSCredentials) || !strings.Contains(err.Error(), "403") {
		t.Fatalf("endpoint refusing: %v, want ErrAWSCredentials naming the status", err)
	}
}

// TestAWSRefreshDoesNotWait: credentials due for refresh while the endpoint hangs are handed out at once to
// every handshake, which do not queue behind the one background request; the endpoint's answer replaces them
// once it comes.
func TestAWSRefreshDoesNotWait(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	e := newContainerEndpoint(t, "", exp)
	src, err := newAWSSource(envOf(map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": e.srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	if a, err := src.get(t.Context()); err != nil || a.AccessKey != "AK1" {
		t.Fatalf("first get: %+v, %v", a, err)
	}
	e.hang.Store(true)
	src.now = func() time.Time { return exp.Add(-time.Minute) } // due, still valid
	handshakesDoNotQueue(t, func(ctx context.Context) (string, error) {
		a, err := src.get(ctx)
		return a.AccessKey, err
	}, "AK1", &e.asked, 2)
}

// handshakesDoNotQueue runs 6 concurrent gets while the provider hangs and wants each to return want at once;
// asked counts the provider's requests, wantAsked of them by the end (the one background refresh included).
func handshakesDoNotQueue(t *testing.T, get func(context.Context) (string, error), want string, asked *atomic.Int64, wantAsked int64) {
	t.Helper()
	const handshakes = 6
	results := make(chan string, handshakes)
	for range handshakes {
		go func() {
			v, err := get(t.Context())
			if err != nil {
				v = err.Error()
			}
			results <- v
		}()
	}
	// The provider holds its request until the test ends (or the client's 10 s timeout): a get that waited
	// for it would not be back in time.
	deadline := time.After(5 * time.Second)
	for i := range handshakes {
		select {
		case v := <-results:
			if v != want {
				t.Fatalf("handshake %d got %q, want the cached %q", i, v, want)
			}
		case <-deadline:
			t.Fatalf("%d of %d handshakes still wait for the hanging provider", handshakes-i, handshakes)
		}
	}
	kafkatest.WaitFor(t, 5*time.Second, "the background refresh to reach the provider", func() bool { return asked.Load() == wantAsked })
	if n := asked.Load(); n != wantAsked {
		t.Fatalf("the provider was asked %d times, want %d (one refresh for all the handshakes)", n, wantAsked)
	}
}

// TestAWSECSTaskRole: an ECS task role's credentials come from the ECS agent at the relative URI, before a
// full URI the environment names too; no authorization token is needed.
func TestAWSECSTaskRole(t *testing.T) {
	e := newContainerEndpoint(t, "", time.Now().Add(time.Hour))
	src, err := newAWSSource(envOf(map[string]string{
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/3f1c", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:1/never",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if src.ecsAgent != "http://169.254.170.2" {
		t.Fatalf("ECS agent %q", src.ecsAgent)
	}
	src.ecsAgent = e.srv.URL
	a, err := src.get(t.Context())
	if err != nil || a.AccessKey != "AK1" || a.SecretKey != "S" || a.SessionToken != "T" {
		t.Fatalf("get: %+v, %v", a, err)
	}
	if uri, _ := e.lastURI.Load().(string); uri != "/v2/credentials/3f1c" {
		t.Fatalf("asked at %q, want the relative URI", uri)
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
	if err != nil || a.AccessKey != "ASIA1" || a.SecretKey != "S1" || a.SessionToken != "T1" || !src.r.cur.expires.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("get: %+v (expires %v), %v", a, src.r.cur.expires, err)
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
		{"ECS task role", Config{TLS: tls}, map[string]string{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/x"}, nil},
		{"full URI, http to the EKS agent", Config{TLS: tls}, map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials"}, nil},
		{"full URI, http to loopback", Config{TLS: tls}, map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://127.0.0.1:51679/creds"}, nil},
		{"full URI, https anywhere", Config{TLS: tls}, map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "https://creds.example/x"}, nil},
		{"full URI, http elsewhere", Config{TLS: tls}, map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://creds.example/x"}, ErrAWSCredentials},
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
