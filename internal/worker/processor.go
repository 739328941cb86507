package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/metrics"
	"callgate/internal/outbox"
	"callgate/internal/platform"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Result says what to do with the message that carried a log id.
type Result int

const (
	// Ack: the callback is settled for now (processed, skipped, deferred,
	// retry scheduled, or failed); the message is done.
	Ack Result = iota
	// Requeue: the database is unavailable; nothing was recorded and the
	// message goes back to the broker for later.
	Requeue
	// Held: another transaction holds the callback's row or its key right
	// now; nothing was recorded and it runs again after a pause, alone,
	// without holding a worker slot meanwhile.
	Held
)

// Announcer queues a log id for the workers without blocking.
type Announcer interface {
	Announce(an broker.Announcement) bool
}

// Processor runs one callback in its own transaction.
type Processor struct {
	Store    *store.Store
	Registry *callback.Registry
	// Retry holds each source's retry policy, by source name.
	Retry map[string]source.Retry
	// Platforms are the enabled presets, by source name: they read a
	// stored notification that could not be read again (Reread).
	Platforms map[string]platform.Platform
	// Exchange is the downstream exchange outbox rows go to.
	Exchange string
	// Publisher publishes outbox rows after commit.
	Publisher outbox.Publisher
	// Marker records them SENT, sharing statements between callbacks.
	Marker outbox.Marker
	// Announcer wakes the next callback of a key.
	Announcer Announcer
	// ReannounceAfter is the safety net of a deferred callback.
	ReannounceAfter time.Duration
	// HandlerTimeout bounds a handler, and a transaction.
	HandlerTimeout time.Duration
	// BatchSize is the most callbacks one transaction processes; 1 is one
	// transaction per callback.
	BatchSize int
	WorkerID  string
	Log       *slog.Logger
	Metrics   *metrics.Metrics
	// Tracing records spans when an OTLP endpoint is configured (nil: off).
	Tracing *tracing.SpanRecorder
	// Hooks lets tests stop the process at a chosen point (fault tests).
	Hooks Hooks
}

// Hooks are test seams around the commit; nil ones are skipped. The fault
// tests use them to kill the process at the worst moments.
type Hooks struct {
	// AfterCommit runs after the transaction committed, before the outbox
	// is published and the message acked.
	AfterCommit func(logID int64)
	// BeforeAck runs after the outbox was published, before the ack.
	BeforeAck func(logID int64)
}

// Outcomes of the claim besides a callback to run.
var (
	errTerminal = errors.New("callback already terminal")
	errDeferred = errors.New("an earlier callback of the same key is not finished")
	// errKeyBusy: another transaction holds the key now (its callback of
	// the key is running, or a batch holding it is rolling back): the
	// callback tries again after a pause, rather than wait for a wake-up
	// that a holder which rolls back would never send.
	errKeyBusy = errors.New("another transaction holds the key")
	// errNotDue: the callback's last attempt failed and its backoff has
	// not ended; whatever delivered its id now (a message redelivered with
	// its mates, a key's wake-up), the compensation job announces it when
	// it is due.
	errNotDue = errors.New("callback not due: its backoff has not ended")
)

// Prompt retries of a transaction that met contention.
const (
	// contentionRetries is how often a transaction that hit a deadlock or
	// lock wait timeout is run again at once, not counted as an attempt.
	contentionRetries = 5
	// contentionPause is the most a retry waits first (jittered).
	contentionPause = 50 * time.Millisecond
)

// run is the outcome of one transaction over a callback.
type run struct {
	cb        callback.Log
	rows      []outbox.Row
	handleErr error // what the handler returned (or its panic)
	err       error // what ended the transaction (handleErr or our own)
	timedOut  bool  // the transaction outlived HandlerTimeout
	// failed is the handler's failed attempt, recorded in the
	// transaction (which committed it) once the handler's changes were
	// rolled back to the savepoint before it.
	failed *store.Failure
	// expired is what the deadline's watchdog did, when the transaction
	// outlived HandlerTimeout.
	expired expiry
}

// expiry is the timed-out attempt the watchdog recorded the moment the
// deadline passed (the transaction ended on the server first), while the
// handler may still have been running.
type expiry struct {
	failure *store.Failure // recorded
	stale   bool           // a row says the callback was settled meanwhile
	err     error          // could not be recorded
}

