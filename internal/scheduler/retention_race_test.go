package scheduler_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/replay"
	"callgate/internal/scheduler"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestRetentionNeverDropsAReplayedCallback: an operator's replay of a
// SUCCESS callback lands after retention moved what its day must keep
// (nothing: SUCCESS) and before the day's DROP (held here by the test
// holding the partitions lock). The replay moves the callback and its
// attempts to today's partition in its transaction: the drop goes ahead
// and the callback survives, PENDING, with its whole history. A replay
// that does not move the row (a worker older than retention by day,
// during a rolling upgrade) makes retention refuse the day instead: the
// callback survives too, and the day goes at a later run.
func TestRetentionNeverDropsAReplayedCallback(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		moving bool
	}{{"replay", true}, {"older worker's replay", false}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := testenv.Config(t)
			st := testenv.Store(t, cfg)
			st.PastDays(t, 3)
			// p_old gone first: the run's one drop is then the day's.
			_, err := st.DropDaysBefore(t.Context(), testenv.Day(3), 10, 10*time.Second)
			require.NoError(t, err)
			d := &dayRows{t: t, st: st}
			id := d.callback(3, callback.StatusSuccess, nil, []int{3, 3})

			holder, err := st.SQL.Conn(t.Context())
			require.NoError(t, err)
			defer holder.Close()
			var got int
			require.NoError(t, holder.QueryRowContext(t.Context(), `SELECT GET_LOCK(CONCAT('callgate-partitions.', DATABASE()), 5)`).Scan(&got))
			require.Equal(t, 1, got)

			r := &scheduler.Retention{Store: st.Store, MaxAge: 2 * 24 * time.Hour, BatchSize: 10, Log: quiet, LockWait: 30 * time.Second}
			type result struct {
				res scheduler.RetentionResult
				err error
			}
			retained := make(chan result, 1)
			go func() { res, err := r.RunOnce(t.Context()); retained <- result{res, err} }()
			waitForStatement(t, st.SQL, "SELECT GET_LOCK%")

			if c.moving {
				rp := &replay.Replayer{Store: st.Store, Announcer: noAnnouncer{}, Threshold: time.Minute, Log: quiet}
				_, err := rp.Replay(t.Context(), "op", id, "test", true)
				require.NoError(t, err)
			} else {
				require.NoError(t, st.DB.Exec(`UPDATE callback_log SET status = 'PENDING', attempts_base = attempts, next_attempt_at = NOW(6), processed_at = NULL
					WHERE id = ?`, id).Error)
			}
			_, err = holder.ExecContext(t.Context(), `DO RELEASE_LOCK(CONCAT('callgate-partitions.', DATABASE()))`)
			require.NoError(t, err)
			out := <-retained

			cb, err := st.GetCallback(t.Context(), id)
			require.NoError(t, err, "the replayed callback is still there")
			require.Equal(t, callback.StatusPending, cb.Status)
			history, err := st.Attempts(t.Context(), id)
			require.NoError(t, err)
			require.Len(t, history, 2, "with its whole history")
			if c.moving {
				require.NoError(t, out.err)
				require.Equal(t, []string{testenv.Day(0).Format(time.DateOnly)}, retainDay(t, st, "callback_log", "id = ?", id))
				require.NotEmpty(t, out.res.Days, "the day was dropped")
				return
			}
			require.ErrorIs(t, out.err, store.ErrDayNotEmptied)
			require.Contains(t, partitionNames(t, st, "callback_log"), store.DayPartitionName(testenv.Day(3)), "the day waits")
			// The next run moves it, then drops the day.
			res, err := r.RunOnce(t.Context())
			require.NoError(t, err)
			require.NotEmpty(t, res.Days)
			require.NotContains(t, partitionNames(t, st, "callback_log"), store.DayPartitionName(testenv.Day(3)))
			history, err = st.Attempts(t.Context(), id)
			require.NoError(t, err)
			require.Len(t, history, 2)
		})
	}
}

// noAnnouncer drops announcements (the compensation job would pick the
// callback up).
type noAnnouncer struct{}

func (noAnnouncer) Announce(broker.Announcement) bool { return true }

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
