package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/logistics"
	"callgate/internal/metrics"
	"callgate/internal/source"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// registry serves payments with h and logistics with the demo handler.
func registry(h callback.HandlerFunc) *callback.Registry {
	reg := callback.NewRegistry()
	reg.Register(callback.KindPayment, h)
	reg.Register(callback.KindLogistics, logistics.Handler{})
	return reg
}

// announceDirect stores a payment callback directly and announces it, as the
// gateway would, and returns its id.
func announceDirect(t *testing.T, cfg *config.Config, st *testenv.TestStore, event, key string) int64 {
	t.Helper()
	res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: key,
		Payload: testenv.PaymentBody(key, event, 1000), TraceID: "0af7651916cd43dd8448eb211c80319c", ReceivedAt: time.Now()})
	require.NoError(t, err)
	testenv.Publish(t, cfg, "payment", fmt.Sprintf(`{"log_id":%d}`, res.ID))
	return res.ID
}

func waitRow(t *testing.T, st *testenv.TestStore, id int64, what string, cond func(*callback.Log) bool) *callback.Log {
	t.Helper()
	var l *callback.Log
	require.Eventually(t, func() bool {
		var err error
		l, err = st.GetCallback(context.Background(), id)
		require.NoError(t, err)
		return cond(l)
	}, 30*time.Second, 20*time.Millisecond, "callback %d: %s", id, what)
	return l
}

func attemptsOf(t *testing.T, st *testenv.TestStore, id int64) []callback.Attempt {
	t.Helper()
	var out []callback.Attempt
	require.NoError(t, st.DB.Where("log_id = ?", id).Order("attempt").Find(&out).Error)
	return out
}

// TestHandlerTimeoutIsAFailedAttempt: a handler that outlives
// worker.handler_timeout (here one that ignores its context and returns
// nil late, so the commit is what fails) is a failed attempt with the
// reason, retried with backoff and FAILED after the budget, not a message
// requeued forever.
func TestHandlerTimeoutIsAFailedAttempt(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.Worker.HandlerTimeout = timeout
		c.Sources[0].Retry = source.Retry{MaxAttempts: 2, Initial: 50 * time.Millisecond, Max: 100 * time.Millisecond}
	})
	st := testenv.Store(t, cfg)
	var calls atomic.Int64
	testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		calls.Add(1)
		time.Sleep(2 * timeout)
		return nil
	})})
	id := announceDirect(t, cfg, st, "slow-1", "ORD-SLOW")

	row := waitRow(t, st, id, "FAILED after its budget", func(l *callback.Log) bool { return l.Status == callback.StatusFailed })
	require.Equal(t, 2, row.Attempts)
	require.Contains(t, *row.LastError, "handler timed out after 300ms")
	att := attemptsOf(t, st, id)
	require.Len(t, att, 2)
	require.Equal(t, callback.OutcomeRetry, att[0].Outcome)
	require.Contains(t, *att[0].Error, "handler timed out")
	require.Equal(t, callback.OutcomeFailed, att[1].Outcome)
	require.EqualValues(t, 2, calls.Load(), "one handler run per attempt")
}

