package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"slices"
	"strings"
)

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
	// An "email" without an @ is not an address (and could be a token's
	// name, which never holds one): the subject then.
	who.Actor = "sso:" + subject
	if who.Email != "" && verified && strings.Contains(who.Email, "@") {
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
