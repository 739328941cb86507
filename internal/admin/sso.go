package admin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/time/rate"
)

// Single sign-on: OpenID Connect's authorization code flow with PKCE,
// state and nonce. go-oidc discovers the provider from its issuer URL and
// checks the ID token (signature against the provider's published keys,
// issuer, audience, expiry); golang.org/x/oauth2 runs the code exchange.
// What a sign-in carries between its start and the provider's redirect
// back (state, nonce, PKCE verifier, the page to return to) lives in a
// short-lived cookie MACed with a key derived from the client secret, so
// starting a sign-in costs the server nothing to store and any gateway of
// the fleet can finish it.

// SSOConfig is admin.oidc.
type SSOConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is where the provider sends the browser back; its path
	// is SSOCallbackPath.
	RedirectURL string
	// RolesClaim names the ID token claim whose values are matched
	// against Operators and Viewers; a dotted path reaches into objects
	// (realm_access.roles). Default "groups".
	RolesClaim string
	Operators  []string
	Viewers    []string
	// Only hides the token form: people sign in with SSO alone (API
	// tokens keep working for the CLI).
	Only bool
	// MaxSession bounds a session's life without signing in again.
	MaxSession time.Duration
	// Scopes asked for; default openid, email, profile.
	Scopes []string
}

const (
	// SSOCallbackPath is the redirect URL's path.
	SSOCallbackPath = "/admin/oidc/callback"
	// SSOFlowCookie carries a sign-in from its start to the callback.
	SSOFlowCookie = "callgate_oidc"
	// SSOFlowPath scopes the flow cookie to the callback.
	SSOFlowPath = "/admin/oidc"
	// SSOFlowMaxAge bounds how long a person may take at the provider.
	SSOFlowMaxAge = 10 * time.Minute
	// RolesClaimDefault is admin.oidc.roles_claim when unset.
	RolesClaimDefault = "groups"
	// MaxSessionDefault is admin.oidc.max_session when unset.
	MaxSessionDefault = 8 * time.Hour

	// ssoHTTPTimeout bounds every call to the provider.
	ssoHTTPTimeout = 10 * time.Second
	// ssoRediscoverEvery spaces discovery attempts a login page can
	// cause while the provider is unreachable: unauthenticated requests
	// cannot turn into a stream of calls to it.
	ssoRediscoverEvery = 5 * time.Second
	// maxCallbackParam bounds code and state as read from the query.
	maxCallbackParam = 4096
	// maxActor is the width of the audit's actor column.
	maxActor = 255
)

// SSO signs operators in with an OpenID provider.
type SSO struct {
	cfg     SSOConfig
	log     *slog.Logger
	client  *http.Client
	flowKey []byte

	mu       sync.Mutex
	found    *ssoProvider
	lastErr  error
	lastTry  time.Time
	tryMutex sync.Mutex // one discovery at a time

	spentMu    sync.Mutex
	spent      map[string]int64 // states of flows completed, until they expire
	spentOrder []spentFlow      // spent's keys in the order spent, for pruning

	// exchanges bounds the calls to the provider's token endpoint, all
	// clients together: a flow cookie is free to start, so its callbacks
	// wait their turn here rather than reach the provider at any rate.
	exchanges *rate.Limiter
}

type spentFlow struct {
	state   string
	expires int64
}

// Token endpoint calls: ssoExchangeRate a second, ssoExchangeBurst at
// once; a callback waits at most ssoExchangeWait for its turn.
const (
	ssoExchangeRate  = 20
	ssoExchangeBurst = 40
	ssoExchangeWait  = 5 * time.Second
)

// spend marks flow f's state used and reports whether it was unused: a
// flow cookie carries one callback to the provider, so a captured or
// minted one cannot buy more than one call to its token endpoint.
func (s *SSO) spend(f ssoFlow, now time.Time) bool {
	s.spentMu.Lock()
	defer s.spentMu.Unlock()
	if s.spent == nil {
		s.spent = map[string]int64{}
	}
	// Flows are spent within SSOFlowMaxAge of their start, so the front
	// of spentOrder expires first, give or take that: what is pruned
	// never waits longer than that, and at most ssoExchangeRate flows a
	// second are spent (Complete spends after its turn).
	for len(s.spentOrder) > 0 && now.Unix() > s.spentOrder[0].expires {
		delete(s.spent, s.spentOrder[0].state)
		s.spentOrder = s.spentOrder[1:]
	}
	if _, used := s.spent[f.State]; used {
		return false
	}
	s.spent[f.State] = f.Expires
	s.spentOrder = append(s.spentOrder, spentFlow{f.State, f.Expires})
	return true
}

