package worker

import (
	"context"
	"sync/atomic"
	"time"

	"callgate/internal/callback"
	"callgate/internal/metrics"
)

// tally counts the attempts recorded while one ProcessBatch runs, for its
// summary line ("worker: batch processed"): observe adds to the tally its
// context carries.
type tally struct {
	succeeded, retried, failed atomic.Int64
}

type tallyKey struct{}

// withTally returns ctx carrying a new tally.
func withTally(ctx context.Context) (context.Context, *tally) {
	t := &tally{}
	return context.WithValue(ctx, tallyKey{}, t), t
}

// count adds one recorded attempt's outcome to ctx's tally, if it has one.
func count(ctx context.Context, outcome string) {
	t, _ := ctx.Value(tallyKey{}).(*tally)
	if t == nil {
		return
	}
	switch outcome {
	case "success":
		t.succeeded.Add(1)
	case "retry":
		t.retried.Add(1)
	case "failed":
		t.failed.Add(1)
	}
}

// logSummary logs one line for a batch that recorded anything (an
// operator watching `make run` sees the work done; each FAILED callback
// also has its own WARN line), at INFO; one that only skipped, deferred or
// held its callbacks is logged at DEBUG.
func (p *Processor) logSummary(ctx context.Context, callbacks int, t *tally, started time.Time) {
	s, r, f := t.succeeded.Load(), t.retried.Load(), t.failed.Load()
	args := []any{"callbacks", callbacks, "succeeded", s, "retried", r, "failed", f,
		"ms", time.Since(started).Milliseconds()}
	if s+r+f == 0 {
		p.Log.DebugContext(ctx, "worker: batch processed", args...)
		return
	}
	p.Log.InfoContext(ctx, "worker: batch processed", args...)
}

// observe counts one recorded attempt and its duration, in the metrics
// and in the batch's summary (ctx's tally).
func (p *Processor) observe(ctx context.Context, kind, outcome string, started time.Time) {
	count(ctx, outcome)
	p.Metrics.Processed.WithLabelValues(kind, outcome).Inc()
	p.Metrics.Attempts.WithLabelValues(kind).Inc()
	p.Metrics.ProcessingDuration.WithLabelValues(kind).Observe(metrics.Since(started))
}

// kindOf names a callback's kind for metrics, also when the run ended
// before the row was read.
func kindOf(cb *callback.Log) string {
	if cb.Kind == "" {
		return "unknown"
	}
	return cb.Kind
}
