package scheduler_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/scheduler"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestPartitionsJobCreatesDaysAhead: the partitions job creates a
// partition per UTC day from today through today + days_ahead on
// callback_log, callback_attempt and outbox; two workers running it at
// once (each its own store) both succeed and create each day once; a
// second run creates nothing; and retention's batched DELETE still
// works on the partitioned tables.
func TestPartitionsJobCreatesDaysAhead(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	other := testenv.Store(t, cfg)
	today := time.Now().UTC().Truncate(24 * time.Hour)
	clock := func() time.Time { return today.Add(13 * time.Hour) }
	jobs := []*scheduler.Partitions{
		{Store: st.Store, DaysAhead: 3, Log: quiet, Now: clock},
		{Store: other.Store, DaysAhead: 3, Log: quiet, Now: clock},
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
	require.Equal(t, 3*4, created[0]+created[1], "each day once, on each table")
	for _, table := range store.DayPartitioned {
		parts, err := st.DayPartitions(t.Context(), table)
		require.NoError(t, err)
		var names []string
		for _, p := range parts {
			names = append(names, p.Name)
		}
		require.Equal(t, []string{"p_old", store.DayPartitionName(today), store.DayPartitionName(today.AddDate(0, 0, 1)),
			store.DayPartitionName(today.AddDate(0, 0, 2)), store.DayPartitionName(today.AddDate(0, 0, 3)), "p_future"}, names, table)
	}
	n, err := jobs[0].RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)

	// Retention (still batched DELETEs) on the partitioned tables.
	day := 24 * time.Hour
	for i, at := range []time.Time{time.Now().UTC().Add(-40 * day), time.Now().UTC()} {
		_, err := st.SQL.Exec(`INSERT INTO callback_log (source, kind, event_id, business_key, status, payload, trace_id, received_at, processed_at, retain_day)
			VALUES ('paydemo', 'payment', ?, 'K', 'SUCCESS', '{}', 't', ?, ?, DATE(?))`, []string{"old", "new"}[i], at, at, at)
		require.NoError(t, err)
	}
	r := &scheduler.Retention{Store: st.Store, MaxAge: 30 * day, BatchSize: 10, Log: quiet}
	cbs, _, err := r.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, cbs)
	var left []string
	require.NoError(t, st.DB.Raw(`SELECT event_id FROM callback_log`).Scan(&left).Error)
	require.Equal(t, []string{"new"}, left)
}
