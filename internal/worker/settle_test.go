package worker_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/metrics"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// storeOnly stores payment callbacks of keys without announcing them, as
// the gateway does (next_attempt_at a minute on, the compensation job's
// safety net), and returns their ids.
func storeOnly(t *testing.T, st *testenv.TestStore, tag string, keys ...string) []int64 {
	t.Helper()
	ids := make([]int64, len(keys))
	for i, key := range keys {
		now := time.Now().UTC()
		due := now.Add(time.Minute)
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: fmt.Sprintf("%s-%d", tag, i),
			BusinessKey: key, Payload: testenv.PaymentBody(key, fmt.Sprintf("PAY-%s-%d", tag, i), 1000),
			TraceID: "0af7651916cd43dd8448eb211c80319c", ReceivedAt: now, NextAttemptAt: &due})
		require.NoError(t, err)
		ids[i] = res.ID
	}
	return ids
}

// batchConfig is the fast test config at worker.batch_size bs (0: the
// shipped one), edited by mutate.
func batchConfig(t *testing.T, bs int, mutate func(*config.Config)) *config.Config {
	t.Helper()
	return testenv.Config(t, fast, func(c *config.Config) {
		if bs > 0 {
			c.Worker.BatchSize = bs
		}
		mutate(c)
	})
}

// TestMessageMatesKeepTheirOwnRetries: one message carries two callbacks.
// The first fails (retry in 10 minutes); the second cannot be recorded
// (the database is away for it, four times) and must run again. Its
// message-mate is not run again before its backoff ends: one attempt,
// whatever happens to the message; the second ends SUCCESS with one
// attempt, in both batch settings.
func TestMessageMatesKeepTheirOwnRetries(t *testing.T) {
	t.Parallel()
	testenv.EachBatchSize(t, func(t *testing.T, bs int) {
		t.Parallel()
		cfg := batchConfig(t, bs, func(c *config.Config) {
			c.Worker.ID = t.Name()
			c.Sources[0].Retry = source.Retry{MaxAttempts: 8, Initial: 10 * time.Minute, Max: 10 * time.Minute}
		})
		st := testenv.Store(t, cfg)
		ids := storeOnly(t, st, fmt.Sprintf("mates%d", bs), "ORD-MATE-A", "ORD-MATE-B")
		var runsA, runsB atomic.Int64
		testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
			switch cb.ID {
			case ids[0]:
				runsA.Add(1)
				return fmt.Errorf("the order service said no")
			default:
				if runsB.Add(1) <= 4 {
					return fmt.Errorf("lost the database: %w", store.ErrUnavailable)
				}
				return nil
			}
		})})
		announceIDs(t, cfg, ids)

		st.WaitStatus(t, ids[1], callback.StatusSuccess)
		row, err := st.GetCallback(t.Context(), ids[0])
		require.NoError(t, err)
		require.Equal(t, callback.StatusPending, row.Status)
		require.Equal(t, 1, row.Attempts, "the mate's failure was not retried before its backoff (handler ran %d times)", runsA.Load())
		require.NotNil(t, row.RetryAfter)
		require.True(t, row.RetryAfter.After(time.Now().Add(4*time.Minute)), "its next attempt stays where its backoff put it (5-10 min)")
		require.Equal(t, *row.RetryAfter, *row.NextAttemptAt)
		require.Len(t, attemptsOf(t, st, ids[0]), 1)
		rowB, err := st.GetCallback(t.Context(), ids[1])
		require.NoError(t, err)
		require.Equal(t, 1, rowB.Attempts, "the database being away used none of its attempts")
	})
}

// TestHandlerNetworkErrorIsAnAttempt: a handler that calls a service
// which refuses connections returns a network error. It is the handler's
// failure, not callgate's database being away: an attempt each time, with
// backoff, and FAILED after the budget.
func TestHandlerNetworkErrorIsAnAttempt(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	client := &http.Client{Timeout: time.Second}
	failsAfterItsBudget(t, "net-1", "ORD-NET", "connection refused", func(ctx context.Context, _ *gorm.DB) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, refused, nil)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("error calling the order service: %w", err)
		}
		resp.Body.Close()
		return nil
	})
}

