package console_test

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/console"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789"
)

// writeRoutes are the operator surface's routes that change rows: every
// route but GET, login and logout, read from the routers themselves so
// that a write route added later is checked too.
func writeRoutes(t *testing.T) []gin.RouteInfo {
	t.Helper()
	tokens, err := admin.ParseTokens("x:" + operatorToken)
	require.NoError(t, err)
	h := &admin.Handler{Tokens: tokens, Log: slog.New(slog.DiscardHandler)}
	r := gin.New()
	h.Mount(r)
	console.New(h).Mount(r)
	var out []gin.RouteInfo
	for _, ri := range r.Routes() {
		switch {
		case ri.Method == http.MethodGet, ri.Path == "/admin/login", ri.Path == "/admin/logout":
			continue
		}
		out = append(out, ri)
	}
	require.GreaterOrEqual(t, len(out), 7, "the API's three and the page's four write routes")
	return out
}

// rowState is what a write would change: the audit trail, the replay
// jobs, the callback's status and attempts, the job's status.
func rowState(t *testing.T, st *testenv.TestStore, cbID, jobID int64) string {
	t.Helper()
	var audit, jobs, attempts int
	var status, jobStatus string
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM admin_audit WHERE action <> 'login'`).Scan(&audit))
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM replay_job`).Scan(&jobs))
	require.NoError(t, st.SQL.QueryRow(`SELECT status, attempts FROM callback_log WHERE id = ?`, cbID).Scan(&status, &attempts))
	require.NoError(t, st.SQL.QueryRow(`SELECT status FROM replay_job WHERE id = ?`, jobID).Scan(&jobStatus))
	// The job replays its own callbacks meanwhile (RUNNING, then DONE);
	// only a cancel is the viewer's doing.
	return fmt.Sprintf("audit=%d jobs=%d callback=%s/%d job_cancelled=%v", audit, jobs, status, attempts, jobStatus == "CANCELLED")
}

