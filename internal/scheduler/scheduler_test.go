package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
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

	// Fifteen runs, however long a loaded machine takes to make them: only
	// an upper bound on their number depends on time, and load can only
	// lower the count.
	started := time.Now()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) >= 15
	}, time.Minute, 20*time.Millisecond, "the job runs")
	elapsed := time.Since(started)
	mu.Lock()
	owners := map[string]int{}
	for _, r := range runs {
		owners[r.owner]++
	}
	total := len(runs)
	mu.Unlock()
	require.Len(t, owners, 1, "one instance runs the job: %v", owners)
	ticks := int(elapsed/interval) + 2
	require.LessOrEqual(t, total, ticks, "once per tick across the fleet, not three times: %d runs in %s at %s", total, elapsed, interval)

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
	}, time.Minute, 20*time.Millisecond, "another instance takes over")
	gap := takeover.Sub(died)
	// The lease expires at most one lease after the holder's last renewal;
	// the next instance's tick (every interval) then takes it: about one
	// lease on a quiet machine, logged here, not asserted (a machine
	// running two make tests delays the ticks). A lease that never
	// expired would fail the wait above.
	t.Logf("leader %s died; takeover after %v (lease %v)", leader, gap, lease)
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

// dayRows is what a test puts on a day: callbacks with their attempts
// and outbox rows.
type dayRows struct {
	t  *testing.T
	st *testenv.TestStore
	n  int
}

// callback writes a callback of status on day (days before today), with
// one attempt per day in attempts (days before today) and outbox rows of
// the given statuses on its own day; it returns its id.
func (d *dayRows) callback(day int, status callback.Status, normalized []byte, attempts []int, outbox ...string) int64 {
	t := d.t
	t.Helper()
	d.n++
	at := testenv.Day(day).Add(time.Hour)
	res, err := d.st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: fmt.Sprintf("e-%d", d.n), BusinessKey: "K",
		Payload: []byte(`{}`), Normalized: normalized, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: at})
	require.NoError(t, err)
	updates := map[string]any{"status": status, "retain_day": testenv.Day(day), "attempts": len(attempts)}
	if status != callback.StatusPending {
		updates["processed_at"] = at.Add(time.Minute)
	}
	require.NoError(t, d.st.DB.Model(&callback.Log{}).Where("id = ?", res.ID).Updates(updates).Error)
	for i, a := range attempts {
		started := testenv.Day(a).Add(2 * time.Hour)
		require.NoError(t, d.st.DB.Exec(`INSERT INTO callback_attempt (log_id, attempt, started_at, finished_at, outcome, worker_id, retain_day)
			VALUES (?, ?, ?, ?, 'FAILED', 'w', ?)`, res.ID, i+1, started, started, testenv.Day(a)).Error)
	}
	for i, o := range outbox {
		require.NoError(t, d.st.DB.Exec(`INSERT INTO outbox (callback_log_id, exchange, routing_key, message_id, payload, status, created_at, sent_at, retain_day)
			VALUES (?, 'x', 'k', ?, '{}', ?, ?, IF(? = 'SENT', ?, NULL), ?)`, res.ID, fmt.Sprintf("cb%d.k.%d", res.ID, i), o, at, o, at, testenv.Day(day)).Error)
	}
	return res.ID
}

// retainDay is the day a row is kept on (callback_log, callback_attempt
// or outbox), "" when the row is gone.
func retainDay(t *testing.T, st *testenv.TestStore, table, where string, args ...any) []string {
	t.Helper()
	var out []string
	require.NoError(t, st.DB.Raw(`SELECT DATE_FORMAT(retain_day, '%Y-%m-%d') FROM `+table+` WHERE `+where+` ORDER BY id`, args...).Scan(&out).Error)
	return out
}