// ssoProvider is what discovery found.
type ssoProvider struct {
	verifier   *oidc.IDTokenVerifier
	oauth      oauth2.Config
	endSession string
}

// NewSSO returns the single sign-on of cfg; nothing is fetched until Run
// or the first sign-in.
func NewSSO(cfg SSOConfig, log *slog.Logger) *SSO {
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = RolesClaimDefault
	}
	if cfg.MaxSession <= 0 {
		cfg.MaxSession = MaxSessionDefault
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "email", "profile"}
	}
	m := hmac.New(sha256.New, []byte(cfg.ClientSecret))
	m.Write([]byte("callgate-oidc-flow\x00" + cfg.Issuer + "\x00" + cfg.ClientID))
	return &SSO{cfg: cfg, log: log, client: &http.Client{Timeout: ssoHTTPTimeout}, flowKey: m.Sum(nil),
		exchanges: rate.NewLimiter(ssoExchangeRate, ssoExchangeBurst)}
}

// sessionMAC binds a single sign-on session to the provider and the role
// mapping it was opened under: an HMAC keyed by the session id over their
// digest. Another issuer, client, roles claim or group list ends the
// sessions, as rotating a token ends its own.
func (s *SSO) sessionMAC(id SessionID) []byte {
	ops, views := slices.Clone(s.cfg.Operators), slices.Clone(s.cfg.Viewers)
	slices.Sort(ops)
	slices.Sort(views)
	d := sha256.New()
	for _, part := range []string{s.cfg.Issuer, s.cfg.ClientID, s.cfg.RolesClaim, strings.Join(ops, "\x00"), strings.Join(views, "\x00")} {
		d.Write([]byte(part))
		d.Write([]byte{0xff})
	}
	m := hmac.New(sha256.New, id[:])
	m.Write(d.Sum(nil))
	return m.Sum(nil)
}

// Only reports admin.oidc.only: no token form on the login page.
func (s *SSO) Only() bool { return s.cfg.Only }

// MaxSession is how long a single sign-on session lives.
func (s *SSO) MaxSession() time.Duration { return s.cfg.MaxSession }

// RolesClaim is the claim read for the role.
func (s *SSO) RolesClaim() string { return s.cfg.RolesClaim }

// Run discovers the provider, retrying with backoff while it cannot be
// reached (a warning each time, never a crash), until it succeeds or ctx
// ends.
func (s *SSO) Run(ctx context.Context) {
	wait := time.Second
	for {
		_, err := s.discover(ctx, true)
		if err == nil {
			return
		}
		s.log.WarnContext(ctx, "admin: single sign-on provider not reachable yet, retrying",
			"issuer", s.cfg.Issuer, "retry_in", wait.String(), "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// ErrSSOUnavailable is a provider that cannot be reached or discovered.
var ErrSSOUnavailable = errors.New("the single sign-on provider cannot be reached")

// discover returns the provider, discovering it now if that has not
// succeeded yet (at most once per ssoRediscoverEvery unless force).
func (s *SSO) discover(ctx context.Context, force bool) (*ssoProvider, error) {
	if p, known, err := s.known(force); known {
		return p, err
	}
	s.tryMutex.Lock()
	defer s.tryMutex.Unlock()
	// Those who waited for the attempt just made share its outcome.
	if p, known, err := s.known(force); known {
		return p, err
	}
	found, err := s.discoverNow(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastTry = time.Now()
	if err != nil {
		s.lastErr = fmt.Errorf("%w (%s): %w", ErrSSOUnavailable, s.cfg.Issuer, err)
		return nil, s.lastErr
	}
	s.found, s.lastErr = found, nil
	s.log.InfoContext(ctx, "admin: single sign-on provider discovered", "issuer", s.cfg.Issuer, "end_session", found.endSession != "")
	return found, nil
}

// known is the provider found, or a failure recent enough to share
// (unless force); known is false when an attempt is due.
func (s *SSO) known(force bool) (p *ssoProvider, known bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.found != nil {
		return s.found, true, nil
	}
	if !force && time.Since(s.lastTry) < ssoRediscoverEvery && s.lastErr != nil {
		return nil, true, s.lastErr
	}
	return nil, false, nil
}

func (s *SSO) discoverNow(ctx context.Context) (*ssoProvider, error) {
	// Not the request's cancellation: one client going away must not
	// fail discovery for everybody waiting on it.
	ctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), s.client), ssoHTTPTimeout)
	defer cancel()
	p, err := oidc.NewProvider(ctx, s.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&extra); err != nil {
		return nil, fmt.Errorf("reading the discovery document: %w", err)
	}
	if extra.EndSession != "" {
		if u, err := url.Parse(extra.EndSession); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("end_session_endpoint %q is not an http(s) URL", extra.EndSession)
		}
	}
	return &ssoProvider{
		verifier: p.Verifier(&oidc.Config{ClientID: s.cfg.ClientID}),
		oauth: oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
			RedirectURL: s.cfg.RedirectURL, Scopes: s.cfg.Scopes},
		endSession: extra.EndSession,
	}, nil
}

