package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/metrics"
	"callgate/internal/scheduler"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

type run struct {
	owner string
	at    time.Time
}

// TestElectorOneInstancePerTickAndTakeover runs three real gocron
// schedulers with the MySQL lease elector: only one runs the job, and when
// it dies without releasing the lease another takes over within one lease.
func TestElectorOneInstancePerTickAndTakeover(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	const lease = time.Second
	const interval = 100 * time.Millisecond

	var mu sync.Mutex
	var runs []run
	scheds := map[string]*scheduler.Scheduler{}
	for i := range 3 {
		owner := fmt.Sprintf("worker-%d", i)
		el := scheduler.NewElector(st.Store, "test-lease", owner, lease)
		s, err := scheduler.New(quiet, metrics.New("worker"), []scheduler.Job{{Name: "tick", Interval: interval, Run: func(context.Context) error {
			mu.Lock()
			runs = append(runs, run{owner, time.Now()})
			mu.Unlock()
			return nil
		}}}, gocron.WithDistributedElector(el))
		require.NoError(t, err)
		s.Start()
		scheds[owner] = s
		t.Cleanup(func() { _ = s.Stop() })
	}

	time.Sleep(2 * time.Second)
	mu.Lock()
	owners := map[string]int{}
	for _, r := range runs {
		owners[r.owner]++
	}
	total := len(runs)
	mu.Unlock()
	require.Len(t, owners, 1, "one instance runs the job: %v", owners)
	require.Greater(t, total, 10)
	require.LessOrEqual(t, total, 22, "once per tick across the fleet, not three times: %d runs in 2s at 100ms", total)

	var leader string
	for o := range owners {
		leader = o
	}
	// The leader dies: its scheduler stops and nobody releases the lease.
	require.NoError(t, scheds[leader].Stop())
	died := time.Now()
	var takeover time.Time
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range runs {
			if r.owner != leader && r.at.After(died) {
				takeover = r.at
				return true
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond, "another instance takes over")
	gap := takeover.Sub(died)
	t.Logf("leader %s died; takeover after %v (lease %v)", leader, gap, lease)
	// The lease expires at most one lease after the holder's last renewal;
	// the next instance's tick (every interval) then takes it. The rest is
	// slack for a busy 2-core machine.
	require.Less(t, gap, lease+2*interval+700*time.Millisecond, "within one lease period")
}

func TestCompensationAnnouncesDueCallbacksOnce(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	ann, _ := testenv.Announcer(t, cfg)
	queue := testenv.OpenQueue(t, cfg.AMQP.Prefix+".payment")
	now := time.Now().UTC()
	insert := func(event string, due time.Time, status callback.Status) int64 {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{}`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: now.Add(-time.Hour), NextAttemptAt: &due})
		require.NoError(t, err)
		require.NoError(t, st.DB.Model(&callback.Log{}).Where("id = ?", res.ID).Update("status", status).Error)
		return res.ID
	}
	due1 := insert("a", now.Add(-time.Minute), callback.StatusPending)
	due2 := insert("b", now.Add(-2*time.Minute), callback.StatusPending)
	insert("c", now.Add(time.Hour), callback.StatusPending) // backing off
	insert("d", now.Add(-time.Minute), callback.StatusFailed)
	insert("e", now.Add(-time.Minute), callback.StatusSuccess)

	c := &scheduler.Compensation{Store: st.Store, Announcer: ann, Threshold: time.Minute, BatchSize: 1, Kinds: []string{"payment", "logistics"}, Log: quiet}
	n, err := c.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	var got []string
	for range 2 {
		d, ok := queue.Get(5 * time.Second)
		require.True(t, ok)
		got = append(got, string(d.Body))
		require.Contains(t, d.Headers["traceparent"], "4bf92f3577b34da6a3ce929d0e0e4736")
	}
	require.Equal(t, []string{fmt.Sprintf(`{"log_ids":[%d]}`, due2), fmt.Sprintf(`{"log_ids":[%d]}`, due1)}, got,
		"oldest due first, only PENDING and due")

	// Claimed rows are pushed a threshold ahead: not announced again now.
	n, err = c.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 0, n)
}

func TestRetentionKeepsFailedAndRecentRows(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	old := time.Now().UTC().Add(-40 * 24 * time.Hour)
	recent := time.Now().UTC().Add(-time.Hour)
	mk := func(event string, status callback.Status, processed time.Time) int64 {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{}`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: processed})
		require.NoError(t, err)
		require.NoError(t, st.DB.Model(&callback.Log{}).Where("id = ?", res.ID).Updates(map[string]any{"status": status, "processed_at": processed}).Error)
		require.NoError(t, st.DB.Create(&callback.Attempt{LogID: res.ID, Attempt: 1, StartedAt: processed, FinishedAt: processed, Outcome: string(status), WorkerID: "w"}).Error)
		require.NoError(t, st.DB.Exec(`INSERT INTO outbox (callback_log_id, exchange, routing_key, message_id, payload, status, created_at, sent_at)
			VALUES (?, 'x', 'k', ?, '{}', 'SENT', ?, ?)`, res.ID, "m-"+event, processed, processed).Error)
		return res.ID
	}
	var oldSuccess []int64
	for i := range 7 {
		oldSuccess = append(oldSuccess, mk(fmt.Sprintf("old-%d", i), callback.StatusSuccess, old))
	}
	oldFailed := mk("old-failed", callback.StatusFailed, old)
	recentSuccess := mk("recent", callback.StatusSuccess, recent)

	r := &scheduler.Retention{Store: st.Store, MaxAge: 30 * 24 * time.Hour, BatchSize: 3, Log: quiet}
	cbs, obs, err := r.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 7, cbs)
	require.Equal(t, 8, obs, "old SENT outbox rows, including the failed callback's")

	var left []int64
	require.NoError(t, st.DB.Model(&callback.Log{}).Order("id").Pluck("id", &left).Error)
	require.Equal(t, []int64{oldFailed, recentSuccess}, left, "FAILED rows are never deleted")
	var attempts int64
	require.NoError(t, st.DB.Model(&callback.Attempt{}).Where("log_id IN ?", oldSuccess).Count(&attempts).Error)
	require.Zero(t, attempts, "their attempts went with them")

	keep := &scheduler.Retention{Store: st.Store, MaxAge: 0, BatchSize: 3, Log: quiet}
	cbs, obs, err = keep.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, cbs+obs, "max_age 0 keeps everything")
}

