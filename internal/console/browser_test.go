package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/platform"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// chromiumPath is Debian's chromium package (make test expects it:
// apt-get install -y chromium).
const chromiumPath = "/usr/bin/chromium"

const (
	browserActor  = "alice"
	browserSecret = "browser-secret-0123456789"
	// browserStripeSecret enables the stripe preset source.
	browserStripeSecret = "whsec_browser_test_secret"
	xssPaymentNo        = `<script>window.__xss=1</script>`
	wantCSP             = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)

// pageEnv is a real gateway and worker plus a headless Chromium.
type pageEnv struct {
	cfg *config.Config
	gw  *testenv.Gateway
	st  *testenv.TestStore
	ctx context.Context // the browser tab
	// dialogs counts confirm() dialogs app.js opened (all accepted).
	dialogs atomic.Int32
}

// TestAdminPageInBrowser drives the operator page in a real headless
// Chromium against an in-process gateway and worker: login, dashboard,
// search, detail, single replay, escaping of a hostile payload, a bulk
// replay through its dry run, and the audit trail.
func TestAdminPageInBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("\n\n*** SKIPPING THE ADMIN PAGE BROWSER TEST: %s not found (%v).\n"+
			"*** Install it with: apt-get update && apt-get install -y chromium\n\n", chromiumPath, err)
	}
	t.Parallel()
	start := time.Now()
	e := &pageEnv{}
	e.cfg = testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = browserActor + ":" + browserSecret + ",bob:bob-secret-0123456789"
		c.Admin.Replay.Cap = 3 // the bulk replay below (4) needs confirm_large
		c.Scheduler.Compensation.Interval = 100 * time.Millisecond
		c.Scheduler.OutboxRelay.Interval = 100 * time.Millisecond
		c.Worker.ShutdownTimeout = 5 * time.Second
	}, testenv.WithPlatform("stripe", platform.Config{Secrets: []string{browserStripeSecret}}))
	e.st = testenv.Store(t, e.cfg)
	e.gw = testenv.StartGateway(t, e.cfg)
	e.gw.WaitReady(t)
	testenv.StartWorker(t, e.cfg, worker.Options{})

	// 1. Two callbacks that fail: no such orders.
	failedID := e.pay(t, "ORD-BROWSER-1", "PAY-BROWSER-1", 1500)
	xssID := e.pay(t, "ORD-BROWSER-XSS", xssPaymentNo, 1500)
	e.waitStatus(t, failedID, callback.StatusFailed)
	e.waitStatus(t, xssID, callback.StatusFailed)

	var session *http.Cookie
	var csrf string
	t.Run("http", func(t *testing.T) { session, csrf = e.checkHTTP(t, xssID) })
	require.NotNil(t, session)

	e.startBrowser(t)
	base := e.gw.URL

	// 2. Not logged in: the login page; a wrong token is refused.
	e.run(t, chromedp.Navigate(base+"/admin/"))
	require.Equal(t, base+"/admin/login", e.location(t))
	e.run(t, chromedp.SendKeys(chromedp.CSS("#token"), "wrong-token-000000"))
	e.clickAndWait(t, `form.login button[type=submit]`)
	require.Contains(t, e.text(t, ".error"), "not valid")
	e.run(t, chromedp.SendKeys(chromedp.CSS("#token"), browserSecret))
	e.clickAndWait(t, `form.login button[type=submit]`)
	require.Equal(t, base+"/admin/", e.location(t))
	require.Contains(t, e.text(t, ".who"), browserActor)

	// 3. Dashboard: FAILED count and the chart.
	failedTotal, err := strconv.Atoi(e.text(t, "#count-FAILED-total"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, failedTotal, 2)
	require.Positive(t, e.count(t, "svg.chart"), "the chart is there")
	require.Positive(t, e.count(t, "svg.chart rect.received"), "intake bars drawn")
	require.Positive(t, e.count(t, "svg.chart rect.failed"), "failure bars drawn")
	e.noCSPViolations(t)
	e.screenshot(t, "admin-dashboard.png")

	// 4. Search by key, open the one row.
	e.clickAndWait(t, `nav a[href="/admin/callbacks"]`)
	e.run(t, chromedp.SendKeys(chromedp.CSS("#f-key"), "ORD-BROWSER-1"))
	e.clickAndWait(t, "#search")
	require.Contains(t, e.location(t), "key=ORD-BROWSER-1")
	require.Equal(t, 1, e.count(t, "table.callbacks tbody tr"))
	require.Equal(t, strconv.FormatInt(failedID, 10), e.text(t, "table.callbacks tbody a.cb-link"))
	e.clickAndWait(t, "table.callbacks tbody a.cb-link")
	detailURL := fmt.Sprintf("%s/admin/callbacks/%d", base, failedID)
	require.Equal(t, detailURL, e.location(t))
	require.Equal(t, "FAILED", e.text(t, "#cb-status"))
	require.Contains(t, e.text(t, "#cb-last-error"), "order not found")
	require.Contains(t, e.text(t, "table.attempts"), "order not found")
	payload := e.text(t, "#payload")
	require.Contains(t, payload, "{\n  \"orderCode\": \"ORD-BROWSER-1\",\n", "pretty-printed JSON payload")

	// 5. With the order in place, replay it from the page.
	_, err = e.st.SQL.Exec("INSERT INTO orders (order_code, user_id, amount) VALUES (?, ?, ?)", "ORD-BROWSER-1", 42, 1500)
	require.NoError(t, err)
	e.run(t, chromedp.SendKeys(chromedp.CSS("#reason"), "order created late (browser test)"))
	e.clickAndWait(t, "#replay")
	require.Equal(t, detailURL+"?replayed=1", e.location(t))
	require.Contains(t, e.text(t, ".flash"), "Replay accepted")
	e.pollText(t, detailURL, "#cb-status", "SUCCESS", 20*time.Second)
	require.Contains(t, e.text(t, "table.lineage"), "warehouse", "the replay produced the downstream messages")
	// The order's money history: the payment this callback recorded.
	require.Contains(t, e.text(t, "#money h2"), "ORD-BROWSER-1")
	require.Contains(t, e.text(t, "#money-status"), "PAID")
	require.Equal(t, 1, e.count(t, "table.money tbody tr.this"), "the callback's own row is marked")
	require.Contains(t, e.text(t, "table.money tbody tr"), "paid the order")
	require.Contains(t, e.text(t, "table.money tbody tr"), "1500 CNY")
	require.Equal(t, strconv.FormatInt(failedID, 10), e.text(t, "table.money a.money-log"), "the payment links to the callback that made it")
	// Its facts, as they happened and as they arrived.
	require.Equal(t, 1, e.count(t, "#facts-happened tbody tr"))
	require.Contains(t, e.text(t, "#facts-happened tbody tr"), "payment")
	require.Contains(t, e.text(t, "#facts-happened tbody tr"), "#1")
	require.Equal(t, 1, e.count(t, "#facts-arrived tbody tr.this"), "the callback's own fact is marked")
	require.Contains(t, e.text(t, "#money-left"), "0 CNY")
	e.noCSPViolations(t)
	e.screenshot(t, "admin-detail.png")

	// 6. A payload with a script tag is shown as text and never runs.
	e.run(t, chromedp.Navigate(fmt.Sprintf("%s/admin/callbacks/%d", base, xssID)))
	require.Contains(t, e.text(t, "#payload"), xssPaymentNo)
	require.Zero(t, e.count(t, "script:not([src])"), "no inline script element on the page")
	require.Zero(t, e.count(t, "#payload *"), "the payload is text only")
	require.Equal(t, "undefined", pgEval[string](t, e, `typeof window.__xss`))
	e.noCSPViolations(t)

	// 6b. A platform preset's callback: the raw body as signed, the
	// normalized event beside it, and the reason it changed nothing in
	// its attempt.
	stripeID := e.stripe(t, `{"id":"evt_browser_1","object":"event","livemode":true,"type":"charge.captured","data":{"object":{"id":"ch_1","metadata":{"order_code":"ORD-BROWSER-ST"}}}}`)
	e.waitStatus(t, stripeID, callback.StatusSuccess)
	e.run(t, chromedp.Navigate(fmt.Sprintf("%s/admin/callbacks/%d", base, stripeID)))
	require.Contains(t, e.text(t, "#payload"), `"evt_browser_1"`)
	require.Contains(t, e.text(t, "#normalized"), `"ignored": "stripe event type charge.captured changes no payment"`)
	require.Contains(t, e.text(t, "table.attempts td.note"), "charge.captured", "the attempt says why nothing changed")
	e.noCSPViolations(t)

	// 7. Bulk replay: three more FAILED paydemo callbacks, dry run, confirm.
	var bulkIDs []int64
	for i := 1; i <= 3; i++ {
		bulkIDs = append(bulkIDs, e.pay(t, fmt.Sprintf("ORD-BROWSER-BULK-%d", i), fmt.Sprintf("PAY-BROWSER-BULK-%d", i), 1500))
	}
	for _, id := range bulkIDs {
		e.waitStatus(t, id, callback.StatusFailed)
	}
	for i := 1; i <= 3; i++ {
		_, err = e.st.SQL.Exec("INSERT INTO orders (order_code, user_id, amount) VALUES (?, ?, ?)", fmt.Sprintf("ORD-BROWSER-BULK-%d", i), 42, 1500)
		require.NoError(t, err)
	}
	var expected int
	require.NoError(t, e.st.SQL.QueryRow("SELECT COUNT(*) FROM callback_log WHERE source = 'paydemo' AND status = 'FAILED'").Scan(&expected))
	require.Equal(t, 4, expected, "3 bulk + the script one")

	e.clickAndWait(t, `nav a[href="/admin/replays"]`)
	e.run(t,
		chromedp.SetValue(chromedp.CSS("#b-status"), "FAILED"),
		chromedp.SendKeys(chromedp.CSS("#b-source"), "paydemo"),
		chromedp.SendKeys(chromedp.CSS("#b-reason"), "orders imported late (browser test)"),
	)
	e.clickAndWait(t, "#dry-run")
	require.Equal(t, base+"/admin/replays/dry-run", e.location(t))
	require.Equal(t, strconv.Itoa(expected), e.text(t, "#matched"))
	require.Equal(t, min(expected, 10), e.count(t, "table.sample tbody tr"))
	require.Equal(t, 1, e.count(t, `input[name=confirm_large]`), "over the cap of 3")
	// Without confirm_large the server refuses (the browser would not
	// even send the form: the box is required).
	resp, body := e.post(t, "/admin/replays", url.Values{"status": {"FAILED"}, "source": {"paydemo"}, "reason": {"no confirm"}, "csrf": {csrf}}, session)
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.Contains(t, body, "confirm_large")
	e.run(t, chromedp.Click(chromedp.CSS(`input[name=confirm_large]`), chromedp.NodeVisible))
	dialogsBefore := e.dialogs.Load()
	e.clickAndWait(t, "#confirm")
	require.Greater(t, e.dialogs.Load(), dialogsBefore, "app.js asked for confirmation")
	loc := e.location(t)
	require.Regexp(t, `/admin/replays/\d+\?created=1$`, loc)
	jobURL := strings.TrimSuffix(loc, "?created=1")
	require.Contains(t, e.text(t, ".flash"), "Bulk replay started")
	e.noCSPViolations(t)
	e.pollText(t, jobURL, "#job-status", "DONE", 20*time.Second)
	require.Equal(t, strconv.Itoa(expected), e.text(t, "#job-matched"))
	require.Equal(t, strconv.Itoa(expected), e.text(t, "#job-replayed"))
	for _, id := range bulkIDs {
		e.waitStatus(t, id, callback.StatusSuccess)
	}
	e.waitStatus(t, xssID, callback.StatusFailed) // replayed too, fails again
	require.Zero(t, e.count(t, "#cancel"), "no cancel button on a finished job")
	resp, _ = e.post(t, strings.TrimPrefix(jobURL, base)+"/cancel", url.Values{"csrf": {csrf}}, session)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, strings.TrimPrefix(jobURL, base)+"?error=finished", resp.Header.Get("Location"))

	// 8. The audit trail has both replays, by alice.
	e.clickAndWait(t, `nav a[href="/admin/audit"]`)
	rows := pgEval[[][]string](t, e, `Array.from(document.querySelectorAll("table.audit tbody tr")).map(r =>
		[r.querySelector(".actor").textContent, r.querySelector(".action").textContent, r.children[3].textContent.trim()])`)
	var actions [][]string
	logins := 0
	for _, r := range rows {
		if r[1] == "login" {
			logins++
			require.Equal(t, browserActor, r[0])
			continue
		}
		actions = append(actions, r)
	}
	require.GreaterOrEqual(t, logins, 1, "logins are in the audit trail: %v", rows)
	require.Len(t, actions, 2, "%v", rows)
	require.Equal(t, []string{browserActor, "bulk_replay"}, actions[0][:2])
	require.Regexp(t, `^job:\d+$`, actions[0][2])
	require.Equal(t, []string{browserActor, "replay", strconv.FormatInt(failedID, 10)}, actions[1])

	// Logging out ends the session, on the server too: a copy of the
	// browser's cookie taken before is refused afterwards.
	cookies, err := chromedp.Call(e.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/admin/"}})
	require.NoError(t, err)
	require.Len(t, cookies.Cookies, 1)
	copied := &http.Cookie{Name: cookies.Cookies[0].Name, Value: cookies.Cookies[0].Value}
	require.True(t, cookies.Cookies[0].Secure, "Chromium keeps the Secure cookie of http://127.0.0.1")
	resp, _ = e.get(t, "/admin/", copied)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the copy works while the session lives")
	e.clickAndWait(t, "form.logout button")
	require.Equal(t, base+"/admin/login?out=1", e.location(t))
	e.run(t, chromedp.Navigate(base+"/admin/audit"))
	require.Contains(t, e.location(t), "/admin/login")
	resp, _ = e.get(t, "/admin/", copied)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the copied cookie is dead after logout")
	require.Equal(t, "/admin/login", resp.Header.Get("Location"))

	// Guessing is slowed down: after ten failures from one address the
	// login (and a guessed cookie) answer 429 with Retry-After.
	var last *http.Response
	for range 12 {
		last, _ = e.post(t, "/admin/login", url.Values{"token": {"guess-token-000000"}}, nil)
		if last.StatusCode == http.StatusTooManyRequests {
			break
		}
		require.Equal(t, http.StatusUnauthorized, last.StatusCode)
	}
	require.Equal(t, http.StatusTooManyRequests, last.StatusCode)
	require.NotEmpty(t, last.Header.Get("Retry-After"))
	resp, body = e.get(t, "/admin/", &http.Cookie{Name: "__Host-callgate_admin", Value: "guess-token-000001"})
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Contains(t, body, "Too many failed attempts")
	// Only failures wait: the valid token still logs in from that address,
	// and a live session still works.
	resp, _ = e.post(t, "/admin/login", url.Values{"token": {browserSecret}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a valid token is never refused because others failed")
	resp, _ = e.get(t, "/admin/", &http.Cookie{Name: sessionCookieOf(t, resp).Name, Value: sessionCookieOf(t, resp).Value})
	require.Equal(t, http.StatusOK, resp.StatusCode)

	t.Logf("browser test took %s", time.Since(start).Round(time.Millisecond))
}

// sessionCookieOf is the session cookie a login answer sets.
func sessionCookieOf(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-callgate_admin" && c.Value != "" {
			return c
		}
	}
	require.FailNow(t, "the login set no session cookie")
	return nil
}

