package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestPendingLookupsReadTheirDays: the statements that find a batch's
// PENDING callbacks (its claim by id, its keys' lines) read the days a
// PENDING callback can be on, not every partition of the table. They find
// rows by id or by key, keys without retain_day: without a day in their
// WHERE, MariaDB descends the key in each of the table's partitions, 40
// here (30 days' retention), once per row or key: most of the drain's
// extra database CPU after migration 025. Counted with the session's
// handler reads, which do not depend on the machine's speed.
func TestPendingLookupsReadTheirDays(t *testing.T) {
	t.Parallel()
	st, partitions := thirtyDays(t)
	ctx := t.Context()

	// Other rows, so that the optimizer finds the batch's rows by their
	// keys as in a working database: processed callbacks of 30 earlier
	// days, and some PENDING today.
	now := time.Now().UTC()
	otherDays(t, st, 30000, now)

	const batch = 64
	ids := insertMine(t, st, batch, now)
	var keys []store.Key
	for i := range batch {
		keys = append(keys, store.Key{Kind: "payment", BusinessKey: fmt.Sprintf("ORD-MINE-%d", i)})
	}
	requireFloorHourAgo(t, st, "today, the earliest PENDING (yesterday in a day's first hour)")

	// An index read per day named (today, and yesterday in a day's first
	// hour) and one of the row per row or key, and the reading of the
	// days (a probe per partition, every ten seconds); far from a read of
	// each in each of the table's partitions (batch × partitions: 2,624).
	limit := int64(batch*3 + partitions + 20)
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		before := rowsRead(t, tx)
		claimed, held, _, err := st.ClaimCallbacksTx(ctx, tx, ids)
		read := rowsRead(t, tx) - before
		require.NoError(t, err)
		require.Len(t, claimed, batch)
		require.Empty(t, held)
		t.Logf("claiming the batch: %d handler reads", read)
		assert.Less(t, read, limit, "rows read to claim %d callbacks in a table of %d partitions", batch, partitions)

		before = rowsRead(t, tx)
		lines, err := st.PendingOfKeysTx(ctx, tx, keys, ids[batch-1])
		read = rowsRead(t, tx) - before
		require.NoError(t, err)
		require.Len(t, lines, batch, "each key's line: its callback")
		t.Logf("reading the keys' lines: %d handler reads", read)
		assert.Less(t, read, limit, "rows read for the lines of %d keys in a table of %d partitions", batch, partitions)
		return nil
	}))

}

// TestPendingDaysFollowTheEarliestPending: the days the lookups name
// reach back to the earliest PENDING callback (a retry of an older day's
// callback stays in its key's line), move on once it is settled, and a
// claim still finds what is outside them: a processed callback announced
// again (skipped by its caller, not held), and even a PENDING one put on
// an older day behind the store's back.
func TestPendingDaysFollowTheEarliestPending(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	ctx := t.Context()
	st.PastDays(t, 10)
	now := time.Now().UTC()
	insert := func(event, key string) int64 {
		res, err := st.InsertCallback(ctx, &callback.Log{Source: "paydemo", Kind: "payment", EventID: event,
			BusinessKey: key, Payload: []byte(`{}`), TraceID: fmt.Sprintf("%032x", len(event)), ReceivedAt: now})
		require.NoError(t, err)
		return res.ID
	}
	setDay := func(id int64, day time.Time, status callback.Status) {
		_, err := st.SQL.ExecContext(ctx, `UPDATE callback_log SET retain_day = ?, status = ? WHERE id = ?`, day.Format(time.DateOnly), status, id)
		require.NoError(t, err)
	}
	old := insert("old-retry", "ORD-1") // PENDING, of 5 days ago
	done := insert("old-done", "ORD-2") // SUCCESS, of 8 days ago
	fresh := insert("fresh", "ORD-1")   // PENDING, today, behind old-retry
	setDay(old, testenv.Day(5), callback.StatusPending)
	setDay(done, testenv.Day(8), callback.StatusSuccess)
	key := store.Key{Kind: "payment", BusinessKey: "ORD-1"}

	require.Equal(t, testenv.Day(5), store.PendingFloor(st.Store), "the earliest PENDING callback's day")
	line := func() []int64 {
		var ids []int64
		require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
			lines, err := st.PendingOfKeysTx(ctx, tx, []store.Key{key}, fresh)
			for _, p := range lines[key] {
				ids = append(ids, p.ID)
			}
			return err
		}))
		return ids
	}
	require.Equal(t, []int64{old, fresh}, line(), "the older day's retry holds its key's line")
	next, err := st.NextPendingOfKeys(ctx, []store.Key{key})
	require.NoError(t, err)
	require.Len(t, next, 1)
	require.Equal(t, old, next[0].ID, "the key's next callback, of an older day")
	earlier, err := st.EarlierPendingTx(ctx, nil, &callback.Log{ID: fresh, Kind: "payment", BusinessKey: "ORD-1"})
	require.NoError(t, err)
	require.True(t, earlier, "the older day's retry comes first")

	claim := func(ids ...int64) (claimed, held []int64) {
		require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
			cbs, h, _, err := st.ClaimCallbacksTx(ctx, tx, ids)
			for _, cb := range cbs {
				claimed = append(claimed, cb.ID)
			}
			held = h
			return err
		}))
		return claimed, held
	}
	claimed, held := claim(fresh, done, old)
	require.Equal(t, []int64{old, done, fresh}, claimed, "every row claimed, in id order, whatever its day")
	require.Empty(t, held)

	// old-retry settled: the days move on to today's.
	setDay(old, testenv.Day(5), callback.StatusSuccess)
	requireFloorHourAgo(t, st, "today (yesterday in a day's first hour)")
	require.Equal(t, []int64{fresh}, line())

	// Behind the store's back (a callback becomes PENDING only on the
	// database's day): a claim still finds it, in its second statement.
	setDay(old, testenv.Day(5), callback.StatusPending)
	store.SetPendingFloor(st.Store, testenv.Day(0))
	claimed, held = claim(old, fresh)
	require.Equal(t, []int64{old, fresh}, claimed, "a PENDING row before the days named, still claimed")
	require.Empty(t, held)

	// And what follows the claim finds it too: a failed attempt of it is
	// recorded, not taken for a delivery that settled it meanwhile.
	down := "down"
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		cbs, _, _, err := st.ClaimCallbacksTx(ctx, tx, []int64{old})
		require.NoError(t, err)
		require.Len(t, cbs, 1)
		return st.RecordFailureTx(ctx, tx, store.Failure{Attempt: callback.Attempt{LogID: old, Attempt: cbs[0].Attempts + 1,
			StartedAt: now, FinishedAt: now, Outcome: callback.OutcomeRetry, Error: &down, WorkerID: "w"}, NextAttemptAt: now.Add(time.Minute)})
	}))
	var attempts int
	require.NoError(t, st.SQL.QueryRow(`SELECT attempts FROM callback_log WHERE id = ?`, old).Scan(&attempts))
	require.Equal(t, 1, attempts, "the failed attempt of a row before the days named, recorded")
}

