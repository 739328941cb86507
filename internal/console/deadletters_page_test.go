package console_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/scheduler"
	"callgate/internal/testenv"
)

// TestDeadLettersDroppedOnTheConsole: what retention drops of the dead
// letters is on the dashboard and in GET /admin/api/stats, per source,
// after the rows are gone.
func TestDeadLettersDroppedOnTheConsole(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.Admin.Token = "ops:" + operatorToken })
	e := &pageEnv{cfg: cfg, st: testenv.Store(t, cfg)}
	e.gw = testenv.StartGateway(t, cfg)
	e.gw.WaitReady(t)

	unreadable, err := callback.MarshalEvent(callback.Unreadable{Reason: "the notification could not be read: no order code"})
	require.NoError(t, err)
	old := time.Now().UTC().Add(-100 * 24 * time.Hour)
	for _, event := range []string{"evt_a", "evt_b"} {
		res, err := e.st.InsertCallback(t.Context(), &callback.Log{Source: "stripe", Kind: "payment", EventID: event, BusinessKey: event,
			Payload: []byte(`{}`), Normalized: unreadable, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: old})
		require.NoError(t, err)
		require.NoError(t, e.st.DB.Model(&callback.Log{}).Where("id = ?", res.ID).
			Updates(map[string]any{"status": callback.StatusFailed, "processed_at": old}).Error)
	}
	r := &scheduler.Retention{Store: e.st.Store, DeadLetterMaxAge: cfg.Scheduler.Retention.DeadLetterMaxAge, BatchSize: 10,
		Log: testenv.Logger(t, cfg)}
	res, err := r.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, res.DeadLetters)

	var stats struct {
		DeadLettersDropped []struct {
			Source        string    `json:"source"`
			Dropped       int64     `json:"dropped"`
			LastDroppedAt time.Time `json:"last_dropped_at"`
		} `json:"dead_letters_dropped"`
	}
	require.Equal(t, http.StatusOK, e.api(t, http.MethodGet, "/admin/api/stats", operatorToken, "", &stats))
	require.Len(t, stats.DeadLettersDropped, 1)
	require.Equal(t, "stripe", stats.DeadLettersDropped[0].Source)
	require.EqualValues(t, 2, stats.DeadLettersDropped[0].Dropped)
	require.WithinDuration(t, time.Now(), stats.DeadLettersDropped[0].LastDroppedAt, time.Minute)

	resp, _ := e.post(t, "/admin/login", url.Values{"token": {operatorToken}, "next": {"/admin/"}}, nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	_, page := e.get(t, "/admin/", sessionCookieOf(t, resp))
	require.Contains(t, page, "Dead letters dropped by retention")
	require.Contains(t, page, `id="dead-letters-dropped">2<`)
	require.Regexp(t, `id="dead-letters-dropped-stripe"[^>]*>stripe: 2<`, page)
}