// ssoFlow is what a sign-in carries from its start to the callback.
type ssoFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"r"`
	Expires  int64  `json:"e"`
}

// Begin starts a sign-in: the provider's authorization URL to send the
// browser to, and the flow cookie's value. next is where to go afterwards
// (already checked by the caller).
func (s *SSO) Begin(ctx context.Context, next string) (authURL, flowCookie string, err error) {
	p, err := s.discover(ctx, false)
	if err != nil {
		return "", "", err
	}
	f := ssoFlow{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(), Next: next,
		Expires: time.Now().Add(SSOFlowMaxAge).Unix()}
	authURL = p.oauth.AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier))
	return authURL, s.encodeFlow(f), nil
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// encodeFlow is base64url(JSON) "." base64url(HMAC).
func (s *SSO) encodeFlow(f ssoFlow) string {
	b, _ := json.Marshal(f)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + base64.RawURLEncoding.EncodeToString(s.flowMAC(payload))
}

func (s *SSO) flowMAC(payload string) []byte {
	m := hmac.New(sha256.New, s.flowKey)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// decodeFlow reads a flow cookie: its MAC must hold and it must not have
// expired.
func (s *SSO) decodeFlow(v string, now time.Time) (ssoFlow, bool) {
	var f ssoFlow
	payload, mac, ok := strings.Cut(v, ".")
	if !ok || len(v) > 2*maxCallbackParam {
		return f, false
	}
	got, err := base64.RawURLEncoding.DecodeString(mac)
	if err != nil || !hmac.Equal(got, s.flowMAC(payload)) {
		return f, false
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(b, &f) != nil {
		return f, false
	}
	if f.State == "" || f.Nonce == "" || f.Verifier == "" || now.Unix() > f.Expires {
		return f, false
	}
	return f, true
}

// SSOError is a sign-in that did not give a session, with what the login
// page tells the person.
type SSOError struct {
	Status int
	Msg    string
	// Err is the cause, for the log.
	Err error
	// Suspect marks what a forged redirect causes (an altered state, a
	// code the provider refuses, an ID token that fails its checks), as
	// opposed to the provider's trouble or the person's (cancelled, no
	// role): the sign-in limiter counts only these.
	Suspect bool
}

// SuspectSignIn reports whether err is a failed sign-in of the kind a
// forged redirect causes.
func SuspectSignIn(err error) bool {
	var se *SSOError
	return errors.As(err, &se) && se.Suspect
}

func (e *SSOError) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *SSOError) Unwrap() error { return e.Err }

// NoRoleError is a person the provider vouched for whose roles claim
// names neither an operator nor a viewer group.
type NoRoleError struct {
	Actor  string
	Claim  string
	Values []string
}

func (e *NoRoleError) Error() string {
	return fmt.Sprintf("%s has no role: claim %q held %q", e.Actor, e.Claim, e.Values)
}

// providerErrorSentence is what the login page says for an error code of
// the provider's redirect (RFC 6749 4.1.2.1, OpenID Connect Core 3.1.2.6).
func providerErrorSentence(code string) string {
	switch code {
	case "access_denied":
		return "The sign-in was cancelled or refused at the identity provider."
	case "login_required", "interaction_required", "consent_required", "account_selection_required":
		return "The identity provider needs you to sign in there first; start again from the login page."
	case "temporarily_unavailable", "server_error":
		return "The identity provider could not complete the sign-in now; try again shortly."
	case "invalid_request", "unauthorized_client", "unsupported_response_type", "invalid_scope", "request_not_supported",
		"request_uri_not_supported", "registration_not_supported", "invalid_request_uri", "invalid_request_object":
		return "The identity provider refused callgate's sign-in request; an administrator should check the client's settings there (the log says more)."
	}
	return "The identity provider refused the sign-in; start again from the login page (the log says more)."
}

// errBadState is a callback that does not belong to a sign-in started here.
// It is not counted against the address: it never reaches the provider,
// and counting it would let anyone lock everyone behind one address out.
var errBadState = &SSOError{Status: http.StatusBadRequest,
	Msg: "This sign-in does not match one started here (its state is missing, expired, altered or already used). Start again from the login page."}

// parseCallback reads the provider's redirect: the code and state, or the
// error the provider reports. Exactly one non-empty code and state, of
// bounded length, are accepted. None of these failures counts against the
// address: they come before the flow cookie is checked, and anyone can
// send them.
func parseCallback(q url.Values) (code, state string, err error) {
	if e := q.Get("error"); e != "" || q.Has("error") {
		// The page shows a fixed sentence per error code: the provider's
		// error_description is free text that anyone can put in a link
		// ("re-authenticate at https://..."), so it goes to the log only.
		cause := fmt.Errorf("provider error %q", clip(e, 100))
		if d := q.Get("error_description"); d != "" {
			cause = fmt.Errorf("%w: %s", cause, clip(d, 300))
		}
		return "", "", &SSOError{Status: http.StatusUnauthorized, Msg: providerErrorSentence(e), Err: cause}
	}
	codes, states := q["code"], q["state"]
	if len(codes) != 1 || len(states) != 1 {
		return "", "", &SSOError{Status: http.StatusBadRequest,
			Msg: "The identity provider's redirect must carry one code and one state; start again from the login page."}
	}
	code, state = codes[0], states[0]
	if code == "" || state == "" || len(code) > maxCallbackParam || len(state) > maxCallbackParam {
		return "", "", &SSOError{Status: http.StatusBadRequest,
			Msg: "The identity provider's redirect carried an empty or oversized code or state; start again from the login page."}
	}
	return code, state, nil
}

// clip shortens s to n bytes of valid UTF-8 for display.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// SignIn is a finished sign-in: who, the page to go to, and the raw ID
// token (kept for the provider's logout).
type SignIn struct {
	Who     Identity
	Next    string
	IDToken string
}

// Complete finishes a sign-in from the provider's redirect (its query)
// and the flow cookie. Any failure is an *SSOError or a *NoRoleError, and
// no session.
func (s *SSO) Complete(ctx context.Context, q url.Values, flowCookie string) (SignIn, error) {
	code, state, err := parseCallback(q)
	if err != nil {
		return SignIn{}, err
	}
	f, ok := s.decodeFlow(flowCookie, time.Now())
	if !ok || !hmac.Equal([]byte(state), []byte(f.State)) {
		return SignIn{}, errBadState
	}
	wait, cancel := context.WithTimeout(ctx, ssoExchangeWait)
	err = s.exchanges.Wait(wait)
	cancel()
	if err != nil {
		return SignIn{}, &SSOError{Status: http.StatusServiceUnavailable,
			Msg: "Single sign-on is busy; start again from the login page in a moment.", Err: fmt.Errorf("token endpoint calls over their bound: %w", err)}
	}
	if !s.spend(f, time.Now()) {
		return SignIn{}, errBadState
	}
	p, err := s.discover(ctx, false)
	if err != nil {
		return SignIn{}, &SSOError{Status: http.StatusServiceUnavailable,
			Msg: "The single sign-on provider cannot be reached; try again shortly or sign in with a token.", Err: err}
	}
	ctx = oidc.ClientContext(ctx, s.client)
	tok, err := p.oauth.Exchange(ctx, code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		// The provider refusing the code (4xx) is what a forged one gets;
		// its 5xx or an unreadable answer is its own trouble.
		var re *oauth2.RetrieveError
		refused := errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500
		return SignIn{}, &SSOError{Status: http.StatusBadGateway, Suspect: refused,
			Msg: "The identity provider did not exchange the sign-in code for tokens; start again from the login page.", Err: err}
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return SignIn{}, &SSOError{Status: http.StatusBadGateway,
			Msg: "The identity provider's answer carried no ID token; check that the client is an OpenID Connect client with the openid scope."}
	}
	idt, err := p.verifier.Verify(ctx, raw)
	if err != nil {
		return SignIn{}, &SSOError{Status: http.StatusUnauthorized, Suspect: true,
			Msg: "The identity provider's ID token was refused (signature, issuer, audience or expiry); no session was opened.", Err: err}
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(f.Nonce)) {
		return SignIn{}, &SSOError{Status: http.StatusUnauthorized, Suspect: true,
			Msg: "The ID token does not belong to this sign-in (its nonce differs); start again from the login page."}
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return SignIn{}, &SSOError{Status: http.StatusBadGateway, Msg: "The ID token's claims could not be read.", Err: err}
	}
	who, err := s.identify(idt.Subject, claims)
	if err != nil {
		return SignIn{}, err
	}
	return SignIn{Who: who, Next: f.Next, IDToken: raw}, nil
}

// identify makes the identity and role of an ID token's claims.
func (s *SSO) identify(subject string, claims map[string]any) (Identity, error) {
	if subject == "" || len("sso:"+subject) > maxActor {
		return Identity{}, &SSOError{Status: http.StatusBadGateway,
			Msg: "The identity provider's ID token names no subject (sub), or one too long; no session was opened."}
	}
	str := func(k string) string { v, _ := claims[k].(string); return clip(v, maxActor) }
	who := Identity{Kind: KindSSO, Subject: subject, Email: str("email"), Name: str("name")}
	verified := emailVerified(claims)
	// A verified address names the person; without one, the issuer's
	// subject, which is theirs alone (two people may share a name or a
	// user name they chose), marked so that it cannot pass for a token's
	// name. The session keeps the name and e-mail for the page.
	who.Actor = "sso:" + subject
	if who.Email != "" && verified {
		who.Actor = who.Email
	}
	values := claimValues(claims, s.cfg.RolesClaim)
	if s.cfg.RolesClaim == "email" && !verified {
		values = nil // an address the provider did not verify grants nothing
	}
	switch {
	case anyIn(values, s.cfg.Operators):
		who.Role = RoleOperator
	case anyIn(values, s.cfg.Viewers):
		who.Role = RoleViewer
	default:
		return Identity{}, &NoRoleError{Actor: who.Actor, Claim: s.cfg.RolesClaim, Values: values}
	}
	return who, nil
}

// emailVerified reads email_verified as true or "true" (some providers
// send a string); absent or anything else is not verified.
func emailVerified(claims map[string]any) bool {
	switch v := claims["email_verified"].(type) {
	case bool:
		return v
	case string:
		return v == "true"
	}
	return false
}

// claimValues reads the claim named path, or else the one at path as a
// dotted path into objects (realm_access.roles), as a list of strings: a
// string is one value, an array its string elements.
func claimValues(claims map[string]any, path string) []string {
	v, ok := claims[path] // a name with dots of its own (https://example.com/roles)
	if !ok {
		var cur any = claims
		for _, k := range strings.Split(path, ".") {
			m, isMap := cur.(map[string]any)
			if !isMap {
				return nil
			}
			cur = m[k]
		}
		v = cur
	}
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func anyIn(values, allowed []string) bool {
	for _, v := range values {
		for _, a := range allowed {
			if v == a {
				return true
			}
		}
	}
	return false
}

// LogoutURL is where the browser goes after callgate ended a single
// sign-on session: the provider's end_session_endpoint (RP-initiated
// logout) with id_token_hint (when the session kept the ID token),
// client_id and postLogout, or "" when the provider advertises none or
// cannot be reached.
func (s *SSO) LogoutURL(ctx context.Context, idToken, postLogout string) string {
	p, err := s.discover(ctx, false)
	if err != nil || p.endSession == "" {
		return ""
	}
	u, err := url.Parse(p.endSession)
	if err != nil {
		return ""
	}
	q := u.Query()
	if idToken != "" {
		q.Set("id_token_hint", idToken)
	}
	q.Set("client_id", s.cfg.ClientID)
	q.Set("post_logout_redirect_uri", postLogout)
	u.RawQuery = q.Encode()
	return u.String()
}

// PostLogoutURL is the login page on the redirect URL's origin.
func (s *SSO) PostLogoutURL() string {
	u, err := url.Parse(s.cfg.RedirectURL)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/admin/login", RawQuery: "out=1"}).String()
}