// TestOneByOneReadsItsDay: one by one (worker.batch_size 1, and a batch's
// fallback), the claim and the settling of a callback read its day, not
// every partition of the table (as TestPendingLookupsReadTheirDays).
func TestOneByOneReadsItsDay(t *testing.T) {
	t.Parallel()
	st, partitions := thirtyDays(t)
	ctx := t.Context()
	now := time.Now().UTC()
	otherDays(t, st, 3000, now)
	ids := insertMine(t, st, 1, now)
	requireFloorHourAgo(t, st, "read before the claim")

	// A read or two of the row on its day, and the attempt's INSERT
	// (about 15: the partitioned table's AUTO_INCREMENT); far from a
	// descent in each of the table's partitions.
	limit := int64(partitions / 2)
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		before := rowsRead(t, tx)
		cb, err := st.TryClaimCallbackTx(ctx, tx, ids[0])
		read := rowsRead(t, tx) - before
		require.NoError(t, err)
		t.Logf("claiming one callback: %d handler reads", read)
		assert.Less(t, read, limit, "rows read to claim one callback in a table of %d partitions", partitions)

		before = rowsRead(t, tx)
		require.NoError(t, st.MarkSucceededTx(ctx, tx, cb, &callback.Attempt{LogID: cb.ID, Attempt: 1, StartedAt: now, FinishedAt: now,
			Outcome: callback.OutcomeSuccess, WorkerID: "w"}))
		read = rowsRead(t, tx) - before
		t.Logf("settling one callback: %d handler reads", read)
		assert.Less(t, read, limit, "rows read to settle one callback in a table of %d partitions", partitions)
		return nil
	}))
	var status string
	require.NoError(t, st.SQL.QueryRow(`SELECT CONCAT(status, ' ', attempts) FROM callback_log WHERE id = ?`, ids[0]).Scan(&status))
	require.Equal(t, "SUCCESS 1", status)
}

// otherDays writes n other callbacks (bulkCallbacks), one in a hundred
// PENDING today and the others processed on the 30 days before, and
// analyzes the table: the rows a working database holds besides a test's.
func otherDays(t *testing.T, st *testenv.TestStore, n int, now time.Time) {
	t.Helper()
	bulkCallbacks(t, st, "other", n, now, func(i int) bool { return i%100 == 0 })
	_, err := st.SQL.ExecContext(t.Context(), `UPDATE callback_log SET retain_day = CURRENT_DATE - INTERVAL (1 + id % 30) DAY WHERE status = 'SUCCESS'`)
	require.NoError(t, err)
	_, err = st.SQL.ExecContext(t.Context(), `ANALYZE TABLE callback_log`)
	require.NoError(t, err)
}

// requireFloorHourAgo reads the floor again and requires it to be the
// database's UTC day an hour ago: the latest day the lookups name as the
// earliest a PENDING callback can be on (a row of yesterday may still
// commit in a day's first hour). That day is read before and after, and
// either is right (a run across 01:00 UTC).
func requireFloorHourAgo(t *testing.T, st *testenv.TestStore, msg string) {
	t.Helper()
	hourAgo := func() time.Time {
		var day time.Time
		require.NoError(t, st.SQL.QueryRow(`SELECT DATE(UTC_TIMESTAMP() - INTERVAL 1 HOUR)`).Scan(&day))
		return day
	}
	before := hourAgo()
	floor := store.PendingFloor(st.Store)
	after := hourAgo()
	if !floor.Equal(after) {
		require.Equal(t, before, floor, msg)
	}
}
