// Package console is the operators' web page under /admin/: a dashboard,
// the callbacks with their payloads, attempts and lineage, single and bulk
// replays, the orders reconciliation gave up on, the audit trail. It is
// server-rendered HTML (html/template, so every value is escaped for its
// context), with no inline script or style (the CSP forbids both), every
// page usable without JavaScript. It shares
// its authentication (tokens, limiter, sessions) and services with the API
// through *admin.Handler, and is served by the gateway.
package console

import (
	"callgate/internal/admin"
	"callgate/internal/demo"
	"crypto/hmac"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
)

// The session is a server-side row (internal/admin, session.go) named by a
// random id in an HttpOnly, SameSite=Strict cookie scoped to /admin, whose
// lifetime is the row's (admin.SessionMaxAge); every POST also carries a
// CSRF field derived from that id.

const (
	// sessionCookie holds the session id (never the admin token); it is
	// named with hostPrefix when Secure (cookieName).
	sessionCookie = "callgate_admin"
	// hostPrefix makes a browser take a cookie only from this host, over
	// HTTPS (or localhost), with Path=/ and no Domain: a sibling subdomain
	// or a plain-HTTP man in the middle cannot plant one (login CSRF,
	// session fixation).
	hostPrefix = "__Host-"
	// csrfField is the hidden form field every POST carries.
	csrfField = "csrf"
	// ctxSession is the request's *admin.Session.
	ctxSession = "callgate.admin.session"
	// maxFormBytes bounds a POSTed form (the bulk form's ids list is the
	// largest thing an operator sends).
	maxFormBytes = 2 << 20
)

// contentSecurityPolicy allows only this origin's script and style: no
// inline code, no framing, forms posting only here.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

// Console serves the web page.
type Console struct {
	*admin.Handler
}

// New returns the console of the operator surface h.
func New(h *admin.Handler) *Console { return &Console{Handler: h} }

// Mount adds the web page under /admin/. With no admin token configured it
// adds nothing (404: off, not open).
func (h *Console) Mount(r *gin.Engine) {
	if !h.Enabled() {
		return
	}
	pub := r.Group("/admin", h.Client, pageHeaders)
	pub.GET("/static/:file", serveStatic)
	pub.GET("/login", h.loginForm)
	pub.POST("/login", h.login)
	if h.SSO != nil {
		pub.GET("/login/oidc", noStore, h.ssoBegin)
		pub.GET(strings.TrimPrefix(admin.SSOCallbackPath, "/admin"), noStore, h.ssoCallback)
	}

	g := r.Group("/admin", h.Client, pageHeaders, noStore, h.session, h.csrf)
	g.POST("/logout", h.logout)
	g.GET("/", h.dashboard)
	g.GET("/callbacks", h.callbacksPage)
	g.GET("/callbacks/:id", h.detailPage)
	g.POST("/callbacks/:id/replay", h.operator, h.replayPage)
	g.GET("/replays", h.replaysPage)
	g.POST("/replays/dry-run", h.operator, h.dryRunPage)
	g.POST("/replays", h.operator, h.createJobPage)
	g.GET("/replays/:id", h.jobPage)
	g.POST("/replays/:id/cancel", h.operator, h.cancelJobPage)
	g.GET("/audit", h.auditPage)
	g.GET("/reconcile", h.reconcilePage)
}

// operator admits only sessions whose role may change rows; a viewer gets
// a 403 page and nothing changes. Every write route has it: the page not
// showing a viewer the buttons is a courtesy, this is the check.
func (h *Console) operator(c *gin.Context) {
	id := admin.RequestIdentity(c)
	if !id.Role.CanWrite() {
		h.Log.WarnContext(c.Request.Context(), "admin: refused a page write to a viewer",
			"path", c.Request.URL.Path, "actor", id.Actor, "role", id.Role, "remote", admin.ClientAddr(c))
		h.renderError(c, http.StatusForbidden, "Not allowed: "+admin.NeedsOperator(id)+".")
		c.Abort()
		return
	}
	c.Next()
}