// Process handles one log id in a transaction of its own (batch_size 1,
// and each callback of a batch that could not commit as a whole). It never
// returns an error: every outcome is recorded in the database, and the
// Result tells the caller whether to ack. The callback's trace is its
// row's.
//
// workCtx is the delivery's context: it ends only when a stopping worker
// gives up on its in-flight callbacks, and then nothing is recorded and
// the message goes back to the broker.
func (p *Processor) Process(workCtx context.Context, logID int64) Result {
	var (
		r       run
		started time.Time
	)
	for try := 0; ; try++ {
		started = time.Now().UTC()
		r = p.runOnce(workCtx, logID, started)
		// A claim that could not read the row (another transaction holds
		// it: a duplicate delivery at work) is not run again here: the
		// callback runs again later, alone, and its mates go on.
		if r.timedOut || workCtx.Err() != nil || !store.IsTransient(r.err) || r.cb.ID == 0 || try == contentionRetries {
			break
		}
		// Contention with another transaction (deadlock, lock wait
		// timeout): not the callback's fault, so not an attempt.
		p.Metrics.TransactionRetries.WithLabelValues(kindOf(&r.cb), contentionReason(r.err)).Inc()
		p.Log.InfoContext(workCtx, "worker: transaction met contention, running it again", "log_id", logID, "try", try+1, "error", r.err)
		select {
		case <-workCtx.Done():
		case <-time.After(time.Duration(rand.Int64N(int64(contentionPause)))):
		}
	}
	return p.settle(workCtx, logID, &r, started)
}

// runOnce claims the callback (locked read, per-key order, key lock), runs
// its handler and, if it succeeds, writes the outbox rows, the SUCCESS and
// the attempt, all in one transaction bounded by HandlerTimeout.
func (p *Processor) runOnce(workCtx context.Context, logID int64, started time.Time) run {
	var r run
	txCtx, cancel := context.WithTimeout(workCtx, p.HandlerTimeout)
	defer cancel()
	var mu sync.Mutex // claimed and r.expired, shared with the watchdog
	var claimed *callback.Log
	var pending *store.Failure // the timed-out attempt the watchdog records
	// The watchdog: the moment the deadline passes, the transaction is
	// ended on the server and the attempt recorded as timed out, in a
	// transaction that takes the row over as the expired one lets it go
	// (so nothing else claims it in between), even while a handler that
	// ignores its context still runs.
	takeover := &store.Takeover{
		Row: func() int64 {
			mu.Lock()
			defer mu.Unlock()
			if claimed == nil || workCtx.Err() != nil || !errors.Is(txCtx.Err(), context.DeadlineExceeded) {
				return 0 // not claimed yet (nothing known to record), or a stopping worker
			}
			return claimed.ID
		},
		Then: func(ctx context.Context, tx *store.Tx) error {
			mu.Lock()
			cb := claimed
			mu.Unlock()
			f := p.failure(cb, started, fmt.Errorf("handler timed out after %s", p.HandlerTimeout))
			pending = &f
			return p.Store.RecordFailureTx(ctx, tx, f)
		},
		Done: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, store.ErrStale):
				r.expired.stale = true
			case err != nil:
				r.expired.err = err
			default:
				r.expired.failure = pending
			}
		},
	}
	err := p.Store.InTxBounded(txCtx, func(tx *store.Tx) error {
		cb, err := p.claim(txCtx, tx, logID)
		if cb != nil {
			r.cb = *cb
		}
		if err != nil {
			return err
		}
		mu.Lock()
		claimed = &r.cb
		mu.Unlock()
		h, ok := p.Registry.Handler(cb.Kind)
		if !ok {
			r.handleErr = callback.Permanentf("no handler for kind %q", cb.Kind)
			return r.handleErr
		}
		// The callback's own trace, from its row.
		handlerCtx, end := p.Tracing.StartFromTraceParent(txCtx, traceParentOf(cb), "callgate.process")
		defer end()
		w := outbox.NewWriter(p.Store, tx, p.Exchange, cb, tracing.TraceParent(handlerCtx), started)
		// The handler's changes can be undone without letting the row
		// go: a failed attempt is recorded in this transaction, so no
		// other delivery of the callback runs between the two.
		if err := p.Store.SavepointTx(txCtx, tx); err != nil {
			return err
		}
		var note *string
		if r.handleErr = p.reread(txCtx, tx, cb); r.handleErr == nil {
			note, r.handleErr = safeHandle(handlerCtx, h, tx, cb, w)
		}
		if r.handleErr != nil {
			if !isAttempt(r.handleErr) || txCtx.Err() != nil {
				return r.handleErr // rolled back whole; settle decides
			}
			if err := p.Store.RollbackToSavepointTx(txCtx, tx); err != nil {
				return r.handleErr
			}
			f := p.failure(cb, started, r.handleErr)
			if err := p.Store.RecordFailureTx(txCtx, tx, f); err != nil {
				return err
			}
			r.failed = &f
			return nil
		}
		if err := w.Flush(txCtx); err != nil {
			return err
		}
		if err := p.Store.MarkSucceededTx(txCtx, tx, &callback.Attempt{LogID: cb.ID, Attempt: cb.Attempts + 1, StartedAt: started,
			FinishedAt: time.Now().UTC(), Outcome: callback.OutcomeSuccess, WorkerID: p.WorkerID, Note: note}); err != nil {
			return err
		}
		r.rows = w.Rows()
		return nil
	}, takeover)
	mu.Lock()
	defer mu.Unlock()
	r.err = err
	// The deadline, not the error, says whether the handler outlived its
	// time: a handler that ignores its context returns nil and the commit
	// fails instead.
	r.timedOut = r.err != nil && errors.Is(txCtx.Err(), context.DeadlineExceeded) && workCtx.Err() == nil
	return r
}

