package schema

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	"github.com/ssegate/ssegate/pkg/secret"
)

// RegistryConfig is how to reach a schema registry's REST API (Confluent's, or a compatible one: Apicurio's
// /apis/ccompat/v7, Redpanda's, Karapace).
type RegistryConfig struct {
	// URLs of the registry; each request goes to the first that answers, each URL within Timeout.
	URLs []string
	// Username and PasswordFile: HTTP basic authentication (Confluent Cloud: an API key and secret). The
	// password file is read again when it changes (see package secret).
	Username, PasswordFile string
	// TokenFile holds a bearer token, read again when it changes (a token that a sidecar or the kubelet
	// rotates keeps working).
	TokenFile string
	// TLS of https URLs: CAs to trust, a client certificate; its files are read again when they change.
	TLS kafkaconn.TLSConfig
	// Timeout of one request to one URL. Default 5s. A lookup may take LookupTimeout.
	Timeout time.Duration
}

// LookupTimeout is how long one lookup may take: Timeout for each URL, so that a first URL that hangs leaves
// the next one its whole Timeout.
func (c RegistryConfig) LookupTimeout() time.Duration {
	t := c.Timeout
	if t <= 0 {
		t = 5 * time.Second
	}
	return t * time.Duration(max(1, len(c.URLs)))
}

// maxAnswer bounds the body of a registry's answer: a schema and its metadata. A registry (or what answers
// in its place) that sends more is not read further, and the lookup fails.
const maxAnswer = 8 << 20

// errAnswerTooLong is a registry answer longer than maxAnswer.
var errAnswerTooLong = errors.New("the registry's answer is longer than 8 MiB")

// Validate checks the settings without touching the network or the file system; its errors name the
// setting at fault.
func (c RegistryConfig) Validate() error {
	if len(c.URLs) == 0 {
		return fmt.Errorf("schema-registry-url: no URL")
	}
	for _, u := range c.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("schema-registry-url: %q: want an http or https URL", u)
		}
		if c.Username != "" && p.Scheme == "http" && !loopback(p.Hostname()) {
			return fmt.Errorf("schema-registry-username: basic authentication would send the password in clear to %q: use https", u)
		}
	}
	switch {
	case c.Username != "" && c.PasswordFile == "":
		return fmt.Errorf("schema-registry-username: needs schema-registry-password-file")
	case c.Username != "" && c.TokenFile != "":
		return fmt.Errorf("schema-registry-username and schema-registry-token-file: basic or bearer authentication, not both")
	case (c.TLS.CertFile == "") != (c.TLS.KeyFile == ""):
		return fmt.Errorf("schema-registry-cert-file and schema-registry-key-file: set both or neither")
	}
	return nil
}

// NewRegistry returns a client of the registry c names. It checks the settings and reads the TLS, password
// and token files once, to check them; it does not touch the network.
func NewRegistry(c RegistryConfig) (*sr.Client, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	d, err := c.TLS.NewDialer()
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	tc, err := c.TLS.Load()
	if err != nil {
		return nil, fmt.Errorf("schema registry: %w", err)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// Direct https connections are made by the dialer, with the TLS files as they are then; through a proxy,
	// http.Transport makes the TLS connection itself, with those of the start.
	transport.TLSClientConfig, transport.DialTLSContext = tc, d.DialContext
	opts := []sr.ClientOpt{
		sr.URLs(c.URLs...),
		// The client's timeout is per request, so per URL: sr tries the next URL after an error.
		sr.HTTPClient(&http.Client{Transport: limitedBodies{transport}, Timeout: c.Timeout}),
		sr.UserAgent("ssegate"),
	}
	if c.Username != "" {
		pass := secret.NewFile("schema-registry-password-file", c.PasswordFile)
		if _, err := pass.Read(); err != nil {
			return nil, err
		}
		opts = append(opts, sr.PreReq(func(req *http.Request) error {
			pw, err := pass.Text()
			if err != nil {
				return err
			}
			req.SetBasicAuth(c.Username, pw)
			return nil
		}))
	}
	if c.TokenFile != "" {
		tok := secret.NewFile("schema-registry-token-file", c.TokenFile)
		if _, err := tok.Read(); err != nil {
			return nil, err
		}
		opts = append(opts, sr.PreReq(func(req *http.Request) error {
			t, err := tok.Text()
			if err != nil {
				return err
			}
			req.Header.Set("Authorization", "Bearer "+t)
			return nil
		}))
	}
	return sr.NewClient(opts...)
}

// loopback reports whether host is a loopback name or address (a sidecar next to the gateway).
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// limitedBodies is a RoundTripper whose answers' bodies end with errAnswerTooLong after maxAnswer bytes.
type limitedBodies struct{ next http.RoundTripper }

func (l limitedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err == nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxAnswer}
	}
	return resp, err
}

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more than allowed tells a body of exactly maxAnswer bytes from a longer one.
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n > 0 {
			return 0, errAnswerTooLong
		}
		return b.ReadCloser.Read(p)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
