package admin

import (
	"context"
	"net/url"
)

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
