package scheduler

import (
	"context"
	"log/slog"
	"time"

	"callgate/internal/store"
)

// Retention removes what callgate no longer needs to keep, once per run:
//
//   - the days of callback_log, callback_attempt and outbox (day
//     partitions, migration 025) that ended MaxAge ago or more, each
//     dropped in one ALTER TABLE ... DROP PARTITION per table whatever its
//     row count (store.DropDaysBefore). What a day must not lose is moved
//     to today's partition first, so it stays at least MaxAge more: every
//     callback that is not SUCCESS (PENDING, FAILED: an operator has to
//     look at them; dead letters until their own age) with all its
//     attempts, and every outbox row not SENT. A row is therefore kept
//     between MaxAge and MaxAge plus one day after the day it was
//     received (or written, or moved: retention's move and a replay both
//     give a row today's day);
//   - callback_key rows (per-key lock anchors) not locked for MaxAge;
//   - dead letters FAILED longer ago than DeadLetterMaxAge, with their
//     attempts, row by row (they are few): a dead letter (signed and
//     ours, but unreadable by its preset: callback.Unreadable) is kept as
//     long as an operator may fix the configuration and replay it, and
//     then goes, counted per source in dead_letters_dropped: otherwise
//     re-sent captured deliveries that each make a new one would grow the
//     table without bound;
//   - callback_event rows received before DedupeMaxAge whose callback is
//     gone (never one whose callback_log row is still there).
//
// A max age of 0 keeps those rows. Dropping a callback does not forget
// its (source, event_id): the intake remembers it in callback_event (with
// the log_id), so a platform re-sending an event is answered as a
// duplicate until DedupeMaxAge. MaxAge should still outlive every
// platform's retry window (Stripe's is 3 days, Adyen's 30; the default
// is 30 days): a duplicate whose row is gone answers a log_id that cannot
// be looked up. The handlers are idempotent besides.
type Retention struct {
	Store            *store.Store
	MaxAge           time.Duration
	DeadLetterMaxAge time.Duration
	DedupeMaxAge     time.Duration
	BatchSize        int
	Log              *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// LockWait is how long a drop waits for the partitions lock and a
	// table's metadata lock (0: PartitionsLockWait).
	LockWait time.Duration

	// deadLetters is where the walk through old FAILED callbacks stopped
	// (see store.DeadLetterCursor): each run reads only what came due
	// since, not every FAILED callback operators keep. Per process: a
	// worker that takes the lease over reads them once.
	deadLetters store.DeadLetterCursor
}

// RetentionResult is what one run removed and kept.
type RetentionResult struct {
	// Days are the days dropped, each with its partitions and the rows it
	// kept (moved to today's partition).
	Days []store.DroppedDay
	// DeadLetters, Keys and Events are the rows deleted one by one.
	DeadLetters, Keys, Events int
}

// RunOnce removes what is due (in that order: the dead letters, the days,
// the key rows, and last the events, which go only once their callback
// has).
func (r *Retention) RunOnce(ctx context.Context) (RetentionResult, error) {
	var res RetentionResult
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	attrs := []any{}
	var err error
	// Dead letters first: those due go now rather than be moved out of a
	// day that is dropped.
	if r.DeadLetterMaxAge > 0 {
		cutoff := now().UTC().Add(-r.DeadLetterMaxAge)
		attrs = append(attrs, "dead_letters_older_than", cutoff)
		if res.DeadLetters, err = r.dropDeadLetters(ctx, cutoff); err != nil {
			return res, err
		}
	}
	if r.MaxAge > 0 {
		cutoff := now().UTC().Add(-r.MaxAge)
		attrs = append(attrs, "older_than", cutoff)
		lockWait := PartitionsLockWait
		if r.LockWait > 0 {
			lockWait = r.LockWait
		}
		res.Days, err = r.Store.DropDaysBefore(ctx, cutoff, r.BatchSize, lockWait)
		r.logDays(res.Days)
		if err != nil {
			return res, err
		}
		// A key row is a lock anchor, created again when its key comes back.
		if res.Keys, err = r.drain(ctx, r.Store.DeleteKeysBefore, cutoff); err != nil {
			return res, err
		}
	}
	// After the callbacks: an event goes only once its callback has.
	if r.DedupeMaxAge > 0 {
		cutoff := now().UTC().Add(-r.DedupeMaxAge)
		attrs = append(attrs, "events_older_than", cutoff)
		if res.Events, err = r.dropEvents(ctx, cutoff); err != nil {
			return res, err
		}
	}
	if res.DeadLetters+res.Keys+res.Events > 0 {
		r.Log.Info("retention: deleted old rows", append([]any{"dead_letters", res.DeadLetters, "keys", res.Keys, "events", res.Events}, attrs...)...)
	}
	return res, ctx.Err()
}

// logDays logs each day dropped: its partitions, the rows the tables'
// statistics said they held, and the rows kept.
func (r *Retention) logDays(days []store.DroppedDay) {
	for _, d := range days {
		r.Log.Info("retention: dropped a day", "day_before", d.Below.Format(time.DateOnly), "partitions", d.Partitions,
			"rows_estimated", d.RowsEstimate, "kept_callbacks", d.KeptCallbacks, "kept_outbox", d.KeptOutbox)
	}
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