// TestHandlerStatementDeadlineIsAnAttempt: a handler that gives a
// statement on its transaction a deadline of its own (shorter than the
// worker's) and returns the error when it passes has failed an attempt:
// its deadline is not callgate's database being away. Three attempts, then
// FAILED, one handler run each (before, it was requeued about once a
// second for ever, with no attempt).
func TestHandlerStatementDeadlineIsAnAttempt(t *testing.T) {
	t.Parallel()
	failsAfterItsBudget(t, "stmt-deadline-1", "ORD-STMT", "the handler's own deadline", func(ctx context.Context, tx *gorm.DB) error {
		sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if err := tx.WithContext(sctx).Exec(`SELECT SLEEP(2)`).Error; err != nil {
			return fmt.Errorf("error reading the order (the handler's own deadline): %w", err)
		}
		return nil
	})
}

// failsAfterItsBudget runs one callback through a handler that always
// fails with run, and asserts what a handler's own failure costs: one run
// and one attempt each time, FAILED after three, the error kept.
func failsAfterItsBudget(t *testing.T, event, key, wantErr string, run func(ctx context.Context, tx *gorm.DB) error) {
	t.Helper()
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.Sources[0].Retry = source.Retry{MaxAttempts: 3, Initial: 50 * time.Millisecond, Max: 100 * time.Millisecond}
	})
	st := testenv.Store(t, cfg)
	var calls atomic.Int64
	testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		calls.Add(1)
		return run(ctx, tx)
	})})
	id := announceDirect(t, cfg, st, event, key)

	row := waitRow(t, st, id, "FAILED after its budget", func(l *callback.Log) bool { return l.Status == callback.StatusFailed })
	require.Equal(t, 3, row.Attempts)
	require.Contains(t, *row.LastError, wantErr)
	require.EqualValues(t, 3, calls.Load(), "one handler run per attempt")
}

// TestRetryAfterSetsTheNextAttempt: a handler that says "retry after d"
// gets its next attempt d after this one, not after the source's backoff.
func TestRetryAfterSetsTheNextAttempt(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.Sources[0].Retry = source.Retry{MaxAttempts: 3, Initial: time.Hour, Max: time.Hour}
	})
	st := testenv.Store(t, cfg)
	var mu sync.Mutex
	var starts []time.Time
	testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		mu.Lock()
		starts = append(starts, time.Now())
		n := len(starts)
		mu.Unlock()
		if n == 1 {
			return callback.RetryAfter(300*time.Millisecond, fmt.Errorf("the platform asked us to come back later"))
		}
		return nil
	})})
	id := announceDirect(t, cfg, st, "later-1", "ORD-LATER")
	row := waitRow(t, st, id, "SUCCESS at the second attempt", func(l *callback.Log) bool { return l.Status == callback.StatusSuccess })
	require.Equal(t, 2, row.Attempts)
	att := attemptsOf(t, st, id)
	require.Len(t, att, 2)
	require.Equal(t, callback.OutcomeRetry, att[0].Outcome)
	require.False(t, att[1].StartedAt.Before(att[0].FinishedAt.Add(300*time.Millisecond)), "not before the delay asked for")
}

// TestRetryAfterAtMostTheSourcesMax: a delay asked for beyond the source's
// retry.max is cut to it, so the stuck job, which takes a next attempt
// further away than the longest backoff for a clock gone wrong, never
// undoes it and runs the callback early.
func TestRetryAfterAtMostTheSourcesMax(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.Sources[0].Retry = source.Retry{MaxAttempts: 3, Initial: time.Minute, Max: 2 * time.Minute}
		c.Scheduler.Stuck.Interval = 200 * time.Millisecond
	})
	st := testenv.Store(t, cfg)
	testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		return callback.RetryAfter(time.Hour, fmt.Errorf("the platform asked us to come back in an hour"))
	})})
	id := announceDirect(t, cfg, st, "later-max", "ORD-LATER-MAX")
	row := waitRow(t, st, id, "its first attempt recorded", func(l *callback.Log) bool { return l.Attempts == 1 })
	require.NotNil(t, row.RetryAfter)
	att := attemptsOf(t, st, id)
	require.Len(t, att, 1)
	require.WithinDuration(t, att[0].FinishedAt.Add(2*time.Minute), *row.RetryAfter, time.Second, "an hour cut to retry.max")
	time.Sleep(2 * time.Second) // the stuck job runs every 200 ms here
	again, err := st.GetCallback(t.Context(), id)
	require.NoError(t, err)
	require.Equal(t, 1, again.Attempts, "not run again early")
	require.WithinDuration(t, *row.RetryAfter, *again.RetryAfter, time.Millisecond, "the stuck job left the backoff alone")
}

