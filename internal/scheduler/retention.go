package scheduler

import (
	"callgate/internal/store"
	"context"
	"log/slog"
	"time"
)

// Retention deletes SUCCESS callbacks (with their attempts), SENT outbox
// rows and per-key lock rows (callback_key) older than MaxAge, in small
// batches, each its own short transaction, so the tables are never locked
// for long. FAILED callbacks are never deleted: an operator has to look at
// them. MaxAge 0 keeps everything.
//
// Deleting a SUCCESS callback also forgets its (source, event_id): a
// platform re-sending it after MaxAge would be accepted as new. MaxAge must
// outlive every platform's retry window (Stripe's is 3 days; the default is
// 30 days), and the handlers are idempotent besides.
type Retention struct {
	Store     *store.Store
	MaxAge    time.Duration
	BatchSize int
	Log       *slog.Logger
}

// RunOnce deletes what is due and returns how many callbacks and outbox rows
// it removed.
func (r *Retention) RunOnce(ctx context.Context) (callbacks, outboxRows int, err error) {
	if r.MaxAge <= 0 {
		return 0, 0, nil
	}
	cutoff := time.Now().UTC().Add(-r.MaxAge)
	if callbacks, err = r.drain(ctx, r.Store.DeleteSucceededBefore, cutoff); err != nil {
		return callbacks, 0, err
	}
	if outboxRows, err = r.drain(ctx, r.Store.DeleteSentBefore, cutoff); err != nil {
		return callbacks, outboxRows, err
	}
	// A key row is a lock anchor, created again when its key comes back.
	keys, err := r.drain(ctx, r.Store.DeleteKeysBefore, cutoff)
	if err != nil {
		return callbacks, outboxRows, err
	}
	if callbacks+outboxRows+keys > 0 {
		r.Log.Info("retention: deleted old rows", "callbacks", callbacks, "outbox", outboxRows, "keys", keys, "older_than", cutoff)
	}
	return callbacks, outboxRows, ctx.Err()
}

// drain runs one deleting statement after the other, each in a short
// transaction of its own, until one deletes less than a batch.
func (r *Retention) drain(ctx context.Context, batch func(context.Context, time.Time, int) (int, error), cutoff time.Time) (int, error) {
	total := 0
	for ctx.Err() == nil {
		batchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := batch(batchCtx, cutoff, r.BatchSize)
		cancel()
		total += n
		if err != nil || n < r.BatchSize {
			return total, err
		}
	}
	return total, nil
}
