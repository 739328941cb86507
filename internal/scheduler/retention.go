package scheduler

import (
	"callgate/internal/store"
	"context"
	"log/slog"
	"time"
)

// Retention deletes SUCCESS callbacks (with their attempts), SENT outbox
// rows and per-key lock rows (callback_key) older than MaxAge, and dead
// letters FAILED longer ago than DeadLetterMaxAge, in small batches, each
// its own short transaction, so the tables are never locked for long.
// Other FAILED callbacks are never deleted: an operator has to look at
// them. A dead letter (signed and ours, but unreadable by its preset:
// callback.Unreadable) is kept as long as an operator may fix the
// configuration and replay it, and then goes, counted per source in
// dead_letters_dropped: otherwise re-sent captured deliveries that each
// make a new one would grow the table without bound. A max age of 0 keeps
// those rows.
//
// Deleting a callback does not forget its (source, event_id): the intake
// remembers it in callback_event (and the deletion writes it there first,
// in its transaction, for a row an older gateway stored without one),
// which retention empties separately, of events received before
// DedupeMaxAge whose callback is gone (never one whose callback_log row
// is still there), so a platform re-sending an event is answered as a
// duplicate until then. MaxAge should still
// outlive every platform's retry window (Stripe's is 3 days, Adyen's 30;
// the default is 30 days): a duplicate whose row is gone answers a log_id
// that cannot be looked up. The handlers are idempotent besides.
type Retention struct {
	Store            *store.Store
	MaxAge           time.Duration
	DeadLetterMaxAge time.Duration
	DedupeMaxAge     time.Duration
	BatchSize        int
	Log              *slog.Logger

	// deadLetters is where the walk through old FAILED callbacks stopped
	// (see store.DeadLetterCursor): each run reads only what came due
	// since, not every FAILED callback operators keep. Per process: a
	// worker that takes the lease over reads them once.
	deadLetters store.DeadLetterCursor
}

// RunOnce deletes what is due and returns how many callbacks (dead letters
// included) and outbox rows it removed.
func (r *Retention) RunOnce(ctx context.Context) (callbacks, outboxRows int, err error) {
	var keys, dead, events int
	now := time.Now().UTC()
	attrs := []any{}
	if r.MaxAge > 0 {
		cutoff := now.Add(-r.MaxAge)
		attrs = append(attrs, "older_than", cutoff)
		if callbacks, err = r.drain(ctx, r.Store.DeleteSucceededBefore, cutoff); err != nil {
			return callbacks, 0, err
		}
		if outboxRows, err = r.drain(ctx, r.Store.DeleteSentBefore, cutoff); err != nil {
			return callbacks, outboxRows, err
		}
		// A key row is a lock anchor, created again when its key comes back.
		if keys, err = r.drain(ctx, r.Store.DeleteKeysBefore, cutoff); err != nil {
			return callbacks, outboxRows, err
		}
	}
	if r.DeadLetterMaxAge > 0 {
		cutoff := now.Add(-r.DeadLetterMaxAge)
		attrs = append(attrs, "dead_letters_older_than", cutoff)
		dead, err = r.dropDeadLetters(ctx, cutoff)
		callbacks += dead
		if err != nil {
			return callbacks, outboxRows, err
		}
	}
	// After the callbacks: an event goes only once its callback has.
	if r.DedupeMaxAge > 0 {
		cutoff := now.Add(-r.DedupeMaxAge)
		attrs = append(attrs, "events_older_than", cutoff)
		if events, err = r.dropEvents(ctx, cutoff); err != nil {
			return callbacks, outboxRows, err
		}
	}
	if callbacks+outboxRows+keys+events > 0 {
		r.Log.Info("retention: deleted old rows", append([]any{"callbacks", callbacks - dead, "dead_letters", dead, "outbox", outboxRows, "keys", keys, "events", events}, attrs...)...)
	}
	return callbacks, outboxRows, ctx.Err()
}

// dropDeadLetters walks the FAILED callbacks older than cutoff from where
// the last run stopped, a batch per short transaction, deleting the dead
// letters among them.
func (r *Retention) dropDeadLetters(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	for ctx.Err() == nil {
		batchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, next, read, err := r.Store.DeleteDeadLettersBefore(batchCtx, cutoff, r.deadLetters, r.BatchSize)
		cancel()
		total += n
		if err != nil {
			return total, err
		}
		r.deadLetters = next
		if read < r.BatchSize {
			break
		}
	}
	return total, nil
}

// dropEvents walks the events received before cutoff, a batch per short
// transaction, deleting those whose callback is gone. The cursor lasts the
// run: each run reads each event it keeps (its callback still there) once,
// and starts again from the oldest, whose callback may have gone since.
func (r *Retention) dropEvents(ctx context.Context, cutoff time.Time) (int, error) {
	total := 0
	var at store.EventCursor
	for ctx.Err() == nil {
		batchCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, next, read, err := r.Store.DeleteEventsBefore(batchCtx, cutoff, at, r.BatchSize)
		cancel()
		total += n
		if err != nil {
			return total, err
		}
		at = next
		if read < r.BatchSize {
			break
		}
	}
	return total, nil
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