// TestContentionIsRetriedWithoutUsingAnAttempt: the handler's transaction
// is chosen as a deadlock victim against another transaction. It is run
// again at once; the callback ends SUCCESS with one attempt, and the retry
// is counted in callgate_transaction_retries_total.
func TestContentionIsRetriedWithoutUsingAnAttempt(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	_, err := st.SQL.Exec(`CREATE TABLE dl (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`)
	require.NoError(t, err)
	_, err = st.SQL.Exec(`CREATE TABLE dl_filler (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`)
	require.NoError(t, err)
	_, err = st.SQL.Exec(`INSERT INTO dl VALUES (1, 0), (2, 0)`)
	require.NoError(t, err)

	holdsRow1 := make(chan struct{})
	holdsRow2 := make(chan struct{})
	var calls atomic.Int64
	m := metrics.New("worker")
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m, Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		first := calls.Add(1) == 1
		if err := tx.WithContext(ctx).Exec(`UPDATE dl SET v = v + 1 WHERE id = 1`).Error; err != nil {
			return fmt.Errorf("error updating row 1: %w", err)
		}
		if first {
			close(holdsRow1)
			<-holdsRow2
		}
		if err := tx.WithContext(ctx).Exec(`UPDATE dl SET v = v + 1 WHERE id = 2`).Error; err != nil {
			return fmt.Errorf("error updating row 2: %w", err)
		}
		return out.Add(ctx, callback.Message{RoutingKey: "test.done", Payload: map[string]any{"id": cb.ID}})
	})})
	id := announceDirect(t, cfg, st, "dl-1", "ORD-DL")

	// The other transaction is the heavier one (50 rows written), so
	// InnoDB rolls the handler's back when the two wait for each other.
	<-holdsRow1
	other, err := st.SQL.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	for i := range 50 {
		_, err := other.Exec(`INSERT INTO dl_filler VALUES (?, 0)`, i)
		require.NoError(t, err)
	}
	_, err = other.Exec(`UPDATE dl SET v = v + 10 WHERE id = 2`)
	require.NoError(t, err)
	close(holdsRow2)
	_, err = other.Exec(`UPDATE dl SET v = v + 10 WHERE id = 1`) // waits for the handler: a cycle
	require.NoError(t, err, "the handler's transaction is the deadlock victim")
	require.NoError(t, other.Commit())

	row := waitRow(t, st, id, "SUCCESS", func(l *callback.Log) bool { return l.Status == callback.StatusSuccess })
	require.Equal(t, 1, row.Attempts, "the deadlock used no attempt")
	att := attemptsOf(t, st, id)
	require.Len(t, att, 1)
	require.Equal(t, callback.OutcomeSuccess, att[0].Outcome)
	require.EqualValues(t, 2, calls.Load(), "the handler ran again at once")
	var v1, v2 int
	require.NoError(t, st.SQL.QueryRow(`SELECT (SELECT v FROM dl WHERE id = 1), (SELECT v FROM dl WHERE id = 2)`).Scan(&v1, &v2))
	require.Equal(t, []int{11, 11}, []int{v1, v2}, "one set of effects from each transaction")
	require.InDelta(t, 1, testutil.ToFloat64(m.TransactionRetries.WithLabelValues("payment", "deadlock")), 0)
}

// TestShutdownDoesNotBurnAnAttempt: a worker stopping while a slow handler
// runs gives up on it after worker.shutdown_timeout; nothing is recorded
// and the message goes back to the broker, so after a restart the callback
// ends SUCCESS with exactly one attempt.
func TestShutdownDoesNotBurnAnAttempt(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.Worker.ShutdownTimeout = 200 * time.Millisecond
		c.Sources[0].Retry.MaxAttempts = 1 // an attempt burned would be the last one
	})
	st := testenv.Store(t, cfg)
	started := make(chan struct{})
	var once atomic.Bool
	w := testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		if once.CompareAndSwap(false, true) {
			close(started)
		}
		<-ctx.Done() // slow: only a cancelled context ends it
		return ctx.Err()
	})})
	id := announceDirect(t, cfg, st, "stop-1", "ORD-STOP")
	<-started
	require.NoError(t, w.Stop())

	row, err := st.GetCallback(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, callback.StatusPending, row.Status, "the interrupted callback waits")
	require.Zero(t, row.Attempts, "no attempt was used")
	require.Empty(t, attemptsOf(t, st, id))

	testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(context.Context, *gorm.DB, *callback.Log, callback.Outbox) error {
		return nil
	})})
	row = waitRow(t, st, id, "SUCCESS after the restart", func(l *callback.Log) bool { return l.Status == callback.StatusSuccess })
	require.Equal(t, 1, row.Attempts)
	att := attemptsOf(t, st, id)
	require.Len(t, att, 1)
	require.Equal(t, callback.OutcomeSuccess, att[0].Outcome)
}