// TestRetentionForgetsOldKeyRows: callback_key rows not locked since
// max_age go with the rest; a recent one stays, one a worker holds right
// now is skipped without waiting for it, and a worker that meets a
// forgotten key again simply creates its row again.
func TestRetentionForgetsOldKeyRows(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	old := time.Now().UTC().Add(-40 * 24 * time.Hour)
	recent := time.Now().UTC().Add(-time.Hour)
	for key, at := range map[string]time.Time{"old-1": old, "old-2": old, "old-3": old, "old-4": old, "held": old, "recent": recent} {
		require.NoError(t, st.DB.Exec(`INSERT INTO callback_key (kind, business_key, locked_at) VALUES ('payment', ?, ?)`, key, at).Error)
	}
	// A worker's batch holds "held" while retention runs.
	held := st.DB.Begin()
	require.NoError(t, held.Error)
	defer held.Rollback()
	var n int64
	require.NoError(t, held.Raw(`SELECT COUNT(*) FROM callback_key WHERE kind = 'payment' AND business_key = 'held' FOR UPDATE`).Scan(&n).Error)
	require.EqualValues(t, 1, n)

	r := &scheduler.Retention{Store: st.Store, MaxAge: 30 * 24 * time.Hour, BatchSize: 3, Log: quiet}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, _, err := r.RunOnce(ctx)
	require.NoError(t, err, "a held key row is skipped, not waited for")
	require.NoError(t, held.Commit().Error)

	var left []string
	require.NoError(t, st.DB.Raw(`SELECT business_key FROM callback_key ORDER BY business_key`).Scan(&left).Error)
	require.Equal(t, []string{"held", "recent"}, left)

	// The next callback of a forgotten key creates its row again and holds it.
	require.NoError(t, st.InTx(t.Context(), func(tx *store.Tx) error {
		busy, err := st.LockKeysTx(t.Context(), tx, []store.Key{{Kind: "payment", BusinessKey: "old-1"}})
		require.NoError(t, err)
		require.Empty(t, busy)
		return nil
	}))
	require.NoError(t, st.DB.Raw(`SELECT COUNT(*) FROM callback_key WHERE business_key = 'old-1'`).Scan(&n).Error)
	require.EqualValues(t, 1, n)
}