// claim locks the callback's row and checks that it may run now.
//
// A callback whose last attempt failed does not run before its backoff
// ends (retry_after), whatever delivered its id.
//
// Per-key ordering, across any number of workers:
//  1. only the earliest PENDING callback of a key runs: a later one is
//     deferred, and woken when the earlier one settles;
//  2. the key's callback_key row is locked (NOWAIT) for the whole
//     transaction, so two callbacks of one key never run at once (e.g.
//     when their inserts committed out of id order); a callback that finds
//     the key busy runs again after a pause (the holder may roll back
//     rather than settle and wake it).
//
// A deferral costs no worker slot, so a slow key never holds up another.
func (p *Processor) claim(ctx context.Context, tx *store.Tx, logID int64) (*callback.Log, error) {
	cb, err := p.Store.TryClaimCallbackTx(ctx, tx, logID)
	if err != nil {
		return nil, err
	}
	if cb.Status.Terminal() {
		return cb, errTerminal
	}
	if !cb.Due(time.Now()) {
		return cb, errNotDue
	}
	if earlier, err := p.Store.EarlierPendingTx(ctx, tx, cb); err != nil {
		return cb, err
	} else if earlier {
		return cb, errDeferred
	}
	if busy, err := p.Store.LockKeyTx(ctx, tx, cb.Kind, cb.BusinessKey); err != nil {
		return cb, err
	} else if busy {
		return cb, errKeyBusy
	}
	return cb, nil
}