func (e *pageEnv) do(t *testing.T, req *http.Request, ck *http.Cookie, hdr ...string) (*http.Response, string) {
	t.Helper()
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if ck != nil {
		req.AddCookie(ck)
	}
	resp, err := testenv.NoFollow.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func (e *pageEnv) get(t *testing.T, path string, ck *http.Cookie) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.gw.URL+path, nil)
	require.NoError(t, err)
	return e.do(t, req, ck)
}

// post sends a form as a browser would (hdr: extra header name, value...).
func (e *pageEnv) post(t *testing.T, path string, form url.Values, ck *http.Cookie, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.gw.URL+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.do(t, req, ck, hdr...)
}

// checkHTTP checks with a plain client what a browser does not show:
// status codes, headers, the cookie's attributes and the CSRF check. It
// returns a session cookie and its CSRF value for later checks.
func (e *pageEnv) checkHTTP(t *testing.T, xssID int64) (*http.Cookie, string) {
	get := func(path string, ck *http.Cookie) (*http.Response, string) { t.Helper(); return e.get(t, path, ck) }
	post := func(path string, form url.Values, ck *http.Cookie, hdr ...string) (*http.Response, string) {
		t.Helper()
		return e.post(t, path, form, ck, hdr...)
	}
	securityHeaders := func(resp *http.Response) {
		t.Helper()
		csp := resp.Header.Get("Content-Security-Policy")
		require.Equal(t, wantCSP, csp)
		require.NotContains(t, csp, "unsafe-inline")
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
		require.Equal(t, "no-referrer", resp.Header.Get("Referrer-Policy"))
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
		require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	}

	resp, _ := get("/admin/", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/login", resp.Header.Get("Location"))
	resp, _ = get("/admin/callbacks?status=FAILED", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/login?next="+url.QueryEscape("/admin/callbacks?status=FAILED"), resp.Header.Get("Location"))

	resp, body := get("/admin/login", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	securityHeaders(resp)
	require.Contains(t, body, `name="token"`)

	// A cookie that does not authenticate: to the login page, cleared.
	resp, _ = get("/admin/", &http.Cookie{Name: "__Host-callgate_admin", Value: "stale-token-000000"})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	require.Equal(t, "__Host-callgate_admin", resp.Cookies()[0].Name)
	require.Negative(t, resp.Cookies()[0].MaxAge, "the stale cookie is deleted")

	resp, body = post("/admin/login", url.Values{"token": {"wrong-token-000000"}}, nil)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, `name="token"`, "the form again")
	require.Empty(t, resp.Cookies())

	resp, _ = post("/admin/login", url.Values{"token": {browserSecret}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/", resp.Header.Get("Location"))
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-callgate_admin" {
			session = c
		}
	}
	require.NotNil(t, session)
	require.NotContains(t, session.Value, browserSecret, "the cookie is a session id, not the token")
	require.Equal(t, "/", session.Path, "a __Host- cookie has Path=/")
	require.True(t, session.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, session.SameSite)
	require.True(t, session.Secure, "admin.secure_cookie defaults to true, also over plain HTTP")

	// After login the page asked for comes back, but never another host.
	resp, _ = post("/admin/login", url.Values{"token": {browserSecret}, "next": {"/admin/audit"}}, nil)
	require.Equal(t, "/admin/audit", resp.Header.Get("Location"))
	resp, _ = post("/admin/login", url.Values{"token": {browserSecret}, "next": {"//evil.example/admin/"}}, nil)
	require.Equal(t, "/admin/", resp.Header.Get("Location"))

	resp, body = get("/admin/", session)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	securityHeaders(resp)
	require.Contains(t, body, "<svg")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(body)
	require.NotNil(t, m, "the logout form carries the CSRF field")
	csrf := m[1]

	resp, body = get("/admin/static/app.js", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "javascript")
	require.Contains(t, body, "data-confirm")

	// Keyset pages: the "Older" link carries the filter and the cursor.
	resp, body = get("/admin/callbacks?source=paydemo&limit=1", session)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Regexp(t, `id="older" href="/admin/callbacks\?cursor=\d+&amp;limit=1&amp;source=paydemo"`, body)

	resp, _ = get("/admin/callbacks/999999999", session)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, body = get("/admin/callbacks?since=yesterday", session)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "since: want RFC 3339")

	// POSTs without (or with a wrong, or cross-site) CSRF token: 403, and
	// nothing replayed.
	replay := fmt.Sprintf("/admin/callbacks/%d/replay", xssID)
	resp, _ = post(replay, url.Values{"reason": {"csrf test"}}, session)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = post(replay, url.Values{"reason": {"csrf test"}, "csrf": {strings.Repeat("0", 64)}}, session)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = post(replay, url.Values{"reason": {"csrf test"}, "csrf": {csrf}}, session, "Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = post("/admin/replays", url.Values{"source": {"paydemo"}, "reason": {"csrf test"}}, session)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	l, err := e.st.GetCallback(t.Context(), xssID)
	require.NoError(t, err)
	require.Equal(t, callback.StatusFailed, l.Status)
	var audits int
	require.NoError(t, e.st.SQL.QueryRow("SELECT COUNT(*) FROM admin_audit WHERE action <> 'login'").Scan(&audits))
	require.Zero(t, audits, "refused posts leave no action in the audit trail")

	// The reason is required (the form says so; the server too).
	resp, body = post(replay, url.Values{"reason": {"  "}, "csrf": {csrf}}, session)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "a reason is required")
	return session, csrf
}

func (e *pageEnv) pay(t *testing.T, order, paymentNo string, amount int64) int64 {
	t.Helper()
	body := testenv.PaymentBody(order, paymentNo, amount)
	a := testenv.Post(t, e.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, e.cfg, "msg_"+testenv.Suffix(), time.Now(), body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	return a.LogID
}

// stripe sends a Stripe event signed with stripe-go's test helper and
// returns its log id.
func (e *pageEnv) stripe(t *testing.T, body string) int64 {
	t.Helper()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: browserStripeSecret})
	h := http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {signed.Header}}
	a := testenv.PostRaw(t, e.gw.URL, "stripe", []byte(body), h)
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	var ans struct {
		Callbacks []platform.Stored `json:"callbacks"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &ans))
	require.Len(t, ans.Callbacks, 1)
	return ans.Callbacks[0].LogID
}

func (e *pageEnv) waitStatus(t *testing.T, id int64, want callback.Status) {
	t.Helper()
	e.st.WaitStatus(t, id, want)
}

// startBrowser launches a headless Chromium with a fresh profile; it is
// closed (before the profile is removed) when the test ends.
func (e *pageEnv) startBrowser(t *testing.T) {
	t.Helper()
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		cancelTab()
		cancelAlloc()
	})
	// The first run starts the browser; it must not carry a timeout (that
	// would stop the browser with it), so a watchdog bounds it instead.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		require.NoError(t, err, "starting %s", chromiumPath)
	case <-time.After(30 * time.Second):
		cancelTab()
		require.FailNow(t, "chromium did not start within 30 s", chromiumPath)
	}
	// Record every Content-Security-Policy violation of every page (a
	// DevTools script is not subject to the policy).
	_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener("securitypolicyviolation", e => window.__csp.push(e.violatedDirective + " " + e.blockedURI))`,
	})
	require.NoError(t, err)
	// app.js asks before a bulk replay: accept, as an operator would.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			e.dialogs.Add(1)
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	e.ctx = ctx
}

