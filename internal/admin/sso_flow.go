package admin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
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
