package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/outbox"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// TestRelayLeavesAFreshCommitToTheFastPath: a transaction longer than the
// relay's min_age commits its outbox row; while the fast path is still
// publishing it (held here for less than min_age), the relay does not take
// it too: the row's age counts from its commit, by the database's clock.
// Each notification is delivered once.
func TestRelayLeavesAFreshCommitToTheFastPath(t *testing.T) {
	t.Parallel()
	const minAge = time.Second
	cfg := testenv.Config(t, fast, func(c *config.Config) {
		c.Scheduler.OutboxRelay.MinAge = minAge
		c.Scheduler.OutboxRelay.Interval = 50 * time.Millisecond
	})
	st := testenv.Store(t, cfg)
	down := testenv.Downstream(t, cfg)
	opts := worker.Options{
		Registry: registry(func(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
			if err := out.Add(ctx, callback.Message{RoutingKey: "test.slow", Payload: map[string]any{"id": cb.ID}}); err != nil {
				return err
			}
			time.Sleep(minAge + 500*time.Millisecond) // a long transaction
			return nil
		}),
		Hooks: worker.Hooks{AfterCommit: func(int64) { time.Sleep(minAge / 2) }}, // a fast path in no hurry
	}
	testenv.StartWorker(t, cfg, opts)
	id := announceDirect(t, cfg, st, "long-1", "ORD-LONG")
	waitRow(t, st, id, "SUCCESS", func(l *callback.Log) bool { return l.Status == callback.StatusSuccess })

	want := outbox.MessageID(id, "test.slow", 0)
	require.Eventually(t, func() bool {
		var r outbox.Row
		require.NoError(t, st.DB.Take(&r, "message_id = ?", want).Error)
		return r.Status == outbox.StatusSent
	}, 10*time.Second, 20*time.Millisecond, "the row is SENT")
	msgs := down.Drain(minAge + 500*time.Millisecond)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.MessageId)
	}
	require.Equal(t, []string{want}, ids, "delivered once: %s", strings.Join(ids, ", "))
	var r outbox.Row
	require.NoError(t, st.DB.Take(&r, "message_id = ?", want).Error)
	require.Equal(t, 1, r.Attempts, "published by one path only")
}