// pageHeaders sets the security headers of every page and asset.
func pageHeaders(c *gin.Context) {
	hd := c.Writer.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.Next()
}

func noStore(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.Next()
}

// session admits requests carrying a live session and sends the others to
// the login page. A cookie that names no live session (logged out,
// expired, copied from before a logout, guessed) counts as a failed
// authentication and is cleared.
func (h *Console) session(c *gin.Context) {
	sess, err := h.requestSession(c)
	switch {
	case err == nil:
	case errors.Is(err, admin.ErrNoSession):
		if h.hasSessionCookie(c) {
			if h.pageTooManyFailures(c) {
				c.Abort()
				return
			}
			h.Limiter().Fail(admin.ClientAddr(c))
			h.Log.WarnContext(c.Request.Context(), "admin: rejected page session", "path", c.Request.URL.Path, "remote", admin.ClientAddr(c))
			h.setSession(c, "", -1)
		}
		target := "/admin/login"
		if c.Request.Method == http.MethodGet && c.Request.URL.Path != "/admin/" {
			target += "?next=" + url.QueryEscape(c.Request.URL.RequestURI())
		}
		c.Redirect(http.StatusSeeOther, target)
		c.Abort()
		return
	default:
		// The database could not say: neither a failure of the client's
		// nor a reason to drop its cookie.
		h.pageFail(c, err)
		c.Abort()
		return
	}
	admin.SetIdentity(c, sess.Identity)
	c.Set(ctxSession, sess)
	c.Next()
}

// requestSession is the live session of the request's cookie, or
// admin.ErrNoSession.
func (h *Console) requestSession(c *gin.Context) (*admin.Session, error) {
	ck, err := c.Request.Cookie(h.cookieName(c, sessionCookie))
	if err != nil || ck.Value == "" {
		return nil, admin.ErrNoSession
	}
	return h.CheckSession(c.Request.Context(), ck.Value)
}

// currentSession is the session the session middleware admitted, or nil.
func currentSession(c *gin.Context) *admin.Session {
	v, _ := c.Get(ctxSession)
	s, _ := v.(*admin.Session)
	return s
}

func (h *Console) hasSessionCookie(c *gin.Context) bool {
	ck, err := c.Request.Cookie(h.cookieName(c, sessionCookie))
	return err == nil && ck.Value != ""
}

// pageTooManyFailures answers 429 (a page) when the client failed to
// authenticate too often; see FailureLimiter.
func (h *Console) pageTooManyFailures(c *gin.Context) bool {
	blocked, wait := h.Limiter().Blocked(admin.ClientAddr(c))
	if !blocked {
		return false
	}
	secs := max(1, int(wait.Seconds()+0.5))
	c.Header("Retry-After", strconv.Itoa(secs))
	h.Log.WarnContext(c.Request.Context(), "admin: too many failed authentications", "remote", admin.ClientAddr(c))
	h.render(c, http.StatusTooManyRequests, "login", &view{Title: "Log in",
		Error: fmt.Sprintf("Too many failed attempts from your address. Try again in %d seconds.", secs), Page: h.loginView("/admin/")})
	return true
}

// csrf checks every POST: the form must carry the session's CSRF value,
// and a browser that says the request comes from another site is refused
// whatever it carries.
func (h *Console) csrf(c *gin.Context) {
	if c.Request.Method != http.MethodPost {
		c.Next()
		return
	}
	if !h.readForm(c) {
		return
	}
	sess := currentSession(c)
	got := c.Request.PostForm.Get(csrfField)
	if crossSite(c) || sess == nil || !hmac.Equal([]byte(got), []byte(sess.ID.CSRF())) {
		h.Log.WarnContext(c.Request.Context(), "admin: rejected page POST without a valid CSRF token",
			"path", c.Request.URL.Path, "actor", c.GetString(admin.CtxActor), "remote", admin.ClientAddr(c))
		h.renderError(c, http.StatusForbidden, "The form is missing its security token or it is out of date. Go back, reload the page and try again.")
		c.Abort()
		return
	}
	c.Next()
}