// run runs browser actions with a timeout.
func (e *pageEnv) run(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 15*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, actions...))
}

// get runs one browser action that returns a value, with a timeout.
func pgValue[T any](t *testing.T, e *pageEnv, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

func pgEval[T any](t *testing.T, e *pageEnv, js string) T {
	t.Helper()
	return pgValue(t, e, chromedp.Evaluate[T](js))
}

func (e *pageEnv) location(t *testing.T) string {
	t.Helper()
	return pgValue(t, e, chromedp.Location())
}

func (e *pageEnv) text(t *testing.T, sel string) string {
	t.Helper()
	return strings.TrimSpace(pgValue(t, e, chromedp.Text(chromedp.CSS(sel))))
}

// count is the number of elements matching sel (0 without waiting).
func (e *pageEnv) count(t *testing.T, sel string) int {
	t.Helper()
	return pgEval[int](t, e, fmt.Sprintf("document.querySelectorAll(%q).length", sel))
}

// clickAndWait clicks sel and waits until the page it leads to has loaded
// (a marker set on the current page is gone).
func (e *pageEnv) clickAndWait(t *testing.T, sel string) {
	t.Helper()
	e.run(t, chromedp.Evaluate[chromedp.Void](`window.__cgOld = true`))
	e.run(t, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
		defer cancel()
		loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__cgOld !== true && document.readyState === "complete"`))
		return err == nil && loaded
	}, 15*time.Second, 50*time.Millisecond, "clicking %s did not lead to a new page", sel)
}

// pollText reloads url until sel's text is want.
func (e *pageEnv) pollText(t *testing.T, url, sel, want string, timeout time.Duration) {
	t.Helper()
	var got string
	ok := assert.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		defer cancel()
		err := chromedp.Do(ctx, chromedp.Navigate(url))
		if err == nil {
			got, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		}
		return err == nil && strings.TrimSpace(got) == want
	}, timeout, 200*time.Millisecond)
	require.True(t, ok, "page never showed the expected text: %s %s: want %q, last %q", url, sel, want, got)
}

// noCSPViolations checks the page broke none of its own policy (no inline
// style or script slipped in).
func (e *pageEnv) noCSPViolations(t *testing.T) {
	t.Helper()
	time.Sleep(50 * time.Millisecond) // the events are dispatched asynchronously
	require.Empty(t, pgEval[[]string](t, e, `window.__csp || ["recorder missing"]`), "CSP violations on %s", e.location(t))
}

// screenshot writes the page to name in the test's artifact directory
// (kept under -outputdir with go test -artifacts; never a shared path
// another run's test would write too).
func (e *pageEnv) screenshot(t *testing.T, name string) {
	t.Helper()
	png := pgValue(t, e, chromedp.FullScreenshot(100))
	require.NoError(t, os.WriteFile(filepath.Join(t.ArtifactDir(), name), png, 0o644))
}