// TestViewerChangesNothing: a viewer's token (name:secret:viewer) and a
// viewer's page session are refused with 403 on every write route of the
// API and the page, with a valid CSRF value, and no row changes; the same
// requests by an operator's token go through (the routes are reachable).
func TestViewerChangesNothing(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = "ops:" + operatorToken + ",watcher:" + viewerToken + ":viewer"
		c.Admin.Replay.Rate = 1 // the job below stays RUNNING for seconds: a cancel would show
		c.Worker.ShutdownTimeout = 5 * time.Second
	})
	e := &pageEnv{cfg: cfg, st: testenv.Store(t, cfg)}
	e.gw = testenv.StartGateway(t, cfg)
	e.gw.WaitReady(t)
	testenv.StartWorker(t, cfg, worker.Options{})

	var ids []int64
	for i := range 7 {
		ids = append(ids, e.pay(t, fmt.Sprintf("ORD-VIEWER-%d", i), fmt.Sprintf("PAY-VIEWER-%d", i), 1500))
	}
	for _, id := range ids {
		e.waitStatus(t, id, callback.StatusFailed)
	}
	cbID := ids[0]
	// A RUNNING job to try to cancel, started by the operator.
	var job struct {
		ID int64 `json:"id"`
	}
	status := e.api(t, http.MethodPost, "/admin/api/replays", operatorToken,
		fmt.Sprintf(`{"ids":[%d,%d,%d,%d,%d,%d],"reason":"setup"}`, ids[1], ids[2], ids[3], ids[4], ids[5], ids[6]), &job)
	require.Equal(t, http.StatusAccepted, status)
	require.NotZero(t, job.ID)

	// A page session for a token, the detail page it sees and its CSRF
	// value.
	login := func(token string) (*http.Cookie, string, string) {
		t.Helper()
		resp, _ := e.post(t, "/admin/login", url.Values{"token": {token}, "next": {"/admin/"}}, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		session := sessionCookieOf(t, resp)
		_, page := e.get(t, fmt.Sprintf("/admin/callbacks/%d", cbID), session)
		csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
		require.NotNil(t, csrf)
		return session, csrf[1], page
	}
	session, csrf, page := login(viewerToken)
	require.Contains(t, page, `id="role">viewer<`, "the page says who is signed in and as what")
	require.Contains(t, page, `id="replay-viewer"`)
	require.NotContains(t, page, `id="replay"`, "no replay button for a viewer")

	before := rowState(t, e.st, cbID, job.ID)
	path := func(ri gin.RouteInfo) string {
		p := strings.Replace(ri.Path, ":id", fmt.Sprint(cbID), 1)
		if strings.HasPrefix(ri.Path, "/admin/replays/:id") || strings.HasPrefix(ri.Path, "/admin/api/replays/:id") {
			p = strings.Replace(ri.Path, ":id", fmt.Sprint(job.ID), 1)
		}
		return p
	}
	// send does a route's request as the token (API) or the session
	// (page) and returns the status and the body.
	send := func(ri gin.RouteInfo, token string, session *http.Cookie, csrf, reason string) (int, string) {
		t.Helper()
		p := path(ri)
		if strings.HasPrefix(ri.Path, "/admin/api/") {
			return e.api(t, ri.Method, p, token, fmt.Sprintf(`{"ids":[%d],"reason":%q,"force":true}`, cbID, reason), nil), ""
		}
		require.Equal(t, http.MethodPost, ri.Method)
		resp, body := e.post(t, p, url.Values{"csrf": {csrf}, "reason": {reason}, "ids": {fmt.Sprint(cbID)}, "status": {"FAILED"}, "force": {"1"}}, session)
		return resp.StatusCode, body
	}
	routes := writeRoutes(t)
	for _, ri := range routes {
		t.Run("viewer "+ri.Method+" "+ri.Path, func(t *testing.T) {
			status, body := send(ri, viewerToken, session, csrf, "a viewer tries")
			require.Equal(t, http.StatusForbidden, status, body)
			if body != "" {
				require.Contains(t, body, "needs the operator role")
			}
			require.Equal(t, before, rowState(t, e.st, cbID, job.ID), "a viewer's request changed a row")
		})
	}

	// An operator's token and session go through the same routes: the
	// check refuses viewers, not everybody.
	opSession, opCSRF, page := login(operatorToken)
	require.Contains(t, page, `id="replay"`)
	for _, ri := range routes {
		// Past the role check, the service decides (a callback replayed
		// by the route before is PENDING, a 4xx of its own).
		status, body := send(ri, operatorToken, opSession, opCSRF, "an operator acts")
		require.NotContains(t, []int{http.StatusUnauthorized, http.StatusForbidden}, status, "%s %s: %s", ri.Method, ri.Path, body)
		require.Less(t, status, 500, "%s %s: %s", ri.Method, ri.Path, body)
	}
	require.NotEqual(t, before, rowState(t, e.st, cbID, job.ID), "the operator's requests changed rows")
	var actor string
	// Whichever of its requests acted (the batch job it started may have
	// replayed the callback before a single replay came, which is then a
	// 4xx of its own: the order depends on the machine's load), what acted
	// is written down under the operator's name.
	require.NoError(t, e.st.SQL.QueryRow(`SELECT actor FROM admin_audit WHERE reason = 'an operator acts' LIMIT 1`).Scan(&actor))
	require.Equal(t, "ops", actor)
}

// api calls the admin API with a bearer token and a JSON body.
func (e *pageEnv) api(t *testing.T, method, path, token, body string, out any) int {
	t.Helper()
	var b any
	if body != "" {
		b = body
	}
	return testenv.AdminCall(t, e.gw.URL, method, path, token, b, out)
}