// settle acts on a run's outcome: publish and ack after a commit, defer,
// skip, requeue, or record the failed attempt.
func (p *Processor) settle(workCtx context.Context, logID int64, r *run, started time.Time) Result {
	cb := &r.cb
	logger := p.Log.With("log_id", logID)
	logCtx := workCtx
	if cb.TraceID != "" && tracing.TraceID(workCtx) != cb.TraceID {
		logCtx = tracing.FromTraceParent(workCtx, traceParentOf(cb))
	}
	switch {
	case r.err == nil && r.failed != nil:
		p.afterFailure(workCtx, logCtx, cb, started, r.failed)
		return Ack
	case r.err == nil:
		if p.Hooks.AfterCommit != nil {
			p.Hooks.AfterCommit(logID)
		}
		p.countNotifications(r.rows)
		sent, perr := outbox.Deliver(workCtx, p.Marker, p.Publisher, r.rows)
		p.Metrics.OutboxPublished.WithLabelValues("fast").Add(float64(sent))
		if perr != nil {
			logger.WarnContext(logCtx, "worker: outbox left for the relay", "error", perr)
		}
		p.observe(cb.Kind, "success", started)
		p.wakeNext(workCtx, cb)
		logger.DebugContext(logCtx, "worker: callback processed", "kind", cb.Kind, "messages", len(r.rows))
		if p.Hooks.BeforeAck != nil {
			p.Hooks.BeforeAck(logID)
		}
		return Ack
	case errors.Is(r.err, store.ErrNotFound):
		logger.WarnContext(logCtx, "worker: no such callback, dropping message")
		return Ack
	case errors.Is(r.err, errTerminal):
		logger.DebugContext(logCtx, "worker: callback already settled", "status", cb.Status)
		p.Metrics.Processed.WithLabelValues(cb.Kind, "skipped").Inc()
		return Ack
	case errors.Is(r.err, errNotDue):
		logger.DebugContext(logCtx, "worker: callback not due yet, left to its backoff", "retry_after", cb.RetryAfter)
		p.Metrics.Processed.WithLabelValues(cb.Kind, "skipped").Inc()
		return Ack
	case errors.Is(r.err, errDeferred):
		logger.DebugContext(logCtx, "worker: callback deferred behind an earlier one of its key")
		p.deferCallback(workCtx, cb)
		p.Metrics.Processed.WithLabelValues(cb.Kind, "deferred").Inc()
		return Ack
	case errors.Is(r.err, errKeyBusy):
		logger.DebugContext(logCtx, "worker: key busy, callback runs again after a pause")
		p.Metrics.Processed.WithLabelValues(cb.Kind, "held").Inc()
		return Held
	case workCtx.Err() != nil:
		// A stopping worker gave up on this callback: it was not the
		// callback's fault, nothing is recorded, the message goes back.
		logger.InfoContext(logCtx, "worker: callback interrupted by shutdown, message returned", "error", r.err)
		return Requeue
	case cb.ID == 0:
		// The claim could not read the row (another transaction holds
		// it: a duplicate delivery at work; or the statement failed):
		// nothing is known of the callback, so nothing is recorded, never
		// "settled by another delivery", and it alone runs again.
		if errors.Is(r.err, store.ErrLockNotAvailable) {
			logger.DebugContext(logCtx, "worker: callback held by another transaction, runs again after a pause")
			p.Metrics.Processed.WithLabelValues(kindOf(cb), "held").Inc()
			return Held
		}
		if r.timedOut || store.IsUnavailable(r.err) || store.IsTransient(r.err) {
			logger.WarnContext(logCtx, "worker: could not claim the callback, runs again after a pause", "error", r.err)
			return Requeue
		}
		// A claim the database refused for good (a row that cannot be
		// read): running it again at once would loop. The row stays
		// PENDING for the compensation job, and the error is for us.
		logger.ErrorContext(logCtx, "worker: could not claim the callback, left to the compensation job", "error", r.err)
		p.Metrics.Processed.WithLabelValues(kindOf(cb), "unclaimable").Inc()
		return Ack
	case r.timedOut:
		// The watchdog recorded the attempt when the deadline passed.
		switch e := r.expired; {
		case e.failure != nil:
			p.afterFailure(workCtx, logCtx, cb, started, e.failure)
			return Ack
		case e.stale:
			// Its row changed: another delivery settled it, or this
			// transaction's COMMIT reached the server just as the deadline
			// passed. The relay publishes what it wrote; wake its key.
			logger.InfoContext(logCtx, "worker: callback settled meanwhile (another delivery, or its commit at the deadline)")
			p.wakeNext(workCtx, cb)
			return Ack
		default:
			logger.WarnContext(logCtx, "worker: could not record the timed-out attempt, callback runs again", "error", e.err)
			return Requeue
		}
	}
	cause := r.handleErr
	if cause == nil {
		cause = r.err // our own queries failed (lock, update, commit)
	}
	if !callback.IsPermanent(cause) && (store.IsUnavailable(cause) || store.IsUnavailable(r.err) || store.IsTransient(cause)) {
		// Not the callback's fault (the database is away, or contention
		// outlasted the prompt retries): record nothing and let the broker
		// redeliver.
		logger.WarnContext(logCtx, "worker: database unavailable or contended, message requeued", "error", cause)
		return Requeue
	}
	return p.recordFailure(workCtx, logCtx, cb, started, cause)
}

