package kafkaconn

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
)

// AWS_MSK_IAM takes its credentials where AWS's own SDKs find them in a pod or on a host, from the standard
// environment variables, in this order:
//
//  1. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN): fixed credentials.
//  2. AWS_CONTAINER_CREDENTIALS_RELATIVE_URI: an ECS task role, from the ECS agent at
//     http://169.254.170.2 followed by that path.
//  3. AWS_CONTAINER_CREDENTIALS_FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or
//     AWS_CONTAINER_AUTHORIZATION_TOKEN: EKS Pod Identity (and ECS on other hosts), which set them. The URI
//     is https, or http to a loopback address or to the ECS and EKS agents' link-local addresses, as AWS's
//     SDKs require: the authorization token goes nowhere else.
//  4. AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN (AWS_ROLE_SESSION_NAME optional): IAM roles for service
//     accounts (IRSA), through STS AssumeRoleWithWebIdentity at AWS_ENDPOINT_URL_STS, or at the regional
//     endpoint of AWS_REGION (or AWS_DEFAULT_REGION).
//
// Temporary credentials are refreshed in the background awsRefreshBefore their expiry (or once 80% of a
// shorter lifetime has passed), the old ones handed out meanwhile.
const awsRefreshBefore = 5 * time.Minute

// ecsAgent is where the ECS agent serves a task's credentials (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI).
const ecsAgent = "http://169.254.170.2"

// awsSource gets and caches AWS credentials; safe for concurrent use.
type awsSource struct {
	getenv   func(string) string
	client   *http.Client
	now      func() time.Time
	ecsAgent string    // ecsAgent; a test's stand-in
	fixed    *aws.Auth // fixed credentials; nil for temporary ones from fetch
	fetch    func(ctx context.Context) (aws.Auth, time.Time, error)
	r        *refresher[aws.Auth] // of fetch
}

// newAWSSource picks the first source of credentials the environment names; an error says none is named.
func newAWSSource(getenv func(string) string) (*awsSource, error) {
	s := &awsSource{getenv: getenv, client: &http.Client{Timeout: tokenTimeout}, now: time.Now, ecsAgent: ecsAgent}
	switch {
	case getenv("AWS_ACCESS_KEY_ID") != "" && getenv("AWS_SECRET_ACCESS_KEY") != "":
		s.fixed = &aws.Auth{AccessKey: getenv("AWS_ACCESS_KEY_ID"), SecretKey: getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: getenv("AWS_SESSION_TOKEN")}
		return s, nil
	case getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") != "":
		s.fetch = s.container
	case getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") != "":
		if err := checkContainerURI(getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")); err != nil {
			return nil, err
		}
		s.fetch = s.container
	case getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "" && getenv("AWS_ROLE_ARN") != "":
		if s.stsEndpoint() == "" {
			return nil, fmt.Errorf("sasl mechanism AWS_MSK_IAM with a web identity needs AWS_REGION (or AWS_ENDPOINT_URL_STS): %w", ErrAWSCredentials)
		}
		s.fetch = s.webIdentity
	default:
		return nil, fmt.Errorf("sasl mechanism AWS_MSK_IAM finds no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"or run with an ECS task role (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI), EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI) "+
			"or IRSA (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN): %w", ErrAWSCredentials)
	}
	s.r = newRefresher(s.fetchCred, func() time.Time { return s.now() })
	return s, nil
}

// checkContainerURI refuses a full container credentials URI that would send the authorization token in clear
// to a host other than the local agents.
func checkContainerURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI %q: want an http or https URL: %w", raw, ErrAWSCredentials)
	}
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip != nil && (ip.IsLoopback() || ip.Equal(net.ParseIP("169.254.170.2")) || ip.Equal(net.ParseIP("169.254.170.23")) || ip.Equal(net.ParseIP("fd00:ec2::23"))) {
		return nil
	}
	return fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI %q: an http URI must name a loopback address or the ECS or EKS agent "+
		"(169.254.170.2, 169.254.170.23, fd00:ec2::23); use https for any other host: %w", raw, ErrAWSCredentials)
}

// mechanism is the AWS_MSK_IAM mechanism signing each authentication with the source's credentials.
func (s *awsSource) mechanism() sasl.Mechanism {
	return aws.ManagedStreamingIAM(s.get)
}

// get returns the current credentials. Credentials due for refresh are still handed out while new ones are
// fetched in the background; a failed refresh keeps the old ones while they are valid.
func (s *awsSource) get(ctx context.Context) (aws.Auth, error) {
	if s.fixed != nil {
		return *s.fixed, nil
	}
	return s.r.get(ctx)
}