// TestRetentionDropsADayAndKeepsWhatIsUnresolved: with max_age 2 days,
// retention drops every day partition that ended 2 days ago or more (3
// days ago and before, p_old included: one DROP PARTITION per table and
// day), and leaves the younger ones. Before the drop it moves to today's
// partition what must not be lost: the FAILED and PENDING callbacks of
// those days with every attempt (whatever day the attempt was on), a dead
// letter younger than dead_letter_max_age, and the outbox rows not yet
// SENT (here of a SUCCESS callback). Those are readable afterwards by the
// console's and the replay's queries; the SUCCESS callbacks, their
// attempts and the SENT outbox rows of those days are gone. A second run
// finds nothing to drop; max_age 0 keeps every day.
func TestRetentionDropsADayAndKeepsWhatIsUnresolved(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	st.PastDays(t, 5)
	today := testenv.Day(0).Format(time.DateOnly)
	unreadable, err := callback.MarshalEvent(callback.Unreadable{Reason: "the notification could not be read: eventCode is missing"})
	require.NoError(t, err)
	d := &dayRows{t: t, st: st}
	var gone []int64
	for range 3 {
		gone = append(gone, d.callback(4, callback.StatusSuccess, nil, []int{4}, "SENT"))
	}
	unsentOf := d.callback(4, callback.StatusSuccess, nil, []int{4}, "SENT", "PENDING")
	gone = append(gone, unsentOf)
	failed := d.callback(4, callback.StatusFailed, nil, []int{4, 3, 2})
	pending := d.callback(5, callback.StatusPending, nil, []int{5})
	deadLetter := d.callback(3, callback.StatusFailed, unreadable, []int{3})
	young := d.callback(2, callback.StatusSuccess, nil, []int{2}, "SENT")
	yesterday := d.callback(1, callback.StatusFailed, nil, []int{1})

	r := &scheduler.Retention{Store: st.Store, MaxAge: 2 * 24 * time.Hour, DeadLetterMaxAge: 90 * 24 * time.Hour, BatchSize: 2, Log: quiet}
	res, err := r.RunOnce(t.Context())
	require.NoError(t, err)
	var dropped []string
	kept := map[string]int{}
	for _, day := range res.Days {
		dropped = append(dropped, day.Partitions...)
		kept["callbacks"] += day.KeptCallbacks
		kept["outbox"] += day.KeptOutbox
	}
	var want []string
	for _, p := range append([]string{"p_old"}, store.DayPartitionName(testenv.Day(5)), store.DayPartitionName(testenv.Day(4)), store.DayPartitionName(testenv.Day(3))) {
		for _, table := range store.DayPartitioned {
			want = append(want, table+"."+p)
		}
	}
	require.ElementsMatch(t, want, dropped)
	require.Equal(t, map[string]int{"callbacks": 3, "outbox": 1}, kept)
	for _, table := range store.DayPartitioned {
		require.Equal(t, append(append([]string{}, days(-2, 7)...), "p_future"), partitionNames(t, st, table), "%s: the younger days stay", table)
	}

	// Gone: the SUCCESS callbacks of those days, their attempts, their SENT rows.
	require.Empty(t, retainDay(t, st, "callback_log", "id IN ?", gone))
	require.Empty(t, retainDay(t, st, "callback_attempt", "log_id IN ?", gone))
	require.Empty(t, retainDay(t, st, "outbox", "callback_log_id IN ? AND status = 'SENT'", gone))
	// Kept, in today's partition, with every attempt.
	for id, attempts := range map[int64]int{failed: 3, pending: 1, deadLetter: 1} {
		require.Equal(t, []string{today}, retainDay(t, st, "callback_log", "id = ?", id), "callback %d", id)
		require.Equal(t, slices.Repeat([]string{today}, attempts), retainDay(t, st, "callback_attempt", "log_id = ?", id), "the attempts of %d", id)
		cb, err := st.GetCallback(t.Context(), id)
		require.NoError(t, err, "the console reads %d", id)
		require.Equal(t, "e-", cb.EventID[:2])
		history, err := st.Attempts(t.Context(), id)
		require.NoError(t, err)
		require.Len(t, history, attempts)
	}
	require.Equal(t, []string{today}, retainDay(t, st, "outbox", "callback_log_id = ? AND status = 'PENDING'", unsentOf), "the unsent row waits for the relay")
	listed, err := st.ListCallbacks(t.Context(), store.CallbackFilter{Status: string(callback.StatusFailed)}, 0, 10)
	require.NoError(t, err)
	var listedIDs []int64
	for _, l := range listed {
		listedIDs = append(listedIDs, l.ID)
	}
	require.Equal(t, []int64{yesterday, deadLetter, failed}, listedIDs, "the FAILED list, newest first")
	// The younger days, untouched.
	require.Equal(t, []string{testenv.Day(2).Format(time.DateOnly)}, retainDay(t, st, "callback_log", "id = ?", young))
	require.Equal(t, []string{testenv.Day(1).Format(time.DateOnly)}, retainDay(t, st, "callback_log", "id = ?", yesterday))
	require.Equal(t, []string{testenv.Day(2).Format(time.DateOnly)}, retainDay(t, st, "outbox", "callback_log_id = ?", young))

	res, err = r.RunOnce(t.Context())
	require.NoError(t, err)
	require.Empty(t, res.Days, "nothing more is due")
	keep := &scheduler.Retention{Store: st.Store, MaxAge: 0, BatchSize: 3, Log: quiet}
	res, err = keep.RunOnce(t.Context())
	require.NoError(t, err)
	require.Empty(t, res.Days, "max_age 0 keeps every day")
	require.Len(t, partitionNames(t, st, "callback_log"), 2+8+1)
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
	_, err := r.RunOnce(ctx)
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
