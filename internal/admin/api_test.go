package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

const opsToken = "ops-token-0123456789"

type apiEnv struct {
	cfg *config.Config
	gw  *testenv.Gateway
	st  *testenv.TestStore
}

func setupAPI(t *testing.T, mutate ...func(*config.Config)) *apiEnv {
	t.Helper()
	base := func(c *config.Config) {
		c.Admin.Token = "ops:" + opsToken + ",oncall:oncall-token-98765"
		c.Scheduler.Compensation.Interval = 100 * time.Millisecond
		c.Worker.ShutdownTimeout = 5 * time.Second
	}
	cfg := testenv.Config(t, append([]func(*config.Config){base}, mutate...)...)
	e := &apiEnv{cfg: cfg, st: testenv.Store(t, cfg)}
	e.gw = testenv.StartGateway(t, cfg)
	e.gw.WaitReady(t)
	testenv.StartWorker(t, cfg, worker.Options{})
	return e
}

// call does an admin API request with the token and decodes the answer.
func (e *apiEnv) call(t *testing.T, method, path, token string, body any, out any) int {
	t.Helper()
	return testenv.AdminCall(t, e.gw.URL, method, path, token, body, out)
}

// failedPayment sends a payment for an order that does not exist and
// waits until it is FAILED ("order not found").
func (e *apiEnv) failedPayment(t *testing.T, order string, amount int64) int64 {
	t.Helper()
	body := testenv.PaymentBody(order, "PAY-"+order, amount)
	a := testenv.Post(t, e.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, e.cfg, "msg_"+order, time.Now(), body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	e.waitStatus(t, a.LogID, callback.StatusFailed)
	return a.LogID
}

func (e *apiEnv) waitStatus(t *testing.T, id int64, want callback.Status) {
	t.Helper()
	e.st.WaitStatus(t, id, want)
}

func (e *apiEnv) createOrder(t *testing.T, code string, amount int64, currency string) {
	t.Helper()
	require.NoError(t, e.st.DB.Exec("INSERT INTO orders (order_code, user_id, amount, currency) VALUES (?, 7, ?, ?)", code, amount, currency).Error)
}

func TestAdminOffWithoutToken(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t) // no admin token
	gw := testenv.StartGateway(t, cfg)
	for _, path := range []string{"/admin/api/callbacks", "/admin/", "/admin/login"} {
		resp, err := http.Get(gw.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
}

func TestAdminAuth(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	var errBody map[string]string
	require.Equal(t, http.StatusUnauthorized, e.call(t, "GET", "/admin/api/callbacks", "", nil, &errBody))
	require.Contains(t, errBody["error"], "admin token")
	require.Equal(t, http.StatusUnauthorized, e.call(t, "GET", "/admin/api/callbacks", "wrong-token-123456", nil, nil))
	require.Equal(t, http.StatusUnauthorized, e.call(t, "GET", "/admin/api/callbacks", opsToken+"x", nil, nil))
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks", opsToken, nil, nil))
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks", "oncall-token-98765", nil, nil))
	// The name:token form of CALLGATE_ADMIN_TOKEN works too, under the
	// token's own name only.
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks", "ops:"+opsToken, nil, nil))
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks", "oncall:oncall-token-98765", nil, nil))
	require.Equal(t, http.StatusUnauthorized, e.call(t, "GET", "/admin/api/callbacks", "oncall:"+opsToken, nil, &errBody))
	require.Contains(t, errBody["error"], "admin token")
	require.Equal(t, http.StatusUnauthorized, e.call(t, "GET", "/admin/api/callbacks", "ops:wrong-token-123456", nil, nil))
}

func TestAdminListDetailAndKeysetPages(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	failed := e.failedPayment(t, "ORD-LIST-X", 1500)
	orders := testenv.CreateOrders(t, e.cfg, "list", 5)
	var ok []int64
	for i, o := range orders {
		body := testenv.PaymentBody(o, fmt.Sprintf("PAY-L%d", i), int64(1000+i))
		a := testenv.Post(t, e.gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, e.cfg, fmt.Sprintf("msg_l%d", i), time.Now(), body))
		require.Equal(t, http.StatusOK, a.Status)
		ok = append(ok, a.LogID)
	}
	for _, id := range ok {
		e.waitStatus(t, id, callback.StatusSuccess)
	}

	type page struct {
		Items []struct {
			ID          int64   `json:"id"`
			Status      string  `json:"status"`
			BusinessKey string  `json:"business_key"`
			LastError   *string `json:"last_error"`
		} `json:"items"`
		NextCursor *int64 `json:"next_cursor"`
	}
	// Newest first, two per page, keyset cursor.
	var seen []int64
	cursor := ""
	for range 10 {
		var p page
		require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks?source=paydemo&limit=2"+cursor, opsToken, nil, &p))
		for _, it := range p.Items {
			seen = append(seen, it.ID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = fmt.Sprintf("&cursor=%d", *p.NextCursor)
	}
	want := append([]int64{}, ok...)
	want = append(want, failed)
	require.ElementsMatch(t, want, seen)
	for i := 1; i < len(seen); i++ {
		require.Greater(t, seen[i-1], seen[i], "newest first")
	}

	var byKey page
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks?status=FAILED&key=ORD-LIST-X", opsToken, nil, &byKey))
	require.Len(t, byKey.Items, 1)
	require.Equal(t, failed, byKey.Items[0].ID)
	require.Equal(t, "order not found", *byKey.Items[0].LastError)
	var bad map[string]string
	require.Equal(t, http.StatusBadRequest, e.call(t, "GET", "/admin/api/callbacks?since=yesterday", opsToken, nil, &bad))
	require.Contains(t, bad["error"], "since")

	var d struct {
		ID          int64             `json:"id"`
		Status      string            `json:"status"`
		Payload     string            `json:"payload"`
		PayloadJSON map[string]any    `json:"payload_json"`
		Headers     map[string]string `json:"headers"`
		Attempts    []struct {
			Attempt int     `json:"attempt"`
			Outcome string  `json:"outcome"`
			Error   *string `json:"error"`
		} `json:"attempt_history"`
		Lineage []struct {
			MessageID  string     `json:"message_id"`
			RoutingKey string     `json:"routing_key"`
			Status     string     `json:"status"`
			SentAt     *time.Time `json:"sent_at"`
		} `json:"lineage"`
	}
	require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/callbacks/%d", ok[0]), opsToken, nil, &d))
	require.Equal(t, "SUCCESS", d.Status)
	require.Equal(t, orders[0], d.PayloadJSON["orderCode"])
	require.Contains(t, d.Payload, `"paymentNo":"PAY-L0"`)
	require.Equal(t, "msg_l0", d.Headers["Webhook-Id"])
	require.Len(t, d.Attempts, 1)
	require.Equal(t, "SUCCESS", d.Attempts[0].Outcome)
	require.Len(t, d.Lineage, 2)
	for _, l := range d.Lineage {
		require.Equal(t, "SENT", l.Status)
		require.NotNil(t, l.SentAt)
		require.Equal(t, fmt.Sprintf("cb%d.%s", ok[0], l.RoutingKey), l.MessageID)
	}
	require.Equal(t, http.StatusNotFound, e.call(t, "GET", "/admin/api/callbacks/99999999", opsToken, nil, nil))
}

func TestAdminSingleReplay(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	id := e.failedPayment(t, "ORD-REPLAY-1", 1500)
	path := fmt.Sprintf("/admin/api/callbacks/%d/replay", id)

	var errBody map[string]string
	require.Equal(t, http.StatusBadRequest, e.call(t, "POST", path, opsToken, map[string]any{}, &errBody))
	require.Equal(t, "a reason is required", errBody["error"])

	// Fix the cause, then replay.
	e.createOrder(t, "ORD-REPLAY-1", 1500, "CNY")
	var res struct {
		Replayed bool `json:"replayed"`
		Callback struct {
			Status string `json:"status"`
		} `json:"callback"`
	}
	require.Equal(t, http.StatusOK, e.call(t, "POST", path, opsToken, map[string]any{"reason": "order was created late"}, &res))
	require.True(t, res.Replayed)
	require.Equal(t, "PENDING", res.Callback.Status)
	e.waitStatus(t, id, callback.StatusSuccess)
	var paid string
	require.NoError(t, e.st.DB.Raw("SELECT payment_status FROM orders WHERE order_code = 'ORD-REPLAY-1'").Scan(&paid).Error)
	require.Equal(t, "PAID", paid)
	var outboxRows int64
	require.NoError(t, e.st.DB.Table("outbox").Where("callback_log_id = ?", id).Count(&outboxRows).Error)
	require.EqualValues(t, 2, outboxRows)

	// SUCCESS is replayed only with force, and then redoes nothing.
	require.Equal(t, http.StatusConflict, e.call(t, "POST", path, opsToken, map[string]any{"reason": "again"}, &errBody))
	require.Contains(t, errBody["error"], "FAILED")
	require.Equal(t, http.StatusOK, e.call(t, "POST", path, opsToken, map[string]any{"reason": "double check", "force": true}, &res))
	e.waitStatus(t, id, callback.StatusSuccess)
	require.Eventually(t, func() bool {
		var n int64
		require.NoError(t, e.st.DB.Table("callback_attempt").Where("log_id = ?", id).Count(&n).Error)
		return n == 3 // failed, replay, forced replay
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, e.st.DB.Table("outbox").Where("callback_log_id = ?", id).Count(&outboxRows).Error)
	require.EqualValues(t, 2, outboxRows, "a forced replay of a SUCCESS callback redoes no effect")
	require.Equal(t, http.StatusNotFound, e.call(t, "POST", "/admin/api/callbacks/99999999/replay", opsToken, map[string]any{"reason": "x"}, nil))

	var audit struct {
		Items []struct {
			Actor  string `json:"actor"`
			Action string `json:"action"`
			Target string `json:"target"`
			Reason string `json:"reason"`
			Count  int    `json:"count"`
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/audit", opsToken, nil, &audit))
	require.Len(t, audit.Items, 2)
	require.Equal(t, "ops", audit.Items[1].Actor)
	require.Equal(t, "replay", audit.Items[1].Action)
	require.Equal(t, fmt.Sprint(id), audit.Items[1].Target)
	require.Equal(t, "order was created late", audit.Items[1].Reason)
	require.Equal(t, 1, audit.Items[1].Count)
}

func TestAdminBulkReplay(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, func(c *config.Config) {
		c.Admin.Replay.Cap = 5
		c.Admin.Replay.Rate = 20 // 2 per 100 ms tick
	})
	var ids []int64
	for i := range 8 {
		ids = append(ids, e.failedPayment(t, fmt.Sprintf("ORD-BULK-%d", i), 1500))
	}
	other := e.failedPayment(t, "ORD-OTHER", 1500) // also FAILED, excluded by the ids filter below

	var dry struct {
		DryRun  bool `json:"dry_run"`
		Matched int  `json:"matched"`
		OverCap bool `json:"over_cap"`
		Sample  []struct {
			ID int64 `json:"id"`
		} `json:"sample"`
	}
	filter := map[string]any{"status": "FAILED", "source": "paydemo", "error_contains": "not found", "ids": ids}
	require.Equal(t, http.StatusOK, e.call(t, "POST", "/admin/api/replays", opsToken, map[string]any{"filter": filter, "dry_run": true}, &dry))
	require.True(t, dry.DryRun)
	require.Equal(t, 8, dry.Matched)
	require.True(t, dry.OverCap)
	require.Len(t, dry.Sample, 8)

	var errBody map[string]string
	require.Equal(t, http.StatusConflict, e.call(t, "POST", "/admin/api/replays", opsToken, map[string]any{"filter": filter, "reason": "orders arrived"}, &errBody))
	require.Contains(t, errBody["error"], "confirm_large")
	require.Equal(t, http.StatusBadRequest, e.call(t, "POST", "/admin/api/replays", opsToken, map[string]any{"filter": filter, "confirm_large": true}, &errBody))
	require.Equal(t, http.StatusBadRequest, e.call(t, "POST", "/admin/api/replays", opsToken, map[string]any{"reason": "x"}, &errBody), "an empty filter is refused")

	for i := range 8 {
		e.createOrder(t, fmt.Sprintf("ORD-BULK-%d", i), 1500, "CNY")
	}
	type job struct {
		ID         int64      `json:"id"`
		Status     string     `json:"status"`
		Matched    int        `json:"matched"`
		Replayed   int        `json:"replayed"`
		Progress   float64    `json:"progress"`
		CreatedAt  time.Time  `json:"created_at"`
		FinishedAt *time.Time `json:"finished_at"`
	}
	var j job
	require.Equal(t, http.StatusAccepted, e.call(t, "POST", "/admin/api/replays", "oncall-token-98765",
		map[string]any{"filter": filter, "reason": "orders arrived", "confirm_large": true}, &j))
	require.Equal(t, 8, j.Matched)
	require.Equal(t, "RUNNING", j.Status)

	require.Eventually(t, func() bool {
		require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/replays/%d", j.ID), opsToken, nil, &j))
		return j.Status == "DONE"
	}, 20*time.Second, 20*time.Millisecond, "job done")
	require.Equal(t, 8, j.Replayed)
	require.EqualValues(t, 100, j.Progress)
	// Rate limited: 2 callbacks per 100 ms tick, so 8 take at least three
	// more ticks after the first, never all at once.
	require.NotNil(t, j.FinishedAt)
	require.GreaterOrEqual(t, j.FinishedAt.Sub(j.CreatedAt), 250*time.Millisecond, "the job advanced at the configured rate")
	for _, id := range ids {
		e.waitStatus(t, id, callback.StatusSuccess)
	}
	l, err := e.st.GetCallback(t.Context(), other)
	require.NoError(t, err)
	require.Equal(t, callback.StatusFailed, l.Status, "not in the filter, not replayed")

	// Cancel: a second job over the one remaining FAILED callback and more.
	var j2 job
	require.Equal(t, http.StatusAccepted, e.call(t, "POST", "/admin/api/replays", opsToken,
		map[string]any{"filter": map[string]any{"source": "paydemo"}, "reason": "retry the rest"}, &j2))
	code := e.call(t, "DELETE", fmt.Sprintf("/admin/api/replays/%d", j2.ID), opsToken, nil, &j2)
	require.Contains(t, []int{http.StatusOK, http.StatusConflict}, code, "cancelled, or already done")
	if code == http.StatusOK {
		require.Equal(t, "CANCELLED", j2.Status)
	}

	var audit struct {
		Items []struct {
			Actor  string          `json:"actor"`
			Action string          `json:"action"`
			Count  int             `json:"count"`
			Filter json.RawMessage `json:"filter"`
		} `json:"items"`
	}
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/audit", opsToken, nil, &audit))
	var bulk []string
	for _, a := range audit.Items {
		if a.Action == "bulk_replay" {
			bulk = append(bulk, fmt.Sprintf("%s:%d", a.Actor, a.Count))
			require.True(t, strings.Contains(string(a.Filter), "paydemo"))
		}
	}
	require.Contains(t, bulk, "oncall:8")
}

func TestAdminFailedAuthenticationsAreRateLimited(t *testing.T) {
	t.Parallel()
	e := setupAPI(t)
	for i := range 10 {
		require.Equal(t, http.StatusUnauthorized, e.call(t, "GET", "/admin/api/callbacks", fmt.Sprintf("guess-%d-aaaaaaaa", i), nil, nil))
	}
	var errBody map[string]string
	require.Equal(t, http.StatusTooManyRequests, e.call(t, "GET", "/admin/api/callbacks", "guess-11-aaaaaaaa", nil, &errBody))
	require.Contains(t, errBody["error"], "too many failed")
	require.Equal(t, http.StatusOK, e.call(t, "GET", "/admin/api/callbacks", opsToken, nil, nil),
		"the right token is never refused because others failed from the same address")
	require.Equal(t, http.StatusTooManyRequests, e.call(t, "GET", "/admin/api/callbacks", "guess-12-aaaaaaaa", nil, nil),
		"failures still wait")
}
