package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"callgate/internal/admin"
)

// ssoBegin starts a single sign-on: it sets the flow cookie (state, nonce,
// PKCE verifier) and sends the browser to the provider. Nothing is stored
// on the server; an unreachable provider is an error on the login page.
func (h *Console) ssoBegin(c *gin.Context) {
	next := safeNext(c.Query("next"))
	// The failures counted are those of sign-ins whose flow cookie held
	// (each then cost a call to the provider); past the budget, an
	// address starts no more sign-ins for a while. A callback is never
	// refused: a person who started one finishes it.
	if blocked, wait := h.SSOLimiter().Blocked(admin.ClientAddr(c)); blocked {
		secs := max(1, int(wait.Seconds()+0.5))
		c.Header("Retry-After", strconv.Itoa(secs))
		h.Log.WarnContext(c.Request.Context(), "admin: too many failed single sign-ons", "remote", admin.ClientAddr(c))
		h.render(c, http.StatusTooManyRequests, "login", &view{Title: "Log in",
			Error: fmt.Sprintf("Too many failed sign-ins from your address. Try again in %d seconds.", secs), Page: h.loginView(next)})
		return
	}
	authURL, flow, err := h.SSO.Begin(c.Request.Context(), next)
	if err != nil {
		h.Log.WarnContext(c.Request.Context(), "admin: single sign-on could not start", "error", err, "remote", admin.ClientAddr(c))
		msg := "Single sign-on is unavailable: the identity provider cannot be reached (or its discovery document is not valid for this issuer). Try again shortly"
		if h.loginView(next).TokenForm {
			msg += ", or log in with a token"
		}
		h.render(c, http.StatusServiceUnavailable, "login", &view{Title: "Log in", Error: msg + ".", Page: h.loginView(next)})
		return
	}
	h.setFlowCookie(c, flow, int(admin.SSOFlowMaxAge.Seconds()))
	c.Redirect(http.StatusFound, authURL)
}

// ssoCallback finishes a sign-in where the provider sends the browser
// back: the state must match the flow cookie, the code is exchanged with
// the PKCE verifier, the ID token checked (signature, issuer, audience,
// expiry, nonce) and the role read from its claims. Any failure is the
// login page with the reason, and no session.
func (h *Console) ssoCallback(c *gin.Context) {
	ctx := c.Request.Context()
	flow := ""
	if ck, err := c.Request.Cookie(h.cookieName(c, admin.SSOFlowCookie)); err == nil {
		flow = ck.Value
	}
	h.setFlowCookie(c, "", -1) // one use, whatever happens
	// Only a callback whose flow cookie held reaches the provider (one
	// call per cookie); it is never refused, and counts against its
	// address's budget (single sign-on's own: bad tokens do not spend it)
	// only when it failed the way a forged code does. One without a valid
	// flow cookie costs an HMAC and counts for nothing, so that nobody can
	// lock out everyone behind one address (a proxy's).
	in, err := h.SSO.Complete(ctx, c.Request.URL.Query(), flow)
	if admin.SuspectSignIn(err) {
		h.SSOLimiter().Fail(admin.ClientAddr(c))
	}
	var noRole *admin.NoRoleError
	var failed *admin.SSOError
	switch {
	case err == nil:
		h.openSession(c, in.Who, safeNext(in.Next), in.IDToken)
	case errors.As(err, &noRole):
		h.Log.WarnContext(ctx, "admin: single sign-on user has no role", "actor", noRole.Actor,
			"claim", noRole.Claim, "values", noRole.Values, "remote", admin.ClientAddr(c))
		h.render(c, http.StatusForbidden, "norole", &view{Title: "No access", Page: noRole})
	case errors.As(err, &failed):
		h.Log.WarnContext(ctx, "admin: single sign-on refused", "status", failed.Status, "error", err, "remote", admin.ClientAddr(c))
		h.render(c, failed.Status, "login", &view{Title: "Log in", Error: failed.Msg, Page: h.loginView("/admin/")})
	default:
		h.Log.ErrorContext(ctx, "admin: single sign-on failed", "error", err, "remote", admin.ClientAddr(c))
		h.render(c, http.StatusBadGateway, "login", &view{Title: "Log in", Error: "Single sign-on failed; start again.", Page: h.loginView("/admin/")})
	}
}

// setFlowCookie scopes the flow cookie to the callback. SameSite=Lax: the
// provider's redirect back is a cross-site navigation, which a Strict
// cookie would not accompany.
func (h *Console) setFlowCookie(c *gin.Context, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name:     h.cookieName(c, admin.SSOFlowCookie),
		Value:    value,
		Path:     h.cookiePath(c, admin.SSOFlowPath),
		MaxAge:   maxAge,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
		Secure:   h.secure(c),
	})
}

// claimList shows a claim's values on the 403 page.
func claimList(values []string) string {
	if len(values) == 0 {
		return "nothing"
	}
	return strings.Join(values, ", ")
}