// crossSite reports a request the browser marks as coming from another
// site (Fetch Metadata). Browsers without it are covered by the CSRF
// field and SameSite=Strict.
func crossSite(c *gin.Context) bool {
	s := c.GetHeader("Sec-Fetch-Site")
	return s != "" && s != "same-origin" && s != "none"
}

// readForm parses a bounded POST body; false means it answered.
func (h *Console) readForm(c *gin.Context) bool {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, maxFormBytes)
	if err := c.Request.ParseForm(); err != nil {
		status := http.StatusBadRequest
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			status = http.StatusRequestEntityTooLarge
		}
		h.renderError(c, status, "The form could not be read.")
		c.Abort()
		return false
	}
	return true
}

// loginForm shows the login page (or goes on when already logged in).
func (h *Console) loginForm(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	if _, err := h.requestSession(c); err == nil {
		c.Redirect(http.StatusSeeOther, safeNext(c.Query("next")))
		return
	}
	v := &view{Title: "Log in", Page: h.loginView(safeNext(c.Query("next")))}
	if c.Query("out") == "1" {
		v.Flash = "You are logged out."
	}
	h.render(c, http.StatusOK, "login", v)
}

// loginView is what the login page offers: the token form unless
// admin.oidc.only, "Sign in with SSO" when an issuer is configured.
type loginView struct {
	Next string
	// SSO offers single sign-on; TokenForm the admin token form.
	SSO, TokenForm bool
	// DemoToken is the published demo admin token when it logs in (demo
	// mode, `make run`): the page says so, as the gateway's log does.
	DemoToken string
}

func (h *Console) loginView(next string) loginView {
	v := loginView{Next: next, SSO: h.SSO != nil, TokenForm: h.Tokens.Enabled() && (h.SSO == nil || !h.SSO.Only())}
	if v.TokenForm && h.Tokens.AcceptDemo() {
		v.DemoToken = demo.AdminToken
	}
	return v
}

// login checks the token and starts the session.
func (h *Console) login(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	if !h.readForm(c) {
		return
	}
	next := safeNext(c.Request.PostForm.Get("next"))
	if crossSite(c) {
		h.renderError(c, http.StatusForbidden, "Log in from the callgate login page.")
		return
	}
	if !h.loginView(next).TokenForm {
		h.render(c, http.StatusForbidden, "login", &view{Title: "Log in",
			Error: "Signing in with a token is switched off here (admin.oidc.only); use single sign-on.", Page: h.loginView(next)})
		return
	}
	token := strings.TrimSpace(c.Request.PostForm.Get("token"))
	who, err := h.Tokens.Authenticate(token)
	if err != nil {
		// Only failures wait: a valid token logs in whoever else failed.
		if h.pageTooManyFailures(c) {
			return
		}
		h.Limiter().Fail(admin.ClientAddr(c))
		h.Log.WarnContext(c.Request.Context(), "admin: rejected page login", "remote", admin.ClientAddr(c))
		msg := "That token is not valid. Use an admin token (CALLGATE_ADMIN_TOKEN)."
		if v := h.loginView(next); v.DemoToken != "" {
			msg = "That token is not valid. In demo mode, use the demo token shown below."
		}
		h.render(c, http.StatusUnauthorized, "login", &view{Title: "Log in", Error: msg, Page: h.loginView(next)})
		return
	}
	h.openSession(c, who, next, "")
}

