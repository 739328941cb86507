package admin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// ssoFlow is what a sign-in carries from its start to the callback.
type ssoFlow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Next     string `json:"r"`
	Expires  int64  `json:"e"`
	// Client is the digest of the address that started the sign-in
	// (clientDigest): its callback must come from there.
	Client string `json:"c"`
}

// Begin starts a sign-in for the browser at client (ClientAddr): the
// provider's authorization URL to send it to, and the flow cookie's
// value. next is where to go afterwards (already checked by the caller).
// Before any call to the provider, client's starts are counted: past
// their bound the error is an *SSOError 429 with RetryAfter.
func (s *SSO) Begin(ctx context.Context, next, client string) (authURL, flowCookie string, err error) {
	if s.key() == nil {
		return "", "", errNoFlowKey
	}
	if ok, wait := s.starts.Take(limitKey(client)); !ok {
		return "", "", &SSOError{Status: http.StatusTooManyRequests, RetryAfter: wait,
			Msg: fmt.Sprintf("Too many sign-ins started from your address. Try again in %d seconds.", RetryAfterSeconds(wait))}
	}
	p, err := s.discover(ctx, false)
	if err != nil {
		return "", "", err
	}
	f := ssoFlow{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(), Next: next,
		Expires: time.Now().Add(SSOFlowMaxAge).Unix(), Client: s.clientDigest(client)}
	authURL = p.oauth.AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier))
	return authURL, s.encodeFlow(f), nil
}

// errNoFlowKey is a sign-in while the flow cookie's key is not read yet
// (the database could not be reached when the gateway started).
var errNoFlowKey = &SSOError{Status: http.StatusServiceUnavailable,
	Msg: "Single sign-on is not ready yet (its key could not be read from the database); try again shortly."}

// clientDigest names client in a flow cookie: keyed, so that the cookie,
// which its holder can read, says nothing about the address to anyone
// without the key, and cut to 128 bits, plenty to tell addresses apart.
func (s *SSO) clientDigest(client string) string {
	m := hmac.New(sha256.New, s.key())
	m.Write([]byte("callgate-oidc-client\x00" + client))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
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
	m := hmac.New(sha256.New, s.key())
	m.Write([]byte(payload))
	return m.Sum(nil)
}

// decodeFlow reads a flow cookie: its MAC must hold and it must not have
// expired.
func (s *SSO) decodeFlow(v string, now time.Time) (ssoFlow, bool) {
	var f ssoFlow
	payload, mac, ok := strings.Cut(v, ".")
	if !ok || len(v) > 2*maxCallbackParam || s.key() == nil {
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
