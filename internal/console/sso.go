package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"callgate/internal/admin"
)

// ssoBegin starts a single sign-on: it sets the flow cookie (state, nonce,
// PKCE verifier, the starting address's digest) and sends the browser to
// the provider. Nothing is stored on the server; an unreachable provider
// is an error on the login page.
func (h *Console) ssoBegin(c *gin.Context) {
	next := safeNext(c.Query("next"))
	// The failures counted are those of sign-ins this address started
	// whose code the provider refused (each cost a call to it); past the
	// budget, the address starts no more sign-ins for a while. The
	// failure limiter never refuses a callback: a person who started a
	// sign-in finishes it.
	if blocked, wait := h.SSOLimiter().Blocked(admin.ClientAddr(c)); blocked {
		secs := retryAfter(c, wait)
		h.Log.WarnContext(c.Request.Context(), "admin: too many failed single sign-ons", "remote", admin.ClientAddr(c))
		h.render(c, http.StatusTooManyRequests, "login", &view{Title: "Log in",
			Error: fmt.Sprintf("Too many failed sign-ins from your address. Try again in %d seconds.", secs), Page: h.loginView(next)})
		return
	}
	authURL, flow, err := h.SSO.Begin(c.Request.Context(), next, admin.ClientAddr(c))
	var refused *admin.SSOError
	if errors.As(err, &refused) {
		// Too many starts from this address, or no flow key yet.
		if refused.RetryAfter > 0 {
			retryAfter(c, refused.RetryAfter)
		}
		h.Log.WarnContext(c.Request.Context(), "admin: single sign-on not started", "status", refused.Status, "error", err, "remote", admin.ClientAddr(c))
		h.render(c, refused.Status, "login", &view{Title: "Log in", Error: refused.Msg, Page: h.loginView(next)})
		return
	}
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
	// Only a callback whose flow cookie held, from the address that
	// started it, reaches the provider (one call per cookie, within the
	// address's turns); the failure limiter never refuses it, and it
	// counts against its address's budget (single sign-on's own: bad
	// tokens do not spend it) only when it failed the way a forged code
	// does. One without a valid flow cookie, or from another address,
	// costs an HMAC and counts for nothing, so that nobody can lock out
	// everyone behind one address (a proxy's).
	in, err := h.SSO.Complete(ctx, c.Request.URL.Query(), flow, admin.ClientAddr(c))
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
		if failed.RetryAfter > 0 {
			retryAfter(c, failed.RetryAfter)
		}
		h.Log.WarnContext(ctx, "admin: single sign-on refused", "status", failed.Status, "error", err, "remote", admin.ClientAddr(c))
		h.render(c, failed.Status, "login", &view{Title: "Log in", Error: failed.Msg, Page: h.loginView("/admin/")})
	default:
		h.Log.ErrorContext(ctx, "admin: single sign-on failed", "error", err, "remote", admin.ClientAddr(c))
		h.render(c, http.StatusBadGateway, "login", &view{Title: "Log in", Error: "Single sign-on failed; start again.", Page: h.loginView("/admin/")})
	}
}

// retryAfter sets Retry-After to wait in whole seconds, and returns them.
func retryAfter(c *gin.Context, wait time.Duration) int {
	secs := admin.RetryAfterSeconds(wait)
	c.Header("Retry-After", strconv.Itoa(secs))
	return secs
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
