package admin_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/testenv"
)

const (
	sessionActor  = "carol"
	sessionSecret = "carol-secret-0123456789"
)

// sessionEnv is a gateway with an admin token, for the page's sessions
// (no worker: nothing here processes callbacks).
type sessionEnv struct {
	cfg *config.Config
	gw  *testenv.Gateway
	st  *testenv.TestStore
}

func setupSessions(t *testing.T, mutate ...func(*config.Config)) *sessionEnv {
	t.Helper()
	base := func(c *config.Config) { c.Admin.Token = sessionActor + ":" + sessionSecret }
	cfg := testenv.Config(t, append([]func(*config.Config){base}, mutate...)...)
	e := &sessionEnv{cfg: cfg, st: testenv.Store(t, cfg)}
	e.gw = testenv.StartGateway(t, cfg)
	return e
}

// request sends a request as the browser would, without following
// redirects, with ck (if any) as the session cookie.
func (e *sessionEnv) request(t *testing.T, method, path string, form url.Values, ck *http.Cookie) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.gw.URL+path, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if ck != nil {
		req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	}
	resp, err := testenv.NoFollow.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// login logs in with the token and returns the session cookie it set.
func (e *sessionEnv) login(t *testing.T) *http.Cookie {
	t.Helper()
	resp, _ := e.request(t, http.MethodPost, "/admin/login", url.Values{"token": {sessionSecret}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/", resp.Header.Get("Location"))
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-callgate_admin" || c.Name == "callgate_admin" {
			return c
		}
	}
	require.FailNow(t, "login set no session cookie")
	return nil
}

// dashboard fetches /admin/ with ck and returns the CSRF value of the
// page; it fails the test unless the session is admitted.
func (e *sessionEnv) dashboard(t *testing.T, ck *http.Cookie) string {
	t.Helper()
	resp, body := e.request(t, http.MethodGet, "/admin/", nil, ck)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the session is admitted")
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(body)
	require.NotNil(t, m, "the page carries the CSRF field")
	return m[1]
}

// requireLoggedOut checks that ck is sent to the login page and cleared.
func (e *sessionEnv) requireLoggedOut(t *testing.T, ck *http.Cookie) {
	t.Helper()
	resp, _ := e.request(t, http.MethodGet, "/admin/audit", nil, ck)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/login?next="+url.QueryEscape("/admin/audit"), resp.Header.Get("Location"))
	require.Len(t, resp.Cookies(), 1)
	require.Negative(t, resp.Cookies()[0].MaxAge, "the dead cookie is deleted")
}

func (e *sessionEnv) sessionCount(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, e.st.SQL.QueryRow("SELECT COUNT(*) FROM admin_session").Scan(&n))
	return n
}

// TestSessionCookieIsOpaqueAndStoredHashed: the cookie is a random id,
// not the admin token in any encoding; the table holds only its SHA-256;
// the cookie is Secure by default (admin.secure_cookie) even over plain
// HTTP, and without Secure when secure_cookie is false.
func TestSessionCookieIsOpaqueAndStoredHashed(t *testing.T) {
	t.Parallel()
	e := setupSessions(t)
	require.True(t, e.cfg.Admin.SecureCookie, "the shipped config keeps the default")
	ck := e.login(t)
	require.NotEqual(t, sessionSecret, ck.Value)
	require.NotContains(t, ck.Value, sessionSecret)
	require.NotContains(t, ck.Value, base64.RawURLEncoding.EncodeToString([]byte(sessionSecret)))
	raw, err := base64.RawURLEncoding.DecodeString(ck.Value)
	require.NoError(t, err, "base64url")
	require.Len(t, raw, 32, "32 random bytes")
	require.True(t, ck.Secure, "Secure by default, also over plain HTTP")
	require.True(t, ck.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, ck.SameSite)
	require.Equal(t, "/", ck.Path, "a __Host- cookie has Path=/")
	require.Equal(t, int((8 * time.Hour).Seconds()), ck.MaxAge)

	var idHash, tokenMAC []byte
	var actor string
	var created, expires time.Time
	require.NoError(t, e.st.SQL.QueryRow("SELECT id_hash, actor, token_mac, created_at, expires_at FROM admin_session").
		Scan(&idHash, &actor, &tokenMAC, &created, &expires))
	want := sha256.Sum256(raw)
	require.Equal(t, want[:], idHash, "the row is keyed by the id's SHA-256")
	require.Equal(t, sessionActor, actor)
	require.InDelta(t, (8 * time.Hour).Seconds(), expires.Sub(created).Seconds(), 1)
	var rawInTable int
	require.NoError(t, e.st.SQL.QueryRow(`SELECT COUNT(*) FROM admin_session
		WHERE id_hash IN (?, ?) OR token_mac IN (?, ?) OR actor IN (?, ?)`,
		raw, ck.Value, raw, ck.Value, ck.Value, sessionSecret).Scan(&rawInTable))
	require.Zero(t, rawInTable, "neither the cookie value nor the token is stored")

	e.dashboard(t, ck) // and the cookie works
	// The same session id under the name it had before the prefix (a
	// cookie anyone on a sibling host could have set) opens nothing:
	// the upgrade ends the sessions opened under the old name.
	resp, _ := e.request(t, http.MethodGet, "/admin/audit", nil, &http.Cookie{Name: "callgate_admin", Value: ck.Value})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the unprefixed name is not read")

	require.Equal(t, "__Host-callgate_admin", ck.Name, "Secure: the __Host- prefix, so no sibling host can plant it")

	plain := setupSessions(t, func(c *config.Config) { c.Admin.SecureCookie = false })
	pc := plain.login(t)
	require.False(t, pc.Secure, "admin.secure_cookie: false still works")
	require.Equal(t, "callgate_admin", pc.Name, "plain HTTP cannot use the prefix")
	require.Equal(t, "/admin", pc.Path)
	plain.dashboard(t, pc)
}