// isAttempt reports a handler's error that is the callback's failed
// attempt: anything but contention and a failure of callgate's own
// database connection, which are not the callback's fault.
func isAttempt(err error) bool {
	return callback.IsPermanent(err) || (!store.IsUnavailable(err) && !store.IsTransient(err))
}

// failure is the failed attempt of cb that cause ends: FAILED at once for a
// permanent error or the last attempt of the budget, otherwise PENDING
// with its next attempt after the source's backoff (or the RetryAfter the
// handler asked for).
func (p *Processor) failure(cb *callback.Log, started time.Time, cause error) store.Failure {
	retry, ok := p.Retry[cb.Source]
	if !ok { // a source removed from the config since the callback came in
		retry = source.Retry{}.WithDefaults()
	}
	attempt := cb.Attempts + 1
	finished := time.Now().UTC()
	msg := callback.Truncate(cause.Error(), 4000)
	f := store.Failure{Attempt: callback.Attempt{LogID: cb.ID, Attempt: attempt, StartedAt: started, FinishedAt: finished,
		Outcome: callback.OutcomeRetry, Error: &msg, WorkerID: p.WorkerID}, Reason: callback.ReasonOf(cause)}
	// The budget counts from the last replay (attempts_base).
	if callback.IsPermanent(cause) || attempt-cb.AttemptsBase >= retry.MaxAttempts {
		f.Final = true
		f.Attempt.Outcome = callback.OutcomeFailed
	} else if d, ok := callback.RetryDelay(cause); ok {
		// At most the source's longest backoff: the stuck job takes a
		// next attempt further away than that for a clock gone wrong.
		f.NextAttemptAt = finished.Add(min(d, retry.Max))
	} else {
		f.NextAttemptAt = finished.Add(Backoff(retry, attempt))
	}
	f.Awaiting = !f.Final && callback.IsNotYet(cause)
	return f
}

// recordFailure writes the failed attempt in its own short transaction,
// for an attempt whose transaction could not record it (it outlived its
// deadline and was ended on the server): see failure.
func (p *Processor) recordFailure(ctx, logCtx context.Context, cb *callback.Log, started time.Time, cause error) Result {
	f := p.failure(cb, started, cause)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	stale, err := p.Store.RecordFailure(wctx, f)
	if err != nil {
		p.Log.WarnContext(logCtx, "worker: could not record failed attempt, message requeued", "log_id", cb.ID, "error", err,
			"cause", *f.Attempt.Error)
		return Requeue
	}
	if stale {
		p.Log.InfoContext(logCtx, "worker: callback settled by another delivery meanwhile", "log_id", cb.ID, "cause", *f.Attempt.Error)
		return Ack
	}
	p.afterFailure(ctx, logCtx, cb, started, &f)
	return Ack
}

// afterFailure counts and logs a recorded failed attempt, and wakes the
// next callback of the key when this one is FAILED for good.
func (p *Processor) afterFailure(ctx, logCtx context.Context, cb *callback.Log, started time.Time, f *store.Failure) {
	msg := *f.Attempt.Error
	logger := p.Log.With("log_id", cb.ID, "source", cb.Source, "attempt", f.Attempt.Attempt)
	if f.Final {
		logger.WarnContext(logCtx, "worker: callback FAILED", "error", msg)
		p.Metrics.FailedTransitions.WithLabelValues(cb.Kind).Inc()
		p.Metrics.FailedReasons.WithLabelValues(cb.Kind, f.Reason).Inc()
		p.observe(cb.Kind, "failed", started)
		p.wakeNext(ctx, cb)
	} else {
		p.Metrics.Retries.WithLabelValues(cb.Kind).Inc()
		p.observe(cb.Kind, "retry", started)
		logger.InfoContext(logCtx, "worker: attempt failed, will retry", "error", msg, "next_attempt_at", f.NextAttemptAt,
			"awaiting", f.Awaiting)
		if f.Awaiting {
			// It no longer holds up its key: the later callbacks deferred
			// behind it run now (one of them may be what it waits for).
			p.wakeNext(ctx, cb)
		}
	}
}

