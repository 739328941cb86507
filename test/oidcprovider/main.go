// Command oidcprovider is the OpenID provider callgate's single sign-on
// tests sign in against, as a process of its own: mockoidc's provider
// (discovery, published signing keys, authorization with PKCE, token
// endpoint issuing RS256 ID tokens) plus an RP-initiated logout endpoint,
// and a control endpoint that says who signs in next and how their ID
// token is spoiled (another audience, already expired), whether the next
// redirect back carries an altered state, or whether the token endpoint
// answers nonsense, and counts the codes its token endpoint was asked to
// exchange.
//
//	oidcprovider -client-id callgate -client-secret s3cret
//
// prints "issuer <url>" once it listens, then serves until killed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// NextUser is what POST /control/next takes.
type NextUser struct {
	Subject string   `json:"sub"`
	Email   string   `json:"email"`
	Name    string   `json:"name"`
	Groups  []string `json:"groups"`
	// Audience, when set, replaces the ID token's aud (the client id).
	Audience string `json:"audience"`
	// Expired issues an ID token that expired an hour ago.
	Expired bool `json:"expired"`
	// Nonce, when set, replaces the nonce the client sent.
	Nonce string `json:"nonce"`
	// EmailUnverified sends email_verified false (else true with an
	// e-mail).
	EmailUnverified bool `json:"email_unverified"`
}

// user is a mockoidc.User whose claims the control endpoint chose.
type user struct{ NextUser }

func (u *user) ID() string { return u.Subject }

func (u *user) Userinfo([]string) ([]byte, error) {
	return json.Marshal(map[string]any{"sub": u.Subject, "email": u.Email, "name": u.Name, "groups": u.Groups})
}

type claims struct {
	*mockoidc.IDTokenClaims
	Email         string   `json:"email,omitempty"`
	EmailVerified *bool    `json:"email_verified,omitempty"`
	Name          string   `json:"name,omitempty"`
	Groups        []string `json:"groups"`
}

func (u *user) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	if u.Audience != "" {
		base.Audience = jwt.ClaimStrings{u.Audience}
	}
	if u.Nonce != "" {
		base.Nonce = u.Nonce
	}
	if u.Expired {
		now := time.Now()
		base.IssuedAt = jwt.NewNumericDate(now.Add(-2 * time.Hour))
		base.NotBefore = base.IssuedAt
		base.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Hour))
	}
	c := &claims{IDTokenClaims: base, Email: u.Email, Name: u.Name, Groups: u.Groups}
	if u.Email != "" {
		verified := !u.EmailUnverified
		c.EmailVerified = &verified
	}
	return c, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	clientID := flag.String("client-id", "callgate", "the one client's id")
	clientSecret := flag.String("client-secret", "", "the one client's secret")
	host := flag.String("issuer-host", "", "host name in the issuer URL instead of the listen address's (e.g. localhost: another site than 127.0.0.1, as a real provider is)")
	flag.Parse()

	m, err := mockoidc.NewServer(nil)
	if err != nil {
		log.Fatal(err)
	}
	m.ClientID, m.ClientSecret = *clientID, *clientSecret
	m.CodeChallengeMethodsSupported = []string{"S256"}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	var (
		mu            sync.Mutex
		nonsenseToken bool
		tamperState   bool
		logouts       []string
		codesSeen     = map[string]bool{}
	)
	mux := http.NewServeMux()
	mux.HandleFunc(mockoidc.AuthorizationEndpoint, func(w http.ResponseWriter, r *http.Request) {
		// A sign-in page first, as every real provider has: the redirect
		// back to the client then starts from this site, not the
		// client's (which decides what SameSite=Strict cookies do).
		if r.URL.Query().Get("signed_in") != "1" {
			q := r.URL.Query()
			q.Set("signed_in", "1")
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = fmt.Fprintf(w, `<!doctype html><title>Sign in</title><p>Test provider</p><a id="idp-continue" href="%s">Continue</a>`,
				html.EscapeString(r.URL.Path+"?"+q.Encode()))
			return
		}
		mu.Lock()
		tamper := tamperState
		tamperState = false
		mu.Unlock()
		if !tamper {
			m.Authorize(w, r)
			return
		}
		// The redirect back carries another state than the client sent,
		// as if someone had altered it on the way.
		rec := httptest.NewRecorder()
		m.Authorize(rec, r)
		loc, err := url.Parse(rec.Header().Get("Location"))
		if err != nil || rec.Code != http.StatusFound {
			http.Error(w, "authorize failed", http.StatusBadRequest)
			return
		}
		q := loc.Query()
		q.Set("state", q.Get("state")+"-tampered")
		loc.RawQuery = q.Encode()
		http.Redirect(w, r, loc.String(), http.StatusFound)
	})
	mux.HandleFunc(mockoidc.TokenEndpoint, func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		nonsense := nonsenseToken
		nonsenseToken = false
		codesSeen[r.PostForm.Get("code")] = true
		mu.Unlock()
		if nonsense {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"access_token": 42, "id_token": ["not", "a", "token"]}`))
			return
		}
		m.Token(w, r)
	})
	mux.HandleFunc(mockoidc.UserinfoEndpoint, m.Userinfo)
	mux.HandleFunc(mockoidc.JWKSEndpoint, m.JWKS)
	logoutPath := mockoidc.IssuerBase + "/logout"
	// Discovery, with the end_session_endpoint mockoidc leaves out.
	mux.HandleFunc(mockoidc.DiscoveryEndpoint, func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		m.Discovery(rec, r)
		var doc map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		doc["end_session_endpoint"] = m.Issuer() + "/logout"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
	// RP-initiated logout: note who asked, go back where the client says.
	mux.HandleFunc(logoutPath, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != m.ClientID {
			http.Error(w, "unknown client_id", http.StatusBadRequest)
			return
		}
		mu.Lock()
		logouts = append(logouts, q.Get("client_id"))
		mu.Unlock()
		back, err := url.Parse(q.Get("post_logout_redirect_uri"))
		if err != nil || back.Host == "" {
			_, _ = w.Write([]byte("signed out"))
			return
		}
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /control/next", func(w http.ResponseWriter, r *http.Request) {
		var u NextUser
		if err := json.NewDecoder(r.Body).Decode(&u); err != nil || u.Subject == "" {
			http.Error(w, "want {sub, email, name, groups, audience, expired}", http.StatusBadRequest)
			return
		}
		m.QueueUser(&user{u})
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /control/nonsense-token", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		nonsenseToken = true
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /control/tamper-state", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		tamperState = true
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	// How many codes the token endpoint was asked to exchange, refused or
	// not: distinct codes, as golang.org/x/oauth2 asks twice with the same
	// code (the client secret in the header, then in the form) until an
	// exchange has succeeded.
	mux.HandleFunc("GET /control/exchanges", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprint(w, len(codesSeen))
	})
	mux.HandleFunc("GET /control/logouts", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprint(w, len(logouts))
	})
	// mockoidc names its issuer after Server.Addr; serve its handlers
	// from this mux on the listener.
	issuerAddr := ln.Addr().String()
	if *host != "" {
		_, port, _ := net.SplitHostPort(issuerAddr)
		issuerAddr = net.JoinHostPort(*host, port)
	}
	m.Server = &http.Server{Addr: issuerAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("issuer %s\n", m.Issuer())
	log.Fatal(m.Server.Serve(ln))
}
