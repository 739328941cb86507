package scheduler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/scheduler"
	"callgate/internal/testenv"
)

// TestRetentionDropsOldDeadLetters: dead letters (FAILED callbacks whose
// event is a callback.Unreadable) FAILED longer ago than
// dead_letter_max_age go with their attempts, counted per source in
// dead_letters_dropped; a younger one stays, and so do the other FAILED
// callbacks however old, an old unreadable one still PENDING, and one a
// replay read after a configuration fix. The walk gets past many old
// FAILED callbacks that are no dead letters, batch after batch, and a
// later run finds the dead letters that came due since.
func TestRetentionDropsOldDeadLetters(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	now := time.Now().UTC()
	unreadable, err := callback.MarshalEvent(callback.Unreadable{Reason: "the notification could not be read: eventCode is missing"})
	require.NoError(t, err)
	readable, err := callback.MarshalEvent(callback.PaymentEvent{OrderCode: "O", PaymentNo: "P", Amount: 1, Currency: "USD", Status: callback.PaymentSuccess})
	require.NoError(t, err)
	mk := func(source, event string, normalized []byte, status callback.Status, failedAt time.Time) int64 {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: source, Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{"big":"body"}`), Normalized: normalized, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: failedAt.Add(-time.Minute)})
		require.NoError(t, err)
		updates := map[string]any{"status": status, "attempts": 2}
		if status != callback.StatusPending {
			updates["processed_at"] = failedAt
		}
		require.NoError(t, st.DB.Model(&callback.Log{}).Where("id = ?", res.ID).Updates(updates).Error)
		for a := 1; a <= 2; a++ {
			require.NoError(t, st.DB.Create(&callback.Attempt{LogID: res.ID, Attempt: a, StartedAt: failedAt, FinishedAt: failedAt,
				Outcome: string(callback.StatusFailed), WorkerID: "w"}).Error)
		}
		return res.ID
	}
	day := 24 * time.Hour
	// Seven FAILED callbacks operators keep, older than every dead letter:
	// the first batches (of 3) hold nothing to delete.
	var kept []int64
	for i := range 7 {
		kept = append(kept, mk("stripe", fmt.Sprintf("ordinary-%d", i), nil, callback.StatusFailed, now.Add(-200*day+time.Duration(i)*time.Second)))
	}
	kept = append(kept, mk("adyen", "readable-failed", readable, callback.StatusFailed, now.Add(-150*day)))
	var dropped []int64
	for i := range 4 {
		dropped = append(dropped, mk("stripe", fmt.Sprintf("dead-%d", i), unreadable, callback.StatusFailed, now.Add(-100*day+time.Duration(i)*time.Second)))
	}
	dropped = append(dropped, mk("adyen", "dead-a", unreadable, callback.StatusFailed, now.Add(-120*day)))
	kept = append(kept,
		mk("stripe", "young-dead", unreadable, callback.StatusFailed, now.Add(-80*day)),
		mk("stripe", "pending-dead", unreadable, callback.StatusPending, now.Add(-100*day)),
		mk("stripe", "read-after-a-fix", readable, callback.StatusSuccess, now.Add(-10*day)))

	r := &scheduler.Retention{Store: st.Store, MaxAge: 30 * day, DeadLetterMaxAge: 90 * day, BatchSize: 3, Log: quiet}
	res, err := r.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, len(dropped), res.DeadLetters)

	var left []int64
	require.NoError(t, st.DB.Model(&callback.Log{}).Order("id").Pluck("id", &left).Error)
	require.ElementsMatch(t, kept, left, "only the old dead letters are gone")
	var attempts int64
	require.NoError(t, st.DB.Model(&callback.Attempt{}).Where("log_id IN ?", dropped).Count(&attempts).Error)
	require.Zero(t, attempts, "their attempts went with them")
	require.NoError(t, st.DB.Model(&callback.Attempt{}).Where("log_id IN ?", kept).Count(&attempts).Error)
	require.EqualValues(t, 2*len(kept), attempts, "the others keep theirs")

	counts := func() map[string]int64 {
		got, err := st.DeadLettersDropped(t.Context())
		require.NoError(t, err)
		m := map[string]int64{}
		for _, d := range got {
			m[d.Source] = d.Dropped
			require.WithinDuration(t, time.Now(), d.LastDroppedAt, time.Minute)
		}
		return m
	}
	require.Equal(t, map[string]int64{"stripe": 4, "adyen": 1}, counts())

	// Nothing more is due: the count stays.
	res, err = r.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, res.DeadLetters)
	require.Equal(t, map[string]int64{"stripe": 4, "adyen": 1}, counts())

	// A dead letter FAILED after the walk's last row is found by the next
	// run. One behind it (made here by hand: a callback goes FAILED at the
	// worker's now, never 90 days ago) is found by a new Retention, another
	// worker taking the lease over, which walks from the start.
	late := mk("stripe", "late-dead", unreadable, callback.StatusFailed, now.Add(-95*day))
	res, err = r.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadLetters)
	mk("adyen", "dead-b", unreadable, callback.StatusFailed, now.Add(-300*day))
	other := &scheduler.Retention{Store: st.Store, MaxAge: 30 * day, DeadLetterMaxAge: 90 * day, BatchSize: 3, Log: quiet}
	res, err = other.RunOnce(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, res.DeadLetters)
	require.Equal(t, map[string]int64{"stripe": 5, "adyen": 2}, counts())
	var n int64
	require.NoError(t, st.DB.Model(&callback.Log{}).Where("id = ?", late).Count(&n).Error)
	require.Zero(t, n)

	// dead_letter_max_age 0 keeps them.
	mk("stripe", "kept-dead", unreadable, callback.StatusFailed, now.Add(-400*day))
	keep := &scheduler.Retention{Store: st.Store, MaxAge: 30 * day, BatchSize: 3, Log: quiet}
	res, err = keep.RunOnce(t.Context())
	require.NoError(t, err)
	require.Zero(t, res.DeadLetters)
	require.Equal(t, map[string]int64{"stripe": 5, "adyen": 2}, counts())
}