// holdRow locks callback_log row id in a transaction of the test's own
// until release is called.
func holdRow(t *testing.T, st *testenv.TestStore, id int64) (release func()) {
	t.Helper()
	tx, err := st.SQL.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	var got int64
	require.NoError(t, tx.QueryRow(`SELECT id FROM callback_log WHERE id = ? FOR UPDATE`, id).Scan(&got))
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback() }) }
	t.Cleanup(release)
	return release
}

// TestClaimThatWaitsIsNotAnAttempt: another session holds a callback's row
// longer than the handler timeout. Waiting for it is contention, not the
// callback's failure: no attempt is recorded, it is never taken for
// "settled by another delivery", and once the row is free it runs (well
// before the compensation job's one-minute safety net), with one attempt;
// in both batch settings.
func TestClaimThatWaitsIsNotAnAttempt(t *testing.T) {
	t.Parallel()
	testenv.EachBatchSize(t, func(t *testing.T, bs int) {
		t.Parallel()
		cfg := batchConfig(t, bs, func(c *config.Config) {
			c.Worker.ID = t.Name()
			c.Worker.HandlerTimeout = time.Second // lock wait: 1 s as well, the server's least
			c.Scheduler.Compensation.Threshold = time.Minute
		})
		st := testenv.Store(t, cfg)
		ids := storeOnly(t, st, fmt.Sprintf("held%d", bs), "ORD-HELD", "ORD-FREE")
		release := holdRow(t, st, ids[0])
		m := metrics.New("worker")
		testenv.StartWorker(t, cfg, worker.Options{Metrics: m, Registry: registry(func(context.Context, *gorm.DB, *callback.Log, callback.Outbox) error {
			return nil
		})})
		announceIDs(t, cfg, ids)

		st.WaitStatus(t, ids[1], callback.StatusSuccess) // its mate is not held up
		// Several claims find the row held (they never wait for it) and
		// run it again after a pause.
		require.Eventually(t, func() bool { return testutil.ToFloat64(m.Processed.WithLabelValues("unknown", "held")) >= 2 },
			20*time.Second, 50*time.Millisecond, "the held row was met, more than once")
		require.Empty(t, attemptsOf(t, st, ids[0]), "waiting for a row is no attempt")
		release()
		row := st.WaitStatus(t, ids[0], callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts)
	})
}

// TestSlowButHealthyBatchCommits: a batch of callbacks whose handler each
// take a fifth of the handler timeout (together more than one timeout)
// commits as a batch: the deadline is per callback.
func TestSlowButHealthyBatchCommits(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast, func(c *config.Config) { c.Worker.HandlerTimeout = time.Second })
	st := testenv.Store(t, cfg)
	m := metrics.New("worker")
	ids := storeOnly(t, st, "slow", "ORD-S1", "ORD-S2", "ORD-S3", "ORD-S4", "ORD-S5", "ORD-S6", "ORD-S7", "ORD-S8")
	testenv.StartWorker(t, cfg, worker.Options{Metrics: m, Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		select {
		case <-time.After(200 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})})
	announceIDs(t, cfg, ids)
	for _, id := range ids {
		row := st.WaitStatus(t, id, callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts)
	}
	require.Zero(t, testutil.CollectAndCount(m.BatchFallbacks), "no batch fell back")
}