// TestSSOProviderUnreachableAtStart: a gateway whose provider cannot be
// reached starts anyway (the intake and the token form work), explains
// the outage on the login page with a 503, and signs people in once the
// provider is up, without a restart.
func TestSSOProviderUnreachableAtStart(t *testing.T) {
	t.Parallel()
	idp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	idpAddr := idp.Addr().String()
	require.NoError(t, idp.Close()) // nothing listens there yet
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = "ops:" + operatorToken
		_, port, err := net.SplitHostPort(idpAddr)
		require.NoError(t, err)
		c.Admin.OIDC = config.OIDC{Issuer: "http://localhost:" + port + "/oidc", ClientID: "callgate", ClientSecret: "oidc-test-client-secret-0123",
			RedirectURL: base + "/admin/oidc/callback", Operators: []string{operatorsGroup}}
	})
	e := &pageEnv{cfg: cfg, st: testenv.Store(t, cfg)}
	e.gw = testenv.StartGatewayOn(t, cfg, ln, "http")
	e.gw.WaitReady(t)

	_, page := e.get(t, "/admin/login", nil)
	require.Contains(t, page, `id="sso"`)
	require.Contains(t, page, `id="token"`, "the token form stays without admin.oidc.only")
	resp, page := e.get(t, "/admin/login/oidc", nil)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, page, "Single sign-on is unavailable: the identity provider cannot be reached")
	require.Empty(t, resp.Cookies(), "no flow, no session")
	resp, _ = e.post(t, "/admin/login", url.Values{"token": {operatorToken}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a token still logs in")

	prov := testenv.StartOIDCProviderOn(t, idpAddr)
	require.Eventually(t, func() bool {
		resp, _ := e.get(t, "/admin/login/oidc", nil)
		return resp.StatusCode == http.StatusFound && strings.HasPrefix(resp.Header.Get("Location"), prov.Issuer+"/authorize?")
	}, 15*time.Second, time.Second, "sign-in starts once the provider is up") // each try is a start of the address's
	resp, _ = e.get(t, "/admin/login/oidc?next=/admin/audit", nil)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	q := loc.Query()
	require.Equal(t, "code", q.Get("response_type"))
	require.Equal(t, "S256", q.Get("code_challenge_method"))
	require.NotEmpty(t, q.Get("code_challenge"))
	require.NotEmpty(t, q.Get("state"))
	require.NotEmpty(t, q.Get("nonce"))
	require.Equal(t, base+"/admin/oidc/callback", q.Get("redirect_uri"))
	var flow *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-callgate_oidc" {
			flow = c
		}
	}
	require.NotNil(t, flow)
	require.Equal(t, "/", flow.Path, "a __Host- cookie has Path=/")
	require.True(t, flow.Secure)
	require.True(t, flow.HttpOnly)
	require.Equal(t, http.SameSiteLaxMode, flow.SameSite)
}

// TestSSOOnlyRefusesTheTokenForm: with admin.oidc.only the login page has
// no token form and a posted token opens no session; API tokens still
// work (the CLI).
func TestSSOOnlyRefusesTheTokenForm(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = "ops:" + operatorToken
		c.Admin.OIDC = config.OIDC{Issuer: "http://127.0.0.1:1/oidc", ClientID: "callgate", ClientSecret: "oidc-test-client-secret-0123",
			RedirectURL: "http://127.0.0.1:1/admin/oidc/callback", Operators: []string{operatorsGroup}, Only: true}
	})
	e := &pageEnv{cfg: cfg, st: testenv.Store(t, cfg)}
	e.gw = testenv.StartGateway(t, cfg)
	e.gw.WaitReady(t)
	_, page := e.get(t, "/admin/login", nil)
	require.Contains(t, page, `id="sso"`)
	require.NotContains(t, page, `id="token"`)
	resp, page := e.post(t, "/admin/login", url.Values{"token": {operatorToken}}, nil)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, page, "admin.oidc.only")
	for _, c := range resp.Cookies() {
		require.NotEqual(t, "__Host-callgate_admin", c.Name, "no session")
	}
	require.Equal(t, http.StatusOK, e.api(t, http.MethodGet, "/admin/api/stats", operatorToken, "", nil))
}

