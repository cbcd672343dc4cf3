package kafkaconn

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
)

// AWS_MSK_IAM takes its credentials where AWS's own SDKs find them in a pod or on a host, from the standard
// environment variables, in this order:
//
//  1. AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN): fixed credentials.
//  2. AWS_CONTAINER_CREDENTIALS_FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE or
//     AWS_CONTAINER_AUTHORIZATION_TOKEN: EKS Pod Identity (and ECS task roles), which set them.
//  3. AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN (AWS_ROLE_SESSION_NAME optional): IAM roles for service
//     accounts (IRSA), through STS AssumeRoleWithWebIdentity at AWS_ENDPOINT_URL_STS, or at the regional
//     endpoint of AWS_REGION (or AWS_DEFAULT_REGION).
//
// Temporary credentials are used until awsRefreshBefore their expiry, then asked for again.
const awsRefreshBefore = 5 * time.Minute

// awsSource gets and caches AWS credentials; safe for concurrent use.
type awsSource struct {
	getenv func(string) string
	client *http.Client
	now    func() time.Time
	fetch  func(ctx context.Context) (aws.Auth, time.Time, error) // nil: fixed credentials in auth

	mu      sync.Mutex
	auth    aws.Auth
	expires time.Time
}

// newAWSSource picks the first source of credentials the environment names; an error says none is named.
func newAWSSource(getenv func(string) string) (*awsSource, error) {
	s := &awsSource{getenv: getenv, client: &http.Client{Timeout: tokenTimeout}, now: time.Now}
	switch {
	case getenv("AWS_ACCESS_KEY_ID") != "" && getenv("AWS_SECRET_ACCESS_KEY") != "":
		s.auth = aws.Auth{AccessKey: getenv("AWS_ACCESS_KEY_ID"), SecretKey: getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: getenv("AWS_SESSION_TOKEN")}
	case getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") != "":
		s.fetch = s.container
	case getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "" && getenv("AWS_ROLE_ARN") != "":
		if s.stsEndpoint() == "" {
			return nil, fmt.Errorf("sasl mechanism AWS_MSK_IAM with a web identity needs AWS_REGION (or AWS_ENDPOINT_URL_STS): %w", ErrAWSCredentials)
		}
		s.fetch = s.webIdentity
	default:
		return nil, fmt.Errorf("sasl mechanism AWS_MSK_IAM finds no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"or run with EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI) or IRSA (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN): %w", ErrAWSCredentials)
	}
	return s, nil
}

// mechanism is the AWS_MSK_IAM mechanism signing each authentication with the source's credentials.
func (s *awsSource) mechanism() sasl.Mechanism {
	return aws.ManagedStreamingIAM(s.get)
}

// get returns credentials not due for refresh; a failed refresh keeps the old ones while they are valid.
func (s *awsSource) get(ctx context.Context) (aws.Auth, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fetch == nil {
		return s.auth, nil
	}
	now := s.now()
	if s.auth.AccessKey != "" && now.Before(s.expires.Add(-awsRefreshBefore)) {
		return s.auth, nil
	}
	auth, exp, err := s.fetch(ctx)
	if err != nil {
		if s.auth.AccessKey != "" && now.Before(s.expires) {
			return s.auth, nil
		}
		return aws.Auth{}, err
	}
	s.auth, s.expires = auth, exp
	return auth, nil
}

// container asks the container credentials endpoint (EKS Pod Identity, ECS).
func (s *awsSource) container(ctx context.Context) (aws.Auth, time.Time, error) {
	uri := s.getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")
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
