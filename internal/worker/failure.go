package worker

import (
	"context"
	"time"

	"callgate/internal/callback"
	"callgate/internal/source"
	"callgate/internal/store"
)

// A failed attempt: whether an error is one, what it costs, recording it.

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
	// The budget counts from the last replay (attempts_base); a callback
	// waiting until a time (its order's grace) waits until it whatever
	// the budget, its next attempt no later than that time.
	until, waits := callback.WaitsUntil(cause)
	if callback.IsPermanent(cause) || attempt-cb.AttemptsBase >= retry.MaxAttempts && (!waits || !finished.Before(until)) {
		f.Final = true
		f.Attempt.Outcome = callback.OutcomeFailed
	} else if waits {
		f.NextAttemptAt = finished.Add(Backoff(retry, attempt))
		if f.NextAttemptAt.After(until) {
			f.NextAttemptAt = until
		}
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
		p.observe(ctx, cb.Kind, "failed", started)
		p.wakeNext(ctx, cb)
	} else {
		p.Metrics.Retries.WithLabelValues(cb.Kind).Inc()
		p.observe(ctx, cb.Kind, "retry", started)
		logger.InfoContext(logCtx, "worker: attempt failed, will retry", "error", msg, "next_attempt_at", f.NextAttemptAt,
			"awaiting", f.Awaiting)
		if f.Awaiting {
			// It no longer holds up its key: the later callbacks deferred
			// behind it run now (one of them may be what it waits for).
			p.wakeNext(ctx, cb)
		}
	}
}
