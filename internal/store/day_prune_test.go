package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestBatchSettlesOnlyItsDays: the statements that settle a claimed batch
// (its callbacks SUCCESS, its outbox rows SENT, a failed publish counted)
// read the day partitions of the batch's rows only, not every partition
// of the table. They find rows by id or message_id, keys without
// retain_day: without the rows' days in their WHERE, MariaDB descends
// the key in each of the table's partitions, 40 here (30 days' retention),
// once per row, or walks the whole index: the drain's extra database CPU
// after migration 025. Counted with the session's handler reads, which do
// not depend on the machine's speed.
func TestBatchSettlesOnlyItsDays(t *testing.T) {
	t.Parallel()
	st, partitions := thirtyDays(t)
	ctx := t.Context()

	// Other rows, so that the optimizer finds the batch's rows by their
	// keys as in a working database, rather than walking a tiny table
	// (with 3,000 it scanned the partitions named instead of looking the
	// 64 (id, day) pairs up).
	now := time.Now().UTC()
	bulkCallbacks(t, st, "other", 30000, now, func(int) bool { return false })
	_, err := st.SQL.ExecContext(ctx, `INSERT INTO outbox (callback_log_id, exchange, routing_key, message_id, payload, status, attempts, created_at, sent_at)
		SELECT id, 'x', 'payment.succeeded', CONCAT('cb', id, '.payment.succeeded'), '{}', 'SENT', 1, NOW(6), NOW(6) FROM callback_log`)
	require.NoError(t, err)
	_, err = st.SQL.ExecContext(ctx, `ANALYZE TABLE callback_log, outbox`)
	require.NoError(t, err)

	// The batch: 64 callbacks, half of them of an earlier day (a retry
	// of yesterday's callback), half of today.
	const batch = 64
	ids := insertMine(t, st, batch, now)
	// The first half of the batch spread over 8 earlier days (retries of
	// their callbacks), 4 rows a day.
	const days = 8
	for d := range days {
		part := ids[d*4 : d*4+4]
		_, err = st.SQL.ExecContext(ctx, `UPDATE callback_log SET retain_day = ? WHERE id IN (?, ?, ?, ?)`,
			append([]any{testenv.Day(d + 1).Format(time.DateOnly)}, anys(part)...)...)
		require.NoError(t, err)
	}
	// An index read or two per row, on its own day; far from a read of
	// each row in each of the table's partitions (batch × partitions), or
	// in each of the days named (batch × days).
	limit := int64(batch*2 + partitions + 20)

	var claimed []callback.Log
	var rows []store.OutboxRow
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		var today time.Time
		var err error
		claimed, _, today, err = st.ClaimCallbacksTx(ctx, tx, ids)
		require.NoError(t, err)
		require.Len(t, claimed, batch)
		require.Equal(t, testenv.Day(0), today, "the claim's day, the database's")
		require.Equal(t, testenv.Day(1), claimed[0].RetainDay, "a claimed row's day")
		require.Equal(t, testenv.Day(days), claimed[days*4-1].RetainDay, "a claimed row's day")
		require.Equal(t, testenv.Day(0), claimed[batch-1].RetainDay, "a claimed row's day")
		attempts := make([]callback.Attempt, batch)
		for i, cb := range claimed {
			attempts[i] = callback.Attempt{LogID: cb.ID, Attempt: 1, StartedAt: now, FinishedAt: now, Outcome: callback.OutcomeSuccess, WorkerID: "w"}
			rows = append(rows, store.OutboxRow{CallbackLogID: cb.ID, Exchange: "x", RoutingKey: "payment.refunded",
				MessageID: fmt.Sprintf("cb%d.payment.refunded", cb.ID), Payload: []byte(`{}`), RetainDay: today})
		}
		require.NoError(t, st.InsertOutboxTx(ctx, tx, rows))
		before := rowsRead(t, tx)
		require.NoError(t, st.MarkSucceededManyTx(ctx, tx, claimed, attempts))
		read := rowsRead(t, tx) - before
		t.Logf("settling the batch: %d handler reads", read)
		assert.Less(t, read, limit, "rows read to settle %d callbacks of %d days in a table of %d partitions", batch, days+1, partitions)
		return nil
	}))
	var n int
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM callback_log WHERE status = 'SUCCESS' AND attempts = 1 AND id BETWEEN ? AND ?`, ids[0], ids[batch-1]).Scan(&n))
	require.Equal(t, batch, n, "every callback of the batch SUCCESS, on either day")
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM outbox WHERE routing_key = 'payment.refunded' AND retain_day = CURRENT_DATE`).Scan(&n))
	require.Equal(t, batch, n, "the batch's outbox rows on the claim's day")

	// The relay's and the fast path's marking, and a failed publish
	// counted: the rows of one day.
	require.NoError(t, st.InTx(ctx, func(tx *store.Tx) error {
		before := rowsRead(t, tx)
		require.NoError(t, st.RecordOutboxFailureTx(ctx, tx, relayRows(t, st, "payment.refunded"), "not confirmed"))
		read := rowsRead(t, tx) - before
		t.Logf("counting the failed publishes: %d handler reads", read)
		assert.Less(t, read, limit, "rows read to count %d failed publishes", batch)
		// One row whose day is not known (a one-by-one delivery's, merged
		// into the same marking): it alone is looked for in every
		// partition.
		mixed := slices.Clone(rows)
		mixed[0].RetainDay = time.Time{}
		before = rowsRead(t, tx)
		require.NoError(t, st.MarkOutboxSentTx(ctx, tx, mixed))
		read = rowsRead(t, tx) - before
		t.Logf("marking the rows SENT: %d handler reads", read)
		assert.Less(t, read, limit+int64(partitions), "rows read to mark %d outbox rows SENT, one of no known day, in a table of %d partitions", batch, partitions)
		return nil
	}))
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM outbox WHERE routing_key = 'payment.refunded' AND status = 'SENT' AND attempts = 2`).Scan(&n))
	require.Equal(t, batch, n, "every outbox row of the batch SENT (after a failed publish)")
}

// relayRows reads the outbox rows with routingKey as the relay claims
// them (every column).
func relayRows(t *testing.T, st *testenv.TestStore, routingKey string) []store.OutboxRow {
	t.Helper()
	var rows []store.OutboxRow
	require.NoError(t, st.DB.Where("routing_key = ?", routingKey).Order("id").Find(&rows).Error)
	return rows
}

func anys(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// thirtyDays opens a test store whose day-partitioned tables have 30 past
// days' partitions (30 days' retention), and returns it with how many
// partitions callback_log has.
func thirtyDays(t *testing.T) (*testenv.TestStore, int) {
	t.Helper()
	st := testenv.Store(t, testenv.Config(t))
	st.PastDays(t, 30)
	var partitions int
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'callback_log'`).Scan(&partitions))
	require.Greater(t, partitions, 30)
	return st, partitions
}

// insertMine stores n PENDING paydemo callbacks received at now, event
// ids mine-i and keys ORD-MINE-i, and returns their ids in order.
func insertMine(t *testing.T, st *testenv.TestStore, n int, now time.Time) []int64 {
	t.Helper()
	var ids []int64
	for i := range n {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: fmt.Sprintf("mine-%d", i),
			BusinessKey: fmt.Sprintf("ORD-MINE-%d", i), Payload: []byte(`{}`), TraceID: fmt.Sprintf("%032x", i+1), ReceivedAt: now})
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	return ids
}