// openSession starts who's session, sets its cookie, records the login
// and goes to next. A single sign-on arrives from the provider's site: a
// redirect would continue that cross-site navigation, on which the
// browser withholds the SameSite=Strict session cookie (the person would
// land on the login page again), so it answers a page that moves on by
// itself, a navigation this site starts.
func (h *Console) openSession(c *gin.Context, who admin.Identity, next, idToken string) {
	ctx := c.Request.Context()
	h.endOldSession(c)
	id, err := h.StartSession(ctx, who, idToken)
	if err != nil {
		h.Log.ErrorContext(ctx, "admin: could not start a page session", "actor", who.Actor, "error", err)
		h.renderError(c, http.StatusServiceUnavailable, "Storage is temporarily unavailable, please retry.")
		return
	}
	h.setSession(c, id.String(), int(h.SessionLifetime(who).Seconds()))
	how := "token"
	if who.SSO() {
		how = "single sign-on, subject " + who.Subject
	}
	h.Log.InfoContext(ctx, "admin: page login", "actor", who.Actor, "role", who.Role, "via", how, "remote", admin.ClientAddr(c))
	h.Service.Record(ctx, who.Actor, "login", admin.ClientAddr(c), fmt.Sprintf("%s, role %s", how, who.Role))
	if who.SSO() {
		h.render(c, http.StatusOK, "signedin", &view{Title: "Signed in", MoveTo: next, Page: next})
		return
	}
	c.Redirect(http.StatusSeeOther, next)
}

// endOldSession deletes the session a browser logging in again still
// carries, so it does not live on beside the new one.
func (h *Console) endOldSession(c *gin.Context) {
	ck, err := c.Request.Cookie(h.cookieName(c, sessionCookie))
	if err != nil {
		return
	}
	if id, ok := admin.ParseSessionID(ck.Value); ok {
		if err := h.EndSession(c.Request.Context(), id); err != nil {
			h.Log.WarnContext(c.Request.Context(), "admin: could not delete the previous session", "error", err)
		}
	}
}

// logout deletes the session's row, so a copy of the cookie is worth
// nothing afterwards, then clears the cookie. If the row cannot be deleted
// the operator is told and stays logged in rather than believing a live
// session ended.
func (h *Console) logout(c *gin.Context) {
	sess := currentSession(c)
	if err := h.EndSession(c.Request.Context(), sess.ID); err != nil {
		h.pageFail(c, err)
		return
	}
	h.Log.InfoContext(c.Request.Context(), "admin: page logout", "actor", sess.Actor, "remote", admin.ClientAddr(c))
	h.setSession(c, "", -1)
	if sess.SSO() && h.SSO != nil {
		// Also end the provider's session, when it says how (RP-initiated
		// logout); it sends the browser back to the login page.
		// A page that moves on by itself rather than a redirect: the CSP's
		// form-action 'self' forbids a form's redirect to another origin.
		if u := h.SSO.LogoutURL(c.Request.Context(), sess.IDToken, h.SSO.PostLogoutURL()); u != "" {
			h.render(c, http.StatusOK, "loggedout", &view{Title: "Logged out", MoveTo: u, Page: u})
			return
		}
	}
	c.Redirect(http.StatusSeeOther, "/admin/login?out=1")
}

func (h *Console) setSession(c *gin.Context, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{
		Name:     h.cookieName(c, sessionCookie),
		Value:    value,
		Path:     h.cookiePath(c, "/admin"),
		MaxAge:   maxAge,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   h.secure(c),
	})
}

// secure reports whether the console's cookies are Secure: served over
// TLS, or admin.secure_cookie (behind a TLS-terminating proxy).
func (h *Console) secure(c *gin.Context) bool { return h.Secure || c.Request.TLS != nil }

// cookieName is a console cookie's name: with the __Host- prefix when
// Secure (a browser takes such a cookie only with Path=/ and no Domain,
// from this host), else base (admin.secure_cookie false: plain HTTP, where
// the prefix cannot be used).
func (h *Console) cookieName(c *gin.Context, base string) string {
	if h.secure(c) {
		return hostPrefix + base
	}
	return base
}

// cookiePath is a console cookie's path: / for a __Host- cookie, which
// must have it, else path.
func (h *Console) cookiePath(c *gin.Context, path string) string {
	if h.secure(c) {
		return "/"
	}
	return path
}

// safeNext keeps a post-login target only when it is a page of this
// surface (never another host: no open redirect).
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/admin/") || strings.HasPrefix(next, "/admin/login") ||
		strings.ContainsAny(next, "\\\r\n") || strings.Contains(next, "//") {
		return "/admin/"
	}
	u, err := url.Parse(next)
	if err != nil || u.IsAbs() || u.Host != "" {
		return "/admin/"
	}
	return next
}