// TestStubbornHandlerEndsItsBatchAtItsDeadline: in a batch of eight
// callbacks (a whole of eight handler timeouts), the first handler ignores
// its context and sleeps ten timeouts. The batch's transaction is ended on
// the server when that handler's own deadline passes, not when it returns
// or when the batch's whole runs out: the batch's rows are free while the
// handler still sleeps. The batch then runs one by one, and every callback ends
// SUCCESS with its effect once.
func TestStubbornHandlerEndsItsBatchAtItsDeadline(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast, func(c *config.Config) { c.Worker.HandlerTimeout = time.Second })
	st := testenv.Store(t, cfg)
	_, err := st.SQL.Exec(`CREATE TABLE stubborn_effects (log_id BIGINT NOT NULL) ENGINE=InnoDB`)
	require.NoError(t, err)
	keys := []string{"ORD-B1", "ORD-B2", "ORD-B3", "ORD-B4", "ORD-B5", "ORD-B6", "ORD-B7", "ORD-B8"}
	ids := storeOnly(t, st, "stubborn", keys...)
	var first, returned atomic.Bool
	started := make(chan time.Time, 1)
	testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		if cb.ID == ids[0] && first.CompareAndSwap(false, true) {
			started <- time.Now()
			time.Sleep(10 * time.Second) // ignores its context
			returned.Store(true)
		}
		return tx.Exec(`INSERT INTO stubborn_effects VALUES (?)`, cb.ID).Error
	})})
	announceIDs(t, cfg, ids)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the batch never started")
	}
	free := func() bool {
		tx, err := st.SQL.BeginTx(t.Context(), nil)
		if err != nil {
			return false
		}
		defer func() { _ = tx.Rollback() }()
		rows, err := tx.Query(`SELECT id FROM callback_log WHERE id IN (?, ?, ?, ?, ?, ?, ?, ?) FOR UPDATE NOWAIT`,
			ids[0], ids[1], ids[2], ids[3], ids[4], ids[5], ids[6], ids[7])
		if err != nil {
			return false
		}
		defer func() { _ = rows.Close() }()
		n := 0
		for rows.Next() {
			n++
		}
		// A lock the server meets while it reads the rows is an error of
		// the rows, not of the query.
		return rows.Err() == nil && n == len(ids)
	}
	require.Eventually(t, free, 30*time.Second, 20*time.Millisecond)
	require.False(t, returned.Load(), "the batch's rows were freed at the handler's deadline (1 s), not when it returned (10 s)")
	for _, id := range ids {
		row := st.WaitStatus(t, id, callback.StatusSuccess)
		require.Equal(t, 1, row.Attempts)
		var n int
		require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM stubborn_effects WHERE log_id = ?`, id).Scan(&n))
		require.Equal(t, 1, n, "callback %d: its effect once", id)
	}
}

// TestLockWaitInAHandlerIsNoAttempt: a handler waits for a row another
// session holds for longer than the handler timeout. The server gives the
// wait up first (the worker's sessions wait half the handler timeout):
// contention, run again without an attempt, and the callback succeeds
// with one attempt once the row is free.
func TestLockWaitInAHandlerIsNoAttempt(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.Worker.HandlerTimeout = 2 * time.Second
		c.Worker.BatchSize = 1
	})
	st := testenv.Store(t, cfg)
	_, err := st.SQL.Exec(`CREATE TABLE lw (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`)
	require.NoError(t, err)
	_, err = st.SQL.Exec(`INSERT INTO lw VALUES (1, 0)`)
	require.NoError(t, err)
	other, err := st.SQL.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	_, err = other.Exec(`UPDATE lw SET v = 100 WHERE id = 1`)
	require.NoError(t, err)
	testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
		if err := tx.WithContext(ctx).Exec(`UPDATE lw SET v = v + 1 WHERE id = 1`).Error; err != nil {
			return fmt.Errorf("error updating lw: %w", err)
		}
		return nil
	})})
	id := announceDirect(t, cfg, st, "lw-1", "ORD-LW")
	time.Sleep(3 * time.Second)
	require.Empty(t, attemptsOf(t, st, id), "a lock wait is no attempt")
	require.NoError(t, other.Commit())
	row := st.WaitStatus(t, id, callback.StatusSuccess)
	require.Equal(t, 1, row.Attempts)
	var v int
	require.NoError(t, st.SQL.QueryRow(`SELECT v FROM lw WHERE id = 1`).Scan(&v))
	require.Equal(t, 101, v, "the handler's change applied once")
}

// TestKeysInUseStayFresh: a key in use keeps a recent locked_at whatever
// path locks it (here a batch), so the retention job, which forgets keys
// not locked for its max_age, never takes one in daily use for unused.
// The key was last written two hours ago (within max_age, so retention
// leaves it; past the hour after which a holder writes it again).
func TestKeysInUseStayFresh(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, fast)
	st := testenv.Store(t, cfg)
	old := time.Now().UTC().Add(-2 * time.Hour)
	_, err := st.SQL.Exec(`INSERT INTO callback_key (kind, business_key, locked_at) VALUES ('payment', 'ORD-OLD-KEY', ?)`, old)
	require.NoError(t, err)
	ids := storeOnly(t, st, "fresh", "ORD-OLD-KEY", "ORD-NEW-KEY")
	testenv.StartWorker(t, cfg, worker.Options{Registry: registry(func(context.Context, *gorm.DB, *callback.Log, callback.Outbox) error {
		return nil
	})})
	announceIDs(t, cfg, ids)
	for _, id := range ids {
		st.WaitStatus(t, id, callback.StatusSuccess)
	}
	var lockedAt time.Time
	require.NoError(t, st.SQL.QueryRow(`SELECT locked_at FROM callback_key WHERE kind = 'payment' AND business_key = 'ORD-OLD-KEY'`).Scan(&lockedAt))
	require.WithinDuration(t, time.Now(), lockedAt, time.Minute, "the key's row was refreshed when the batch locked it")
}

// TestKeyHolderThatRollsBackHoldsNoOneUp: a callback whose key is held by
// another transaction (here a session of the test; in production a
// callback of the key whose insert committed first, or a batch) waits
// without an attempt, and runs as soon as the holder rolls back: not when
// the compensation job's safety net (10 minutes here) comes round, since
// a holder that rolls back wakes no one. In both batch settings.
func TestKeyHolderThatRollsBackHoldsNoOneUp(t *testing.T) {
	t.Parallel()
	testenv.EachBatchSize(t, func(t *testing.T, bs int) {
		t.Parallel()
		cfg := batchConfig(t, bs, func(c *config.Config) {
			c.Scheduler.Compensation.Threshold = 10 * time.Minute
		})
		st := testenv.Store(t, cfg)
		key := fmt.Sprintf("ORD-HOLDER-%d", bs)
		_, err := st.SQL.Exec(`INSERT INTO callback_key (kind, business_key, locked_at) VALUES ('payment', ?, UTC_TIMESTAMP(6))`, key)
		require.NoError(t, err)
		holder, err := st.SQL.BeginTx(t.Context(), nil)
		require.NoError(t, err)
		defer func() { _ = holder.Rollback() }()
		var k string
		require.NoError(t, holder.QueryRow(`SELECT business_key FROM callback_key WHERE kind = 'payment' AND business_key = ? FOR UPDATE`, key).Scan(&k))

		var runs atomic.Int32
		m := metrics.New("worker")
		testenv.StartWorker(t, cfg, worker.Options{Metrics: m, Registry: registry(func(context.Context, *gorm.DB, *callback.Log, callback.Outbox) error {
			runs.Add(1)
			return nil
		})})
		ids := storeOnly(t, st, fmt.Sprintf("holder%d", bs), key)
		announceIDs(t, cfg, ids)
		require.Eventually(t, func() bool { return testutil.ToFloat64(m.Processed.WithLabelValues("payment", "held")) >= 1 },
			20*time.Second, 50*time.Millisecond, "the worker found the key held")
		cb, err := st.GetCallback(t.Context(), ids[0])
		require.NoError(t, err)
		require.Equal(t, callback.StatusPending, cb.Status, "the key is held")
		require.Zero(t, runs.Load(), "the handler never ran while the key was held")
		require.Zero(t, cb.Attempts, "waiting for a key is no attempt")

		require.NoError(t, holder.Rollback())
		cb = st.WaitStatus(t, ids[0], callback.StatusSuccess)
		require.Equal(t, 1, cb.Attempts)
		require.EqualValues(t, 1, runs.Load())
	})
}