// observe counts one recorded attempt and its duration.
func (p *Processor) observe(kind, outcome string, started time.Time) {
	p.Metrics.Processed.WithLabelValues(kind, outcome).Inc()
	p.Metrics.Attempts.WithLabelValues(kind).Inc()
	p.Metrics.ProcessingDuration.WithLabelValues(kind).Observe(metrics.Since(started))
}

// deferCallback leaves a callback that must wait for an earlier one of its
// key. The earlier one wakes it when it settles; next_attempt_at is the
// safety net should that wake-up be lost.
func (p *Processor) deferCallback(ctx context.Context, cb *callback.Log) {
	due := time.Now().UTC().Add(p.ReannounceAfter)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.Store.PushBack(wctx, cb.ID, due); err != nil {
		p.Log.Warn("worker: could not push back a deferred callback", "log_id", cb.ID, "error", err)
	}
}

// wakeNext announces the earliest unfinished callback of cb's key, which
// may have been deferred while cb ran.
func (p *Processor) wakeNext(ctx context.Context, cb *callback.Log) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	next, err := p.Store.NextPendingOfKey(wctx, cb.Kind, cb.BusinessKey, cb.ID)
	if err != nil {
		return
	}
	for i := range next {
		p.Log.Debug("worker: waking the next callback of a key", "log_id", next[i].ID)
		p.Announcer.Announce(broker.Announcement{LogIDs: []int64{next[i].ID}, Kind: next[i].Kind, TraceParent: traceParentOf(&next[i])})
	}
}

// safeHandle runs the handler, turning a panic into a permanent failure:
// a handler that panics on a callback will panic again.
// A handler's NoEffect is a success whose note (the reason) goes into the
// attempt.
func safeHandle(ctx context.Context, h callback.Handler, tx *store.Tx, cb *callback.Log, out callback.Outbox) (note *string, err error) {
	defer func() {
		if r := recover(); r != nil {
			note, err = nil, callback.Permanentf("handler panic: %v\n%s", r, callback.Truncate(string(debug.Stack()), 2000))
		}
	}()
	return noteOf(h.Handle(ctx, tx.Gorm(), cb, out))
}

// safeHandleBatch is safeHandle for a batch handler: a panic fails the
// batch's first callback (the batch then runs one by one, where the panic
// is pinned on its callback). It returns one error per callback.
func safeHandleBatch(ctx context.Context, h callback.BatchHandler, tx *store.Tx, cbs []*callback.Log, outs []callback.Outbox) (errs []error) {
	defer func() {
		if r := recover(); r != nil {
			errs = make([]error, len(cbs))
			errs[0] = callback.Permanentf("handler panic: %v\n%s", r, callback.Truncate(string(debug.Stack()), 2000))
		}
	}()
	errs = h.HandleBatch(ctx, tx.Gorm(), cbs, outs)
	if n := len(errs); n != len(cbs) {
		errs = make([]error, len(cbs))
		errs[0] = fmt.Errorf("batch handler returned %d results for %d callbacks", n, len(cbs))
	}
	return errs
}

// noteOf turns a handler's NoEffect into the attempt's note; any other
// error stays an error.
func noteOf(err error) (*string, error) {
	if reason, ok := callback.AsNote(err); ok {
		reason = callback.Truncate(reason, maxNoteLen)
		return &reason, nil
	}
	return nil, err
}

// maxNoteLen is what callback_attempt.note holds.
const maxNoteLen = 500

// traceParentOf continues the stored trace, so the worker's logs and the
// downstream messages carry the platform's trace id.
func traceParentOf(cb *callback.Log) string { return tracing.TraceParentFromID(cb.TraceID) }

// kindOf names a callback's kind for metrics, also when the run ended
// before the row was read.
func kindOf(cb *callback.Log) string {
	if cb.Kind == "" {
		return "unknown"
	}
	return cb.Kind
}

// contentionReason labels a deadlock or a lock wait timeout.
func contentionReason(err error) string {
	if store.IsDeadlock(err) {
		return "deadlock"
	}
	return "lock_wait_timeout"
}
