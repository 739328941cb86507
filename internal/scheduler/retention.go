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
	for ctx.Err() == nil {
		n, err := r.callbackBatch(ctx, cutoff)
		callbacks += n
		if err != nil {
			return callbacks, outboxRows, err
		}
		if n < r.BatchSize {
			break
		}
	}
	for ctx.Err() == nil {
		n, err := r.outboxBatch(ctx, cutoff)
		outboxRows += n
		if err != nil {
			return callbacks, outboxRows, err
		}
		if n < r.BatchSize {
			break
		}
	}
	keys := 0
	for ctx.Err() == nil {
		n, err := r.keyBatch(ctx, cutoff)
		keys += n
		if err != nil {
			return callbacks, outboxRows, err
		}
		if n < r.BatchSize {
			break
		}
	}
	if callbacks+outboxRows+keys > 0 {
		r.Log.Info("retention: deleted old rows", "callbacks", callbacks, "outbox", outboxRows, "keys", keys, "older_than", cutoff)
	}
	return callbacks, outboxRows, ctx.Err()
}

func (r *Retention) callbackBatch(ctx context.Context, cutoff time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return r.Store.DeleteSucceededBefore(ctx, cutoff, r.BatchSize)
}

// outboxBatch deletes one batch of old SENT outbox rows.
func (r *Retention) outboxBatch(ctx context.Context, cutoff time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return r.Store.DeleteSentBefore(ctx, cutoff, r.BatchSize)
}

// keyBatch deletes one batch of key rows not locked since cutoff (a key
// row is a lock anchor, created again when its key comes back).
func (r *Retention) keyBatch(ctx context.Context, cutoff time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return r.Store.DeleteKeysBefore(ctx, cutoff, r.BatchSize)
}