func TestStuckMakesImpossibleDueTimesDue(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	far := time.Now().UTC().Add(24 * time.Hour)
	near := time.Now().UTC().Add(5 * time.Minute)
	ins := func(event string, due *time.Time) int64 {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{}`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: time.Now().UTC(), NextAttemptAt: due})
		require.NoError(t, err)
		return res.ID
	}
	farID := ins("far", &far)
	nearID := ins("near", &near)
	nullID := ins("null", nil)
	require.NoError(t, st.DB.Exec("UPDATE callback_log SET next_attempt_at = NULL WHERE id = ?", nullID).Error)

	s := &scheduler.Stuck{Store: st.Store, Horizon: time.Hour, BatchSize: 10, Log: quiet}
	n, err := s.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for id, wantDue := range map[int64]bool{farID: true, nullID: true, nearID: false} {
		l, err := st.GetCallback(t.Context(), id)
		require.NoError(t, err)
		require.NotNil(t, l.NextAttemptAt)
		require.Equal(t, wantDue, l.NextAttemptAt.Before(time.Now().Add(time.Second)), "log %d", id)
	}
}

// TestCompensationLeavesABackloggedQueueAlone: when a kind's queue already
// holds more than max_queued messages, its due callbacks are not announced
// again (their announcements are still queued); other kinds are.
func TestCompensationLeavesABackloggedQueueAlone(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	ann, conn := testenv.Announcer(t, cfg)
	topo := broker.Topology{Prefix: cfg.AMQP.Prefix, Kinds: []string{"payment", "logistics"}}
	for i := range 6 {
		testenv.Publish(t, cfg, "payment", fmt.Sprintf(`{"log_id":%d}`, 1000+i))
	}
	payments := testenv.OpenQueue(t, cfg.AMQP.Prefix+".payment")
	require.Eventually(t, func() bool { return payments.Depth() == 6 }, 5*time.Second, 20*time.Millisecond)
	due := time.Now().UTC().Add(-time.Minute)
	for _, k := range []string{"payment", "logistics"} {
		_, err := st.InsertCallback(t.Context(), &callback.Log{Source: "x", Kind: k, EventID: "e-" + k, BusinessKey: "K",
			Payload: []byte(`{}`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: due, NextAttemptAt: &due})
		require.NoError(t, err)
	}
	c := &scheduler.Compensation{Store: st.Store, Announcer: ann, Threshold: time.Minute, BatchSize: 10,
		Kinds: topo.Kinds, MaxQueued: 5, QueueDepth: func(kind string) (int, error) { return topo.QueueDepth(conn, kind) }, Log: quiet}
	n, err := c.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the logistics callback: the payment queue is backlogged")
	logistics := testenv.OpenQueue(t, cfg.AMQP.Prefix+".logistics")
	_, ok := logistics.Get(5 * time.Second)
	require.True(t, ok)
	require.Equal(t, 6, payments.Depth(), "nothing added to the backlog")
}