// TestLogoutEndsCopiedSession: logging out deletes the session on the
// server, so a copy of the cookie taken before is refused afterwards.
func TestLogoutEndsCopiedSession(t *testing.T) {
	t.Parallel()
	e := setupSessions(t)
	ck := e.login(t)
	copied := &http.Cookie{Name: ck.Name, Value: ck.Value}
	csrf := e.dashboard(t, copied)

	resp, _ := e.request(t, http.MethodPost, "/admin/logout", url.Values{"csrf": {csrf}}, ck)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/login?out=1", resp.Header.Get("Location"))

	e.requireLoggedOut(t, copied)
	resp, _ = e.request(t, http.MethodPost, "/admin/logout", url.Values{"csrf": {csrf}}, copied)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/admin/login", resp.Header.Get("Location"), "a POST with the copy is not admitted either")
	require.Zero(t, e.sessionCount(t), "the row is gone")
}

// TestExpiredSessionRefused: the server enforces the 8 h expiry; a
// session past expires_at is logged out whatever the browser keeps, and
// its row is deleted.
func TestExpiredSessionRefused(t *testing.T) {
	t.Parallel()
	e := setupSessions(t)
	ck := e.login(t)
	e.dashboard(t, ck)
	_, err := e.st.SQL.Exec("UPDATE admin_session SET expires_at = ?", time.Now().UTC().Add(-time.Second))
	require.NoError(t, err)
	e.requireLoggedOut(t, ck)
	require.Zero(t, e.sessionCount(t), "the expired row is deleted when presented")
}

// TestExpiredSessionsPurged: expired sessions nobody presents again are
// deleted (a bounded batch at each login); live ones stay.
func TestExpiredSessionsPurged(t *testing.T) {
	t.Parallel()
	e := setupSessions(t)
	live := e.login(t)
	past := time.Now().UTC().Add(-time.Minute)
	for range 5 {
		h := make([]byte, 32)
		_, _ = rand.Read(h)
		_, err := e.st.SQL.Exec(`INSERT INTO admin_session (id_hash, actor, token_mac, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
			h, sessionActor, make([]byte, 32), past.Add(-8*time.Hour), past)
		require.NoError(t, err)
	}
	require.Equal(t, 6, e.sessionCount(t))

	second := e.login(t)
	require.Equal(t, 2, e.sessionCount(t), "the 5 expired rows are purged, the 2 live ones stay")
	var expired int
	require.NoError(t, e.st.SQL.QueryRow("SELECT COUNT(*) FROM admin_session WHERE expires_at <= UTC_TIMESTAMP(6)").Scan(&expired))
	require.Zero(t, expired)
	e.dashboard(t, live)
	e.dashboard(t, second)
}

// TestSessionEndsWhenTokenRotated: a session belongs to the token that
// opened it; rotating that token's secret (same name) ends the session,
// as rotating used to end the old token cookie.
func TestSessionEndsWhenTokenRotated(t *testing.T) {
	t.Parallel()
	e := setupSessions(t)
	ck := e.login(t)
	e.dashboard(t, ck)

	rotated := *e.cfg
	rotated.Admin.Token = sessionActor + ":rotated-secret-0123456789"
	other := &sessionEnv{cfg: &rotated, st: e.st, gw: testenv.StartGateway(t, &rotated)}
	other.requireLoggedOut(t, ck)
	e.dashboard(t, ck) // the gateway still holding the old token admits it
}
