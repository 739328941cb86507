package admin

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

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

// errOtherAddress is a callback from another address than the one that
// started its flow: a flow cookie collected in one place and spent in
// another, so that no address's budgets bound it. Like errBadState it
// never reaches the provider and is not counted (the address it comes
// from did not start it). A person whose address changed on the way (a
// mobile network, a dual-stack connection switching family) starts again.
var errOtherAddress = &SSOError{Status: http.StatusBadRequest,
	Msg: "This sign-in was started from another network address than the one it came back from. Start again from the login page."}

// Complete finishes a sign-in from the provider's redirect (its query),
// the flow cookie and client, the address the redirect comes from
// (ClientAddr). Any failure is an *SSOError or a *NoRoleError, and no
// session. Only a flow cookie that holds, whose state matches and that
// client started reaches the provider, after a turn of client's own
// (non-blocking: past it, a 429 with RetryAfter) and then a turn of
// everyone's (waited for up to ssoExchangeWait).
func (s *SSO) Complete(ctx context.Context, q url.Values, flowCookie, client string) (SignIn, error) {
	code, state, err := parseCallback(q)
	if err != nil {
		return SignIn{}, err
	}
	if s.key() == nil {
		return SignIn{}, errNoFlowKey
	}
	f, ok := s.decodeFlow(flowCookie, time.Now())
	if !ok || !hmac.Equal([]byte(state), []byte(f.State)) {
		return SignIn{}, errBadState
	}
	if !hmac.Equal([]byte(f.Client), []byte(s.clientDigest(client))) {
		return SignIn{}, errOtherAddress
	}
	// A flow already spent is refused before it costs a turn: a cookie sent
	// back again never takes the address's turns or everyone's. (It is
	// spent after its turn, below, so that the spent flows kept are bounded
	// by the fleet's exchange rate.)
	if s.isSpent(f) {
		return SignIn{}, errBadState
	}
	// The address's own turn first, without waiting: one address's
	// callbacks cannot queue for (and spend) everyone's turns.
	if ok, retry := s.addrExchanges.Take(limitKey(client)); !ok {
		return SignIn{}, &SSOError{Status: http.StatusTooManyRequests, RetryAfter: retry,
			Msg: fmt.Sprintf("Too many sign-ins are finishing from your address. Start again from the login page in %d seconds.", RetryAfterSeconds(retry)),
			Err: errors.New("the address's token endpoint calls over their bound")}
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
