package scheduler_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/scheduler"
	"callgate/internal/testenv"
)

// TestRetentionNeverErasesTheHistoryOfAReplayedCallback: a replay lands
// while retention is deleting an old SUCCESS callback. Whatever the order,
// a callback that survives keeps its attempt history, and one that is
// deleted goes with it: never a live callback without its attempts.
func TestRetentionNeverErasesTheHistoryOfAReplayedCallback(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	old := time.Now().UTC().Add(-40 * 24 * time.Hour)
	res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: "old", BusinessKey: "K",
		Payload: []byte(`{}`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: old})
	require.NoError(t, err)
	id := res.ID
	require.NoError(t, st.DB.Model(&callback.Log{}).Where("id = ?", id).Updates(map[string]any{"status": callback.StatusSuccess, "processed_at": old, "attempts": 1}).Error)
	require.NoError(t, st.DB.Create(&callback.Attempt{LogID: id, Attempt: 1, StartedAt: old, FinishedAt: old, Outcome: callback.OutcomeSuccess, WorkerID: "w"}).Error)

	// Another session holds the attempt rows for a moment, so retention's
	// work on them waits: the window in which the replay lands.
	holder, err := st.SQL.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	_, err = holder.Exec(`SELECT id FROM callback_attempt WHERE log_id = ? FOR UPDATE`, id)
	require.NoError(t, err)

	r := &scheduler.Retention{Store: st.Store, MaxAge: 30 * 24 * time.Hour, BatchSize: 10, Log: quiet}
	retained := make(chan error, 1)
	go func() { _, _, err := r.RunOnce(t.Context()); retained <- err }()
	waitForStatement(t, st.SQL, "DELETE FROM callback_attempt%")

	// The operator's replay (what admin's makePending runs).
	replayed := make(chan int64, 1)
	go func() {
		res, err := st.SQL.Exec(`UPDATE callback_log SET status = 'PENDING', attempts_base = attempts, next_attempt_at = NOW(6), processed_at = NULL
			WHERE id = ? AND status IN ('SUCCESS', 'FAILED')`, id)
		n := int64(-1)
		if err == nil {
			n, _ = res.RowsAffected()
		}
		replayed <- n
	}()
	// Either the replay is done at once, or it waits for retention.
	n := int64(0)
	require.Eventually(t, func() bool {
		select {
		case n = <-replayed:
			return true
		default:
		}
		var waiting int
		err := st.SQL.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND command = 'Query'
			AND info LIKE 'UPDATE callback_log SET status%'`).Scan(&waiting)
		return err == nil && waiting > 0
	}, 10*time.Second, 5*time.Millisecond, "the replay ran or waits")
	require.NoError(t, holder.Commit())
	require.NoError(t, <-retained)
	if n == 0 {
		n = <-replayed
	}

	var rows, attempts int64
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM callback_log WHERE id = ?`, id).Scan(&rows))
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM callback_attempt WHERE log_id = ?`, id).Scan(&attempts))
	t.Logf("replay updated %d row(s); callback rows %d, attempt rows %d", n, rows, attempts)
	if rows == 1 {
		require.EqualValues(t, 1, attempts, "the replayed callback kept its attempt history")
	} else {
		require.Zero(t, attempts, "the deleted callback's history went with it")
		require.Zero(t, n, "the replay found nothing to replay")
	}
}

// waitForStatement waits until a statement of this database matching like
// is running (here: waiting for a lock the test holds).
func waitForStatement(t *testing.T, db *sql.DB, like string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND command = 'Query' AND info LIKE ?`, like).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, 5*time.Millisecond, "statement %q is waiting", like)
}