// TestSSOSignInLimiter: bad tokens from an address (behind a proxy,
// everybody's) do not lock single sign-on out, nor do forged redirects
// without a valid flow cookie's state (they never reach the provider).
// Sign-ins whose flow cookie held but whose code the provider refused
// count: after ten, the address starts no new sign-in for a while (429),
// yet a sign-in already started is never refused.
func TestSSOSignInLimiter(t *testing.T) {
	t.Parallel()
	prov := testenv.StartOIDCProvider(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = "ops:" + operatorToken
		c.Admin.OIDC = config.OIDC{Issuer: prov.Issuer, ClientID: prov.ClientID, ClientSecret: prov.ClientSecret,
			RedirectURL: base + "/admin/oidc/callback", Operators: []string{operatorsGroup}}
	})
	e := &pageEnv{cfg: cfg, st: testenv.Store(t, cfg)}
	e.gw = testenv.StartGatewayOn(t, cfg, ln, "http")
	e.gw.WaitReady(t)
	// start begins a sign-in with a plain client: the answer, and the
	// flow cookie and the provider's redirect back when it began.
	start := func() (*http.Response, *http.Cookie, *url.URL) {
		t.Helper()
		prov.Next(t, testenv.OIDCUser{Subject: "u-1", Email: "o@example.com", Groups: []string{operatorsGroup}})
		resp, _ := e.get(t, "/admin/login/oidc", nil)
		if resp.StatusCode != http.StatusFound {
			return resp, nil, nil
		}
		var flow *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == "__Host-callgate_oidc" {
				flow = c
			}
		}
		require.NotNil(t, flow)
		authz, err := testenv.NoFollow.Get(resp.Header.Get("Location") + "&signed_in=1")
		require.NoError(t, err)
		_ = authz.Body.Close()
		require.Equal(t, http.StatusFound, authz.StatusCode)
		back, err := url.Parse(authz.Header.Get("Location"))
		require.NoError(t, err)
		return resp, flow, back
	}
	// finish sends the provider's redirect back, its state or code
	// altered by spoil.
	finish := func(flow *http.Cookie, back *url.URL, spoil func(url.Values)) *http.Response {
		t.Helper()
		u := *back
		q := u.Query()
		if spoil != nil {
			spoil(q)
		}
		u.RawQuery = q.Encode()
		req, err := http.NewRequest(http.MethodGet, u.String(), nil)
		require.NoError(t, err)
		cb, _ := e.do(t, req, flow)
		return cb
	}
	signIn := func(spoil func(url.Values)) *http.Response {
		t.Helper()
		resp, flow, back := start()
		require.Equal(t, http.StatusFound, resp.StatusCode)
		return finish(flow, back, spoil)
	}
	for range 11 {
		resp, _ := e.post(t, "/admin/login", url.Values{"token": {"wrong-token-000000"}}, nil)
		require.Contains(t, []int{http.StatusUnauthorized, http.StatusTooManyRequests}, resp.StatusCode)
	}
	resp, _ := e.post(t, "/admin/login", url.Values{"token": {"wrong-token-000000"}}, nil)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "bad tokens are limited")
	ok := signIn(nil)
	require.Equal(t, http.StatusOK, ok.StatusCode, "single sign-on is not locked out by them")
	require.NotNil(t, sessionCookieOf(t, ok))

	// Altered states (the one flow cookie sent again and again: an
	// address starts only so many sign-ins) never reach the provider.
	alterState := func(q url.Values) { q.Set("state", "altered-"+q.Get("state")) }
	_, flow, back := start()
	for range 20 {
		require.Equal(t, http.StatusBadRequest, finish(flow, back, alterState).StatusCode)
	}
	ok = finish(flow, back, nil)
	require.Equal(t, http.StatusOK, ok.StatusCode, "altered states spend nothing of the address's budget, nor the flow")

	// A flow cookie carries one callback: used again, it is refused
	// before the provider is asked.
	_, flow, back = start()
	require.Equal(t, http.StatusOK, finish(flow, back, nil).StatusCode)
	require.Equal(t, http.StatusBadRequest, finish(flow, back, nil).StatusCode, "a flow cookie used twice")

	// A sign-in started before the address ran out of budget.
	_, pendingFlow, pendingBack := start()
	badCode := func(q url.Values) { q.Set("code", "forged-"+q.Get("code")) }
	for range 10 {
		require.Equal(t, http.StatusBadGateway, signIn(badCode).StatusCode)
	}
	blocked, _, _ := start()
	require.Equal(t, http.StatusTooManyRequests, blocked.StatusCode, "ten refused codes: no new sign-in for a while")
	require.NotEmpty(t, blocked.Header.Get("Retry-After"))
	done := finish(pendingFlow, pendingBack, nil)
	require.Equal(t, http.StatusOK, done.StatusCode, "a callback with a valid flow cookie is never refused")
	require.NotNil(t, sessionCookieOf(t, done))
}
