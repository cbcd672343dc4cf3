package main

// DEMO ONLY. The login page hands a token for any demo user to anyone who asks: it shows how a site issues
// the gateway's tokens (an HttpOnly cookie, refreshed when the stream says the token is expiring), not how to
// authenticate people. A real site issues tokens from its own login, never from a page like this.

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/ssegate/ssegate/services/demo/orders"
)

//go:embed login.html
var loginFS embed.FS

var loginPage = template.Must(template.ParseFS(loginFS, "login.html"))

// loginConfig configures the demo login page.
type loginConfig struct {
	listen     string        // address of the page; empty means none
	gateway    string        // the gateway's URL
	topic      string        // the per-user topic the tokens allow
	secretFile string        // the HMAC secret the gateway verifies with
	lifetime   time.Duration // how long a token lives
}

// The cookies of the demo: the token (HttpOnly, what the gateway reads) and who is logged in (for refreshes).
const (
	tokenCookie = "ssegate_token" //nolint:gosec // a cookie's name, not a credential
	userCookie  = "ssegate_demo_user"
)

// serveLogin starts the demo login page; the returned func stops it.
func serveLogin(ctx context.Context, lc loginConfig, log *slog.Logger) (func(), error) {
	raw, err := os.ReadFile(lc.secretFile)
	if err != nil {
		return nil, fmt.Errorf("token secret: %w", err)
	}
	secret := []byte(strings.TrimRight(string(raw), "\r\n"))
	issue := func(w http.ResponseWriter, user string) error {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub":     "user-" + user,
			"exp":     time.Now().Add(lc.lifetime).Unix(),
			"iat":     time.Now().Unix(),
			"ssegate": map[string]any{"topics": []string{lc.topic}, "keys": []string{"user-" + user}},
		}).SignedString(secret)
		if err != nil {
			return err
		}
		// Host-only cookies: browsers send them to every port of this host, the gateway's included. Not Secure:
		// the demo runs on plain HTTP on loopback; a real site sets Secure.
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode}) //nolint:gosec // plain-HTTP demo, see above
		http.SetCookie(w, &http.Cookie{Name: userCookie, Value: user, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode}) //nolint:gosec // plain-HTTP demo, see above
		return nil
	}
	userOf := func(r *http.Request) string {
		if c, err := r.Cookie(userCookie); err == nil && slices.Contains(orders.Customers, c.Value) {
			return c.Value
		}
		return ""
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		page := struct {
			User, Topic, Stream string
			Users               []string
			Lifetime            string
		}{userOf(r), lc.topic, strings.TrimRight(lc.gateway, "/") + "/streams/" + lc.topic, orders.Customers, lc.lifetime.String()}
		if err := loginPage.Execute(w, page); err != nil {
			log.Warn("login page", "err", err)
		}
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		user := r.FormValue("user")
		if !slices.Contains(orders.Customers, user) {
			http.Error(w, "no such demo user", http.StatusBadRequest)
			return
		}
		if err := issue(w, user); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
	// The page asks for a new token when its stream says "token-expiring".
	mux.HandleFunc("POST /refresh", func(w http.ResponseWriter, r *http.Request) {
		user := userOf(r)
		if user == "" {
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		if err := issue(w, user); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /logout", func(w http.ResponseWriter, r *http.Request) {
		for _, name := range []string{tokenCookie, userCookie} {
			http.SetCookie(w, &http.Cookie{Name: name, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode}) //nolint:gosec // plain-HTTP demo
		}
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
	var lcfg net.ListenConfig
	ln, err := lcfg.Listen(ctx, "tcp", lc.listen)
	if err != nil {
		return nil, fmt.Errorf("login page: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("login page stopped", "err", err)
		}
	}()
	log.Info("DEMO ONLY login page: hands out tokens to anyone", "url", "http://"+ln.Addr().String()+"/")
	return func() { _ = srv.Close(); <-done }, nil
}
