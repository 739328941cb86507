package admin_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/testenv"
)

// The console counts the notifications parked in the unrouted queue, and
// shows them as unknown, without failing, while the broker is away.
func TestDashboardShowsUnroutedNotifications(t *testing.T) {
	t.Parallel()
	proxy := testenv.NewProxy(t, "127.0.0.1:5672")
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = "ops:" + opsToken
		c.AMQP.URL = "amqp://guest:guest@" + proxy.Addr() + "/"
	})
	e := &apiEnv{cfg: cfg, st: testenv.Store(t, cfg)}
	e.gw = testenv.StartGateway(t, cfg)
	e.gw.WaitReady(t)

	// Two notifications no queue is bound for, published as the worker
	// would.
	q := testenv.OpenQueue(t, cfg.AMQP.Prefix+".downstream.unrouted")
	for _, id := range []string{"cb1.nobody.listens", "cb2.nobody.listens"} {
		require.NoError(t, q.Channel().PublishWithContext(t.Context(), cfg.AMQP.Prefix+".downstream", "nobody.listens", false, false,
			amqp.Publishing{DeliveryMode: amqp.Persistent, MessageId: id, Body: []byte(`{}`)}))
	}
	require.Eventually(t, func() bool { return q.Depth() == 2 }, 5*time.Second, 20*time.Millisecond, "parked")

	var stats map[string]any
	require.Equal(t, http.StatusOK, e.call(t, http.MethodGet, "/admin/api/stats", opsToken, nil, &stats))
	require.EqualValues(t, 2, stats["downstream_unrouted"])
	cookie := e.login(t)
	require.Contains(t, e.dashboard(t, cookie), `id="downstream-unrouted">2</span>`)

	proxy.Down() // the gateway loses the broker; MySQL is still there
	require.Eventually(t, func() bool {
		stats = nil
		require.Equal(t, http.StatusOK, e.call(t, http.MethodGet, "/admin/api/stats", opsToken, nil, &stats))
		return stats["downstream_unrouted"] == nil
	}, 10*time.Second, 20*time.Millisecond, "unknown while the broker is away")
	require.Contains(t, stats, "downstream_unrouted", "present, as null")
	require.Contains(t, e.dashboard(t, cookie), `id="downstream-unrouted">unknown</span>`)
}

// login logs in on the page with the token and returns the session cookie.
func (e *apiEnv) login(t *testing.T) *http.Cookie {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(e.gw.URL+"/admin/login", url.Values{"token": {opsToken}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-callgate_admin" {
			return c
		}
	}
	require.FailNow(t, "login set no session cookie")
	return nil
}

// dashboard returns the dashboard page's HTML.
func (e *apiEnv) dashboard(t *testing.T, ck *http.Cookie) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.gw.URL+"/admin/", nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return strings.Join(strings.Fields(string(body)), " ")
}
