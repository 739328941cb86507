package console_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

const (
	operatorsGroup = "callgate-operators"
	viewersGroup   = "callgate-viewers"
)

// TestSSOInBrowser drives single sign-on in headless Chromium against a
// real OpenID provider process (test/oidcprovider): a viewer sees no
// replay button and a forged replay with a valid CSRF value is 403; an
// operator replays and the audit and the callback's page name them; a
// user removed from the operators' group is a viewer at the next sign-in;
// logout ends the provider's session too; a user in no group gets the 403
// page naming the claim; a wrong audience, an expired ID token, another
// sign-in's nonce, an altered state and a token endpoint answering
// nonsense are each refused with a reason and open no session; forged
// callbacks from the same address do not lock the operators out.
func TestSSOInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("\n\n*** SKIPPING THE SINGLE SIGN-ON BROWSER TEST: %s not found (%v).\n"+
			"*** Install it with: apt-get update && apt-get install -y chromium\n\n", chromiumPath, err)
	}
	t.Parallel()
	prov := testenv.StartOIDCProvider(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	e := &pageEnv{}
	e.cfg = testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = browserActor + ":" + browserSecret
		c.Admin.OIDC = config.OIDC{Issuer: prov.Issuer, ClientID: prov.ClientID, ClientSecret: prov.ClientSecret,
			RedirectURL: base + "/admin/oidc/callback", Operators: []string{operatorsGroup}, Viewers: []string{viewersGroup},
			MaxSession: 2 * time.Hour}
		c.Worker.ShutdownTimeout = 5 * time.Second
	})
	e.st = testenv.Store(t, e.cfg)
	e.gw = testenv.StartGatewayOn(t, e.cfg, ln, "http")
	e.gw.WaitReady(t)
	testenv.StartWorker(t, e.cfg, worker.Options{})
	failedID := e.pay(t, "ORD-SSO-1", "PAY-SSO-1", 1500)
	e.waitStatus(t, failedID, callback.StatusFailed)
	detailURL := fmt.Sprintf("%s/admin/callbacks/%d", base, failedID)

	e.startBrowser(t)
	ssoSessions := func() int {
		var n int
		require.NoError(t, e.st.SQL.QueryRow(`SELECT COUNT(*) FROM admin_session WHERE subject IS NOT NULL`).Scan(&n))
		return n
	}
	status := func() int {
		return pgEval[int](t, e, `performance.getEntriesByType("navigation")[0].responseStatus`)
	}
	signIn := func(u testenv.OIDCUser) {
		t.Helper()
		prov.Next(t, u)
		e.run(t, chromedp.Navigate(base+"/admin/login"))
		require.Equal(t, "Sign in with SSO", e.text(t, "#sso"))
		e.clickAndWait(t, "#sso")
		require.Contains(t, e.location(t), prov.Issuer+"/authorize?", "at the provider's sign-in page")
		e.clickAndWait(t, "#idp-continue")
		e.settle(t)
	}
	notSignedIn := func() {
		t.Helper()
		require.Zero(t, ssoSessions(), "no session was opened")
		e.run(t, chromedp.Navigate(base+"/admin/"))
		require.Equal(t, base+"/admin/login", e.location(t), "the console still asks to log in")
	}
	logout := func() {
		t.Helper()
		e.clickAndWait(t, "form.logout button")
		// The logged-out page moves on to the provider's end_session
		// endpoint, which sends the browser back to the login page.
		e.settle(t)
		require.Equal(t, base+"/admin/login?out=1", e.location(t), "back from the provider's logout")
		require.Equal(t, "You are logged out.", e.text(t, ".flash"))
	}

	// A viewer: every page, no replay button, and a forged replay (valid
	// CSRF value, the page's own) is refused on the server.
	signIn(testenv.OIDCUser{Subject: "u-viewer", Email: "vera@example.com", Name: "Vera Viewer", Groups: []string{"staff", viewersGroup}})
	require.Equal(t, base+"/admin/", e.location(t))
	require.Equal(t, "vera@example.com", e.text(t, ".who"))
	require.Equal(t, "viewer", e.text(t, "#role"))
	e.run(t, chromedp.Navigate(detailURL))
	require.Equal(t, "FAILED", e.text(t, "#cb-status"))
	require.Zero(t, e.count(t, "#replay"), "no replay button for a viewer")
	require.Equal(t, 1, e.count(t, "#replay-viewer"))
	forged := pgValue(t, e, chromedp.Evaluate[int](`fetch(location.pathname + "/replay", {method: "POST",
		body: new URLSearchParams({csrf: document.querySelector("input[name=csrf]").value, reason: "forged by a viewer"})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	require.Equal(t, http.StatusForbidden, forged)
	var replays int
	require.NoError(t, e.st.SQL.QueryRow(`SELECT COUNT(*) FROM admin_audit WHERE action = 'replay'`).Scan(&replays))
	require.Zero(t, replays)
	e.noCSPViolations(t)
	logout()
	require.Equal(t, 1, prov.Logouts(t), "logout went through the provider's end_session_endpoint")
	require.Zero(t, ssoSessions(), "logout deleted the session")

	// An operator replays; the audit trail and the callback's page name
	// them, and the session remembers who they are.
	signIn(testenv.OIDCUser{Subject: "u-operator", Email: "otto@example.com", Name: "Otto Operator", Groups: []string{operatorsGroup}})
	require.Equal(t, "operator", e.text(t, "#role"))
	var role, subject, email, name string
	var lifetime float64
	require.NoError(t, e.st.SQL.QueryRow(`SELECT role, subject, email, display_name, TIMESTAMPDIFF(SECOND, created_at, expires_at)
		FROM admin_session WHERE subject IS NOT NULL`).Scan(&role, &subject, &email, &name, &lifetime))
	require.Equal(t, []string{"operator", "u-operator", "otto@example.com", "Otto Operator"}, []string{role, subject, email, name})
	require.InDelta(t, (2 * time.Hour).Seconds(), lifetime, 1, "admin.oidc.max_session bounds the session")
	_, err = e.st.SQL.Exec("INSERT INTO orders (order_code, user_id, amount) VALUES (?, ?, ?)", "ORD-SSO-1", 42, 1500)
	require.NoError(t, err)
	e.run(t, chromedp.Navigate(detailURL))
	e.run(t, chromedp.SendKeys(chromedp.CSS("#reason"), "order created late (sso test)"))
	e.clickAndWait(t, "#replay")
	e.pollText(t, detailURL, "#cb-status", "SUCCESS", 20*time.Second)
	require.Equal(t, "otto@example.com", e.text(t, "table.replays .replay-actor"))
	require.Equal(t, "order created late (sso test)", e.text(t, "table.replays .replay-reason"))
	var actor string
	require.NoError(t, e.st.SQL.QueryRow(`SELECT actor FROM admin_audit WHERE action = 'replay' AND target = ?`, fmt.Sprint(failedID)).Scan(&actor))
	require.Equal(t, "otto@example.com", actor)
	logout()

	// Moved out of the operators' group: a viewer at the next sign-in.
	signIn(testenv.OIDCUser{Subject: "u-operator", Email: "otto@example.com", Groups: []string{viewersGroup}})
	require.Equal(t, "viewer", e.text(t, "#role"))
	logout()

	// In no group: the 403 page says which claim was read and what it held.
	signIn(testenv.OIDCUser{Subject: "u-sales", Email: "sam@example.com", Groups: []string{"sales", "everyone"}})
	require.Equal(t, http.StatusForbidden, status())
	require.Equal(t, "groups", e.text(t, "#norole-claim"))
	require.Equal(t, "sales, everyone", e.text(t, "#norole-values"))
	require.Equal(t, "sam@example.com", e.text(t, "#norole-actor"))
	notSignedIn()

	// Refused sign-ins: each a reason on the login page, and no session.
	operator := testenv.OIDCUser{Subject: "u-mallory", Email: "mallory@example.com", Groups: []string{operatorsGroup}}
	for _, tc := range []struct {
		name, want string
		status     int
		spoil      func(u *testenv.OIDCUser)
	}{
		{"wrong audience", "ID token was refused", http.StatusUnauthorized, func(u *testenv.OIDCUser) { u.Audience = "another-client" }},
		{"expired ID token", "ID token was refused", http.StatusUnauthorized, func(u *testenv.OIDCUser) { u.Expired = true }},
		{"another sign-in's nonce", "its nonce differs", http.StatusUnauthorized, func(u *testenv.OIDCUser) { u.Nonce = "replayed-nonce" }},
		{"altered state", "does not match one started here", http.StatusBadRequest, func(*testenv.OIDCUser) { prov.TamperState(t) }},
		{"nonsense token answer", "did not exchange the sign-in code", http.StatusBadGateway, func(*testenv.OIDCUser) { prov.NonsenseToken(t) }},
	} {
		u := operator
		tc.spoil(&u)
		signIn(u)
		require.Equal(t, tc.status, status(), tc.name)
		require.Contains(t, e.text(t, ".error"), tc.want, tc.name)
		notSignedIn()
	}

	// Anyone can send forged callbacks from the operators' address (behind
	// a proxy, everybody's): without a flow cookie they never reach the
	// provider, are each a 400, and spend nothing of the address's
	// budget, so a real operator's sign-in from that address still works.
	for i := range 30 {
		resp, err := testenv.NoFollow.Get(fmt.Sprintf("%s/admin/oidc/callback?code=x%d&state=y", base, i))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "forged callback %d", i)
	}
	signIn(testenv.OIDCUser{Subject: "u-operator", Email: "otto@example.com", Groups: []string{operatorsGroup}})
	require.Equal(t, base+"/admin/", e.location(t), "signed in after the forged callbacks")
	require.Equal(t, "operator", e.text(t, "#role"))
	logout()
	e.noCSPViolations(t)
}

// settle waits until the page has loaded and is not one that moves on by
// itself (the signed-in and logged-out pages' meta refresh).
func (e *pageEnv) settle(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
		defer cancel()
		done, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
			`document.readyState === "complete" && document.querySelector('meta[http-equiv="refresh"]') === null`))
		return err == nil && done
	}, 15*time.Second, 50*time.Millisecond, "the page did not settle")
}
