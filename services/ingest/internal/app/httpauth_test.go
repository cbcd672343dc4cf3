package app

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

const testToken = "0123456789abcdef-token"

// loadWith loads a one-source configuration with args and environment.
func loadWith(t *testing.T, args []string, e map[string]string) (Config, error) {
	t.Helper()
	all := map[string]string{"KAFKA_BROKERS": "127.0.0.1:1"}
	for k, v := range e {
		all[k] = v
	}
	return Load(append([]string{"--url", "http://127.0.0.1:1/events", "--topic", "out"}, args...), env(all), io.Discard)
}

// TestListenDefault: without a token the endpoints listen on loopback only; with one, everywhere. An
// explicit listen address is kept either way.
func TestListenDefault(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		env        map[string]string
		listen     string
		wantSecret string
	}{
		{"no token", nil, nil, "127.0.0.1:8081", ""},
		{"token from the environment", nil, map[string]string{"SSEGATE_INGEST_HTTP_TOKEN": testToken}, ":8081", testToken},
		{"token from a file", []string{"--http-token-file", tokenFile}, nil, ":8081", testToken},
		{"token file from the environment", nil, map[string]string{"SSEGATE_INGEST_HTTP_TOKEN_FILE": tokenFile}, ":8081", testToken},
		{"explicit listen without token", []string{"--listen", ":9000"}, nil, ":9000", ""},
		{"explicit listen with token", []string{"--listen", "10.0.0.1:9000"}, map[string]string{"SSEGATE_INGEST_HTTP_TOKEN": testToken}, "10.0.0.1:9000", testToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadWith(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if tok, err := c.httpToken().Get(); c.Listen != tc.listen || err != nil || tok != tc.wantSecret {
				t.Fatalf("listen %q token set %v (%v), want %q and %v", c.Listen, tok != "", err, tc.listen, tc.wantSecret != "")
			}
		})
	}
}

func TestHTTPTokenInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no flag for the token itself", []string{"--http-token", testToken}, nil, "http-token"},
		{"too short", nil, map[string]string{"SSEGATE_INGEST_HTTP_TOKEN": "short"}, "at least 16"},
		{"blank inside", nil, map[string]string{"SSEGATE_INGEST_HTTP_TOKEN": "0123456789 abcdefgh"}, "without blanks"},
		{"missing file", []string{"--http-token-file", "/nonexistent/token"}, nil, "http-token-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadWith(t, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v, want an error with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
}

// TestHTTPToken: with a token, /sources and /metrics answer 401 JSON (with WWW-Authenticate) unless the
// request carries it; /healthz and /readyz stay open, for GET and HEAD. Without a token everything is open.
func TestHTTPToken(t *testing.T) {
	handler := func(token string) http.Handler {
		t.Helper()
		e := map[string]string{}
		if token != "" {
			e["SSEGATE_INGEST_HTTP_TOKEN"] = token
		}
		cfg, err := loadWith(t, []string{"--listen", "127.0.0.1:0"}, e)
		if err != nil {
			t.Fatal(err)
		}
		a, err := New(cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.ln.Close(); a.closeRedis() })
		return a.srv.Handler
	}
	secured, open := handler(testToken), handler("")
	for _, tc := range []struct {
		name, method, path, auth string
		h                        http.Handler
		status                   int
	}{
		{"sources without a token", "GET", "/sources", "", secured, 401},
		{"sources with a wrong token", "GET", "/sources", "Bearer 0123456789abcdef-nope", secured, 401},
		{"sources with a longer token", "GET", "/sources", "Bearer " + testToken + "x", secured, 401},
		{"sources with another scheme", "GET", "/sources", "Basic " + testToken, secured, 401},
		{"sources with the token", "GET", "/sources", "Bearer " + testToken, secured, 200},
		{"sources with the scheme in lower case", "GET", "/sources", "bearer " + testToken, secured, 200},
		{"sources with the token in upper case", "GET", "/sources", "Bearer " + strings.ToUpper(testToken), secured, 401},
		{"metrics without a token", "GET", "/metrics", "", secured, 401},
		{"metrics with the token", "GET", "/metrics", "Bearer " + testToken, secured, 200},
		{"healthz stays open", "GET", "/healthz", "", secured, 200},
		{"healthz HEAD", "HEAD", "/healthz", "", secured, 200},
		{"readyz stays open", "GET", "/readyz", "", secured, 503},
		{"readyz HEAD", "HEAD", "/readyz", "", secured, 503},
		{"sources without a token configured", "GET", "/sources", "", open, 200},
		{"metrics without a token configured", "GET", "/metrics", "", open, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, req)
			if w.Code != tc.status {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, w.Code, w.Body, tc.status)
			}
			if tc.status == 401 {
				if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") || !strings.Contains(w.Body.String(), `"error"`) {
					t.Fatalf("401 is not JSON: %q %s", w.Header().Get("Content-Type"), w.Body)
				}
				if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("WWW-Authenticate = %q", w.Header().Get("WWW-Authenticate"))
				}
			}
		})
	}
}

// TestHTTPTokenFileRotation: http-token-file is read again when it changes: once the file holds a new token,
// requests with it are let through and requests with the old one refused, without a restart; a file that
// becomes empty refuses every request (503) rather than opening the endpoints.
func TestHTTPTokenFileRotation(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(tokenFile, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(testToken + "\n")
	cfg, err := loadWith(t, []string{"--listen", "127.0.0.1:0", "--http-token-file", tokenFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.ln.Close(); a.closeRedis() })
	status := func(token string) int {
		req := httptest.NewRequest("GET", "/sources", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		a.srv.Handler.ServeHTTP(w, req)
		return w.Code
	}
	const rotated = "fedcba9876543210-rotated"
	if got := status(testToken); got != 200 {
		t.Fatalf("the first token: %d", got)
	}
	write(rotated + "\n")
	kafkatest.WaitFor(t, 10*time.Second, "the rotated token to be accepted", func() bool { return status(rotated) == 200 })
	if got := status(testToken); got != 401 {
		t.Fatalf("the old token after the rotation: %d, want 401", got)
	}
	write("\n")
	kafkatest.WaitFor(t, 10*time.Second, "an emptied token file to refuse everything", func() bool { return status(rotated) == 503 && status("") == 503 })
}
