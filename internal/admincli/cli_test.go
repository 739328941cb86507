package admincli_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/admincli"
	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

func TestReplayCommand(t *testing.T) {
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = "cli:cli-token-abcdef123,watch:watch-token-abcdef123:viewer,lead:lead-token-abcdef123:operator"
		c.Scheduler.Compensation.Interval = 100 * time.Millisecond
	})
	st := testenv.Store(t, cfg)
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	testenv.StartWorker(t, cfg, worker.Options{})
	t.Setenv(admincli.EnvURL, gw.URL)
	t.Setenv(admincli.EnvToken, "cli:cli-token-abcdef123")

	since := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	var ids []int64
	for i := range 4 {
		order := fmt.Sprintf("ORD-CLI-%d", i)
		body := testenv.PaymentBody(order, "PAY-"+order, 1500)
		a := testenv.Post(t, gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, cfg, "msg_"+order, time.Now(), body))
		require.Equal(t, http.StatusOK, a.Status)
		ids = append(ids, a.LogID)
	}
	status := func(id int64) callback.Status {
		l, err := st.GetCallback(t.Context(), id)
		require.NoError(t, err)
		return l.Status
	}
	for _, id := range ids {
		require.Eventually(t, func() bool { return status(id) == callback.StatusFailed }, 10*time.Second, 20*time.Millisecond)
	}
	for i := range 4 {
		require.NoError(t, st.DB.Exec("INSERT INTO orders (order_code, user_id, amount) VALUES (?, 1, 1500)", fmt.Sprintf("ORD-CLI-%d", i)).Error)
	}
	run := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := admincli.Replay(t.Context(), args, &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, _, stderr := run("--id", fmt.Sprint(ids[0]))
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--reason is required")

	code, out, stderr := run("--id", fmt.Sprint(ids[0]), "--reason", "order created")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, fmt.Sprintf("replayed callback %d (paydemo, key ORD-CLI-0): now PENDING", ids[0]))
	require.Eventually(t, func() bool { return status(ids[0]) == callback.StatusSuccess }, 10*time.Second, 20*time.Millisecond)

	code, out, stderr = run("--status", "FAILED", "--source", "paydemo", "--since", since, "--reason", "orders created", "--dry-run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "dry run: 3 callbacks match")

	code, out, stderr = run("--status", "FAILED", "--source", "paydemo", "--since", since, "--reason", "orders created")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "3 callbacks to replay")
	require.Contains(t, out, "DONE: 3 of 3 replayed")
	require.Contains(t, stderr, "3/3", "a progress bar")
	for _, id := range ids {
		require.Eventually(t, func() bool { return status(id) == callback.StatusSuccess }, 10*time.Second, 20*time.Millisecond)
	}

	// Tokens with roles, written as in CALLGATE_ADMIN_TOKEN: a viewer is
	// refused with the reason, an explicit operator replays.
	t.Setenv(admincli.EnvToken, "watch:watch-token-abcdef123:viewer")
	code, _, stderr = run("--id", fmt.Sprint(ids[1]), "--reason", "a viewer tries")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "this needs the operator role; watch is a viewer (HTTP 403)")
	t.Setenv(admincli.EnvToken, "lead:lead-token-abcdef123:operator")
	code, out, stderr = run("--id", fmt.Sprint(ids[1]), "--reason", "again, by the lead", "--force")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, fmt.Sprintf("replayed callback %d", ids[1]))

	t.Setenv(admincli.EnvToken, "cli:wrong-token-000000")
	code, _, stderr = run("--id", fmt.Sprint(ids[1]), "--reason", "x")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "HTTP 401")
}
