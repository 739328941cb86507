package store_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// rowsRead is what the session's handlers read so far (index and table
// reads of every kind).
func rowsRead(t *testing.T, tx *store.Tx) int64 {
	t.Helper()
	var rows []struct {
		VariableName string `gorm:"column:Variable_name"`
		Value        int64  `gorm:"column:Value"`
	}
	require.NoError(t, tx.Gorm().Raw(`SHOW SESSION STATUS LIKE 'Handler_read%'`).Scan(&rows).Error)
	var n int64
	for _, r := range rows {
		n += r.Value
	}
	return n
}

// TestKeyQueriesReadOnlyTheirKeys: the per-key order checks read the rows
// of the keys they ask about, not the whole backlog. With 3,000 PENDING
// callbacks of other keys, checking two keys reads a handful of rows.
// Before, the optimizer was free to pick an index on status (or the
// primary key, by id) for these statements while the table's statistics
// were young, and read every PENDING row: measured in the benchmark's open
// loop at 400/s, 311 rows per statement on average. (With the day
// partitions a key also costs one probe per partition.)
func TestKeyQueriesReadOnlyTheirKeys(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	ctx := t.Context()

	const backlog = 3000
	now := time.Now().UTC()
	// Most of the table processed, a few hundred PENDING: a gateway and
	// worker keeping up.
	bulkCallbacks(t, st, "bulk", backlog, now, func(i int) bool { return i%10 == 0 })
	// A batch's keys: 64, two callbacks each.
	const batchKeys = 64
	var keys []store.Key
	want := map[store.Key][]int64{}
	var maxID int64
	for round := range 2 {
		for k := range batchKeys {
			key := store.Key{Kind: "payment", BusinessKey: fmt.Sprintf("ORD-MINE-%d", k)}
			if round == 0 {
				keys = append(keys, key)
			}
			res, err := st.InsertCallback(ctx, &callback.Log{Source: "paydemo", Kind: key.Kind, EventID: fmt.Sprintf("mine-%d-%d", round, k),
				BusinessKey: key.BusinessKey, Payload: []byte(`{}`), TraceID: fmt.Sprintf("%032x", k+1), ReceivedAt: now})
			require.NoError(t, err)
			want[key] = append(want[key], res.ID)
			maxID = res.ID
		}
	}
	// Each key's lookup reads its rows and probes every partition of the
	// day-partitioned callback_log once (migration 025: the statement
	// cannot name the rows' days), still far from the backlog's rows.
	var partitions int64
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'callback_log'`).Scan(&partitions))
	limit := int64(4*batchKeys+20) + batchKeys*partitions

	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		before := rowsRead(t, tx)
		pending, err := st.PendingOfKeysTx(ctx, tx, keys, maxID)
		require.NoError(t, err)
		wantLine := map[store.Key][]store.Pending{}
		for k, ids := range want {
			for _, id := range ids {
				wantLine[k] = append(wantLine[k], store.Pending{ID: id})
			}
		}
		require.Equal(t, wantLine, pending)
		read := rowsRead(t, tx) - before
		require.Less(t, read, limit, "rows read to check %d keys' order with %d other callbacks", batchKeys, backlog)

		before = rowsRead(t, tx)
		second := want[keys[0]][1]
		earlier, err := st.EarlierPendingTx(ctx, tx, &callback.Log{ID: second, Kind: "payment", BusinessKey: keys[0].BusinessKey})
		require.NoError(t, err)
		require.True(t, earlier)
		read = rowsRead(t, tx) - before
		require.Less(t, read, 10+partitions, "rows read to check one key's order with %d other callbacks", backlog)
		return nil
	}))
}

// bulkCallbacks writes n paydemo callbacks received at now, in statements
// of 500: event ids prefix-i, keys ORD-PREFIX-i, each SUCCESS (processed
// at now) unless pending(i) (PENDING). Tests of what a statement reads
// need a table of some size, so that the optimizer finds rows by their
// keys as in a working database rather than walking a tiny table.
func bulkCallbacks(t *testing.T, st *testenv.TestStore, prefix string, n int, now time.Time, pending func(int) bool) {
	t.Helper()
	for start := 0; start < n; start += 500 {
		var q strings.Builder
		var args []any
		q.WriteString(`INSERT INTO callback_log (source, kind, event_id, business_key, status, payload, trace_id, received_at, processed_at) VALUES `)
		for i := start; i < min(start+500, n); i++ {
			if i > start {
				q.WriteByte(',')
			}
			status, processed := callback.StatusSuccess, &now
			if pending(i) {
				status, processed = callback.StatusPending, nil
			}
			q.WriteString(`('paydemo', 'payment', ?, ?, ?, '{}', ?, ?, ?)`)
			args = append(args, fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("ORD-%s-%d", strings.ToUpper(prefix), i), status, fmt.Sprintf("%032d", i), now, processed)
		}
		_, err := st.SQL.ExecContext(t.Context(), q.String(), args...)
		require.NoError(t, err)
	}
}