// fetchCred fetches credentials and says when they are due for refresh and expire. Credentials without an
// expiry are taken to live tokenDefaultLife.
func (s *awsSource) fetchCred(ctx context.Context) (cred[aws.Auth], error) {
	now := s.now()
	auth, exp, err := s.fetch(ctx)
	if err != nil {
		return cred[aws.Auth]{}, err
	}
	if exp.IsZero() {
		exp = now.Add(tokenDefaultLife)
	}
	before := min(awsRefreshBefore, time.Duration(float64(exp.Sub(now))*(1-refreshAt)))
	return cred[aws.Auth]{val: auth, refresh: exp.Add(-before), expires: exp}, nil
}

// container asks the container credentials endpoint (ECS task roles, EKS Pod Identity).
func (s *awsSource) container(ctx context.Context) (aws.Auth, time.Time, error) {
	uri := s.getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
	if rel := s.getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
		uri = s.ecsAgent + rel
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return aws.Auth{}, time.Time{}, fmt.Errorf("kafkaconn: aws container credentials: %w", err)
	}
	tok := s.getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN")
	if f := s.getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); f != "" {
		b, err := os.ReadFile(f) // read again each time: the token is rotated
		if err != nil {
			return aws.Auth{}, time.Time{}, fmt.Errorf("kafkaconn: aws container authorization token: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok != "" {
		req.Header.Set("Authorization", tok)
	}
	var ans struct {
		AccessKeyID     string `json:"AccessKeyId"`
		SecretAccessKey string `json:"SecretAccessKey"`
		Token           string `json:"Token"`
		Expiration      time.Time
	}
	body, err := s.do(req, "container credentials")
	if err == nil {
		err = json.Unmarshal(body, &ans)
	}
	if err == nil && ans.AccessKeyID == "" {
		err = fmt.Errorf("kafkaconn: aws container credentials at %s: no AccessKeyId in the answer: %w", uri, ErrAWSCredentials)
	}
	if err != nil {
		return aws.Auth{}, time.Time{}, err
	}
	return aws.Auth{AccessKey: ans.AccessKeyID, SecretKey: ans.SecretAccessKey, SessionToken: ans.Token}, ans.Expiration, nil
}

// stsEndpoint is where AssumeRoleWithWebIdentity goes.
func (s *awsSource) stsEndpoint() string {
	if e := s.getenv("AWS_ENDPOINT_URL_STS"); e != "" {
		return e
	}
	region := s.getenv("AWS_REGION")
	if region == "" {
		region = s.getenv("AWS_DEFAULT_REGION")
	}
	if region == "" {
		return ""
	}
	return "https://sts." + region + ".amazonaws.com"
}

// webIdentity exchanges the service account's token for credentials of AWS_ROLE_ARN (IRSA).
func (s *awsSource) webIdentity(ctx context.Context) (aws.Auth, time.Time, error) {
	tok, err := os.ReadFile(s.getenv("AWS_WEB_IDENTITY_TOKEN_FILE")) // read again each time: kubelet rotates it
	if err != nil {
		return aws.Auth{}, time.Time{}, fmt.Errorf("kafkaconn: aws web identity token: %w", err)
	}
	session := s.getenv("AWS_ROLE_SESSION_NAME")
	if session == "" {
		session = "ssegate"
	}
	form := url.Values{
		"Action": {"AssumeRoleWithWebIdentity"}, "Version": {"2011-06-15"}, "RoleArn": {s.getenv("AWS_ROLE_ARN")},
		"RoleSessionName": {session}, "WebIdentityToken": {strings.TrimSpace(string(tok))},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.stsEndpoint(), strings.NewReader(form.Encode()))
	if err != nil {
		return aws.Auth{}, time.Time{}, fmt.Errorf("kafkaconn: aws sts: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var ans struct {
		Credentials struct {
			AccessKeyID     string `xml:"AccessKeyId"`
			SecretAccessKey string `xml:"SecretAccessKey"`
			SessionToken    string `xml:"SessionToken"`
			Expiration      time.Time
		} `xml:"AssumeRoleWithWebIdentityResult>Credentials"`
	}
	body, err := s.do(req, "sts AssumeRoleWithWebIdentity")
	if err == nil {
		err = xml.Unmarshal(body, &ans)
	}
	if err == nil && ans.Credentials.AccessKeyID == "" {
		err = fmt.Errorf("kafkaconn: aws sts at %s: no credentials in the answer: %w", s.stsEndpoint(), ErrAWSCredentials)
	}
	if err != nil {
		return aws.Auth{}, time.Time{}, err
	}
	c := ans.Credentials
	return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken}, c.Expiration, nil
}

// do sends req and returns the body of a 200 answer; any other answer is an error quoting the start of it.
func (s *awsSource) do(req *http.Request, what string) ([]byte, error) {
	resp, err := roundTrip(s.client, req)
	if err != nil {
		return nil, fmt.Errorf("kafkaconn: aws %s: %w", what, err)
	}
	if resp.code != http.StatusOK {
		return nil, fmt.Errorf("kafkaconn: aws %s at %s: %s: %.200s: %w", what, req.URL.Redacted(), resp.status, resp.body, ErrAWSCredentials)
	}
	return resp.body, nil
}
