package admin

import "time"

// MintFlow is a flow cookie of s for state, started at client, as Begin
// makes one (without the provider).
func MintFlow(s *SSO, state, client string) string {
	return s.encodeFlow(ssoFlow{State: state, Nonce: "nonce-" + state, Verifier: "verifier-" + state, Next: "/admin/",
		Expires: time.Now().Add(SSOFlowMaxAge).Unix(), Client: s.clientDigest(client)})
}

// FlowHolds reports whether s accepts flow cookie v (its MAC holds and it
// has not expired).
func FlowHolds(s *SSO, v string) bool {
	_, ok := s.decodeFlow(v, time.Now())
	return ok
}
