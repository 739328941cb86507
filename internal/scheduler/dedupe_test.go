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

// TestRetentionForgetsOldEventsOnlyOnceTheirCallbackIsGone: retention
// deletes the callback_event rows received before dedupe_max_age whose
// callback_log row is gone (batch after batch), and keeps an old one
// whose callback is still there (FAILED, PENDING) and a younger one whose
// callback is gone. A resend of a forgotten event is new; of a kept one,
// a duplicate of its original log_id.
func TestRetentionForgetsOldEventsOnlyOnceTheirCallbackIsGone(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	st.PastDays(t, 3)
	now := time.Now().UTC()
	day := 24 * time.Hour
	// Every callback on a day that retention drops (max_age 2 days);
	// their events as old as their received_at.
	mk := func(event string, status callback.Status, received time.Time) int64 {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{}`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: received})
		require.NoError(t, err)
		require.False(t, res.Duplicate)
		updates := map[string]any{"status": status, "retain_day": testenv.Day(3)}
		if status != callback.StatusPending {
			updates["processed_at"] = received.Add(time.Minute)
		}
		require.NoError(t, st.DB.Model(&callback.Log{}).Where("id = ?", res.ID).Updates(updates).Error)
		return res.ID
	}
	var forgotten []string
	for i := range 5 {
		event := fmt.Sprintf("old-%d", i)
		mk(event, callback.StatusSuccess, now.Add(-100*day+time.Duration(i)*time.Second))
		forgotten = append(forgotten, event)
	}
	kept := map[string]int64{
		"old-failed":  mk("old-failed", callback.StatusFailed, now.Add(-200*day)),
		"old-pending": mk("old-pending", callback.StatusPending, now.Add(-150*day)),
		"young-gone":  mk("young-gone", callback.StatusSuccess, now.Add(-60*day)),
	}

	r := &scheduler.Retention{Store: st.Store, MaxAge: 2 * day, DedupeMaxAge: 90 * day, BatchSize: 2, Log: quiet}
	res, err := r.RunOnce(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, res.Days)
	var stored []string
	require.NoError(t, st.DB.Raw(`SELECT event_id FROM callback_log ORDER BY event_id`).Scan(&stored).Error)
	require.Equal(t, []string{"old-failed", "old-pending"}, stored, "the SUCCESS callbacks went with their day")

	var left []string
	require.NoError(t, st.DB.Raw(`SELECT event_id FROM callback_event ORDER BY event_id`).Scan(&left).Error)
	require.Equal(t, []string{"old-failed", "old-pending", "young-gone"}, left)

	for _, event := range forgotten[:1] {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{}`), TraceID: "00000000000000000000000000000001", ReceivedAt: now})
		require.NoError(t, err)
		require.False(t, res.Duplicate, "past dedupe_max_age a resend is new")
	}
	for event, id := range kept {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{}`), TraceID: "00000000000000000000000000000002", ReceivedAt: now})
		require.NoError(t, err)
		require.Equal(t, id, res.ID, event)
		require.True(t, res.Duplicate, event)
	}

	// dedupe_max_age 0 keeps them.
	mk("old-again", callback.StatusSuccess, now.Add(-100*day))
	keep := &scheduler.Retention{Store: st.Store, MaxAge: 2 * day, BatchSize: 2, Log: quiet}
	_, err = keep.RunOnce(t.Context())
	require.NoError(t, err)
	var n int
	require.NoError(t, st.DB.Raw(`SELECT COUNT(*) FROM callback_event WHERE event_id = 'old-again'`).Scan(&n).Error)
	require.Equal(t, 1, n)
}

// TestRetentionForgetsEventsBehindMoreKeptOnesThanABatch: more old events
// kept (their callbacks FAILED) than a batch, ahead of events whose
// callbacks retention deletes in the same run: the one run deletes those
// too, walking past the kept ones.
func TestRetentionForgetsEventsBehindMoreKeptOnesThanABatch(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	st.PastDays(t, 3)
	now := time.Now().UTC()
	day := 24 * time.Hour
	mk := func(event string, status callback.Status, received time.Time) {
		res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{}`), TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ReceivedAt: received})
		require.NoError(t, err)
		require.False(t, res.Duplicate)
		require.NoError(t, st.DB.Model(&callback.Log{}).Where("id = ?", res.ID).
			Updates(map[string]any{"status": status, "processed_at": received.Add(time.Minute), "retain_day": testenv.Day(3)}).Error)
	}
	var kept []string
	for i := range 5 {
		event := fmt.Sprintf("kept-%d", i)
		mk(event, callback.StatusFailed, now.Add(-200*day+time.Duration(i)*time.Second))
		kept = append(kept, event)
	}
	for i := range 3 {
		mk(fmt.Sprintf("gone-%d", i), callback.StatusSuccess, now.Add(-100*day+time.Duration(i)*time.Second))
	}

	r := &scheduler.Retention{Store: st.Store, MaxAge: 2 * day, DedupeMaxAge: 90 * day, BatchSize: 2, Log: quiet}
	res, err := r.RunOnce(t.Context())
	require.NoError(t, err)
	moved := 0
	for _, d := range res.Days {
		moved += d.KeptCallbacks
	}
	require.Equal(t, len(kept), moved, "the FAILED ones kept, the others dropped with their day")
	var left []string
	require.NoError(t, st.DB.Raw(`SELECT event_id FROM callback_event ORDER BY event_id`).Scan(&left).Error)
	require.Equal(t, kept, left, "one run: the events behind the kept ones are gone")
}
