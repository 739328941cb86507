package worker

import (
	"context"
	"errors"
	"time"

	"callgate/internal/callback"
	"callgate/internal/outbox"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

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
		p.observe(workCtx, cb.Kind, "success", started)
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
