package scheduler_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/scheduler"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// partitionNames lists table's partitions by name.
func partitionNames(t *testing.T, st *testenv.TestStore, table string) []string {
	t.Helper()
	parts, err := st.DayPartitions(t.Context(), table)
	require.NoError(t, err)
	var names []string
	for _, p := range parts {
		names = append(names, p.Name)
	}
	return names
}

// days names the partitions of the days from today+from through
// today+through.
func days(from, through int) []string {
	var out []string
	for d := from; d <= through; d++ {
		out = append(out, store.DayPartitionName(testenv.Day(-d)))
	}
	return out
}

// TestPartitionsJobCreatesDaysAhead: the partitions job keeps a partition
// per UTC day from today through today + days_ahead on callback_log,
// callback_attempt and outbox, as its clock moves on: with the
// migration's 7 days ahead and days_ahead 9, two days more; three days
// later, three more. Two workers running it at once (each its own store)
// both succeed and create each day once; a run with nothing to do
// creates nothing. p_future was empty at every split: no warning.
func TestPartitionsJobCreatesDaysAhead(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	other := testenv.Store(t, cfg)
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	now := time.Now()
	clock := func() time.Time { return now }
	jobs := []*scheduler.Partitions{
		{Store: st.Store, DaysAhead: 9, Log: log, Now: clock},
		{Store: other.Store, DaysAhead: 9, Log: log, Now: clock},
	}
	created := make([]int, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { created[i], errs[i] = j.RunOnce(t.Context()) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, 3*2, created[0]+created[1], "each day once, on each table")
	for _, table := range store.DayPartitioned {
		require.Equal(t, append(append([]string{"p_old"}, days(0, 9)...), "p_future"), partitionNames(t, st, table), table)
	}
	n, err := jobs[0].RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)

	now = now.Add(3 * 24 * time.Hour)
	n, err = jobs[1].RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 3*3, n, "three days later, three days more")
	for _, table := range store.DayPartitioned {
		require.Equal(t, append(append([]string{"p_old"}, days(0, 12)...), "p_future"), partitionNames(t, st, table), table)
	}
	require.NotContains(t, logs.String(), "p_future holds rows")
}

// TestPartitionsJobSplitsAFullFuture: after the workers were down longer
// than days_ahead, rows of days without a partition are in p_future; the
// job splits it all the same (the rows get their days, so that retention
// can drop them) and warns with the table and the row count, since the
// split copied them while holding writes to the table. No row is lost.
func TestPartitionsJobSplitsAFullFuture(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	logs := &testenv.SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	var ids []int64
	for i, event := range []string{"late-1", "late-2"} {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{}`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: time.Now().UTC()})
		require.NoError(t, err)
		// Written 9 and 10 days from now, the workers down meanwhile.
		require.NoError(t, st.DB.Exec(`UPDATE callback_log SET retain_day = ? WHERE id = ?`, testenv.Day(-9-i), res.ID).Error)
		ids = append(ids, res.ID)
	}
	job := &scheduler.Partitions{Store: st.Store, DaysAhead: 3, Log: log, Now: func() time.Time { return time.Now().Add(8 * 24 * time.Hour) }}
	n, err := job.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 3*4, n, "8 through 11 days from now")
	require.Contains(t, logs.String(), `"msg":"scheduler: p_future holds rows of days without their partition`)
	require.Contains(t, logs.String(), `"table":"callback_log","rows":2`)
	require.Equal(t, 1, strings.Count(logs.String(), "p_future holds rows"), "only callback_log's held rows")
	for i, id := range ids {
		var part string
		require.NoError(t, st.SQL.QueryRow(`SELECT PARTITION_NAME FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE()
			AND TABLE_NAME = 'callback_log' AND PARTITION_NAME = ?`, store.DayPartitionName(testenv.Day(-9-i))).Scan(&part))
		var got int64
		require.NoError(t, st.SQL.QueryRow("SELECT id FROM callback_log PARTITION (`"+part+"`) WHERE id = ?", id).Scan(&got), "row %d in its day", id)
	}
}
