package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
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
		if err := p.Store.MarkSucceededTx(txCtx, tx, cb, &callback.Attempt{LogID: cb.ID, Attempt: cb.Attempts + 1, StartedAt: started,
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

// contentionReason labels a deadlock or a lock wait timeout.
func contentionReason(err error) string {
	if store.IsDeadlock(err) {
		return "deadlock"
	}
	return "lock_wait_timeout"
}
