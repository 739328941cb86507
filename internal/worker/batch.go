package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/outbox"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Batches: many callbacks in one transaction, each still its own unit of
// work.
//
// A batch is optimistic. Its transaction claims the callbacks with one
// locking read, checks per-key order and takes the key locks for all of
// them in a constant number of statements, runs each handler in id order,
// then writes every outbox row, settles every status and records every
// attempt with multi-row statements, and commits once. If anything goes
// wrong (a handler error, panic or timeout, a deadlock, a refused
// statement) the whole transaction rolls back and each callback of the
// batch runs again in a transaction of its own (Process): a failure never
// changes another callback's outcome or attempt count, and it is recorded
// exactly as with batch_size 1. Savepoints per callback were the other way
// to isolate callbacks; BENCHMARKS.md says why this one was chosen.

// errBatchAborted ends a batch's transaction so that its callbacks run one
// by one; it wraps what went wrong.
type batchAbort struct {
	logID int64
	err   error
}

func (e *batchAbort) Error() string {
	if e.logID == 0 {
		return fmt.Sprintf("batch aborted: %v", e.err)
	}
	return fmt.Sprintf("batch aborted by callback %d: %v", e.logID, e.err)
}
func (e *batchAbort) Unwrap() error { return e.err }

// batchRun is what one batch transaction did.
type batchRun struct {
	succeeded []callback.Log   // committed SUCCESS, in id order
	deferred  []callback.Log   // an earlier callback of their key, or the key's lock, is elsewhere
	held      []int64          // another transaction holds the row, or the key: run again later
	heldKinds map[int64]string // the kinds of those held by their key
	skipped   []callback.Log   // settled already (a redelivery), or not due (in its backoff)
	rows      []outbox.Row     // every outbox row the batch wrote
	started   time.Time
}

// ProcessBatch handles log ids (a delivery's, or several deliveries') and
// returns, per id, what to do with its message. With one id, or
// worker.batch_size 1, each callback is its own transaction (Process).
func (p *Processor) ProcessBatch(workCtx context.Context, ids []int64) map[int64]Result {
	out := make(map[int64]Result, len(ids))
	ids = uniqueSorted(ids)
	workCtx, t := withTally(workCtx)
	defer p.logSummary(workCtx, len(ids), t, time.Now())
	size := max(1, p.BatchSize)
	for start := 0; start < len(ids); start += size {
		chunk := ids[start:min(start+size, len(ids))]
		if len(chunk) == 1 || size == 1 {
			for _, id := range chunk {
				out[id] = p.Process(workCtx, id)
			}
			continue
		}
		p.processChunk(workCtx, chunk, out)
	}
	return out
}

// processChunk runs ids as one batch, or, when the batch cannot commit as
// a whole, one by one.
func (p *Processor) processChunk(workCtx context.Context, ids []int64, out map[int64]Result) {
	r, err := p.runBatch(workCtx, ids)
	switch {
	case err == nil:
		p.settleBatch(workCtx, r, out)
		// Not claimed: no such callback; nothing to do.
		for _, id := range ids {
			if _, ok := out[id]; !ok {
				out[id] = Ack
			}
		}
		return
	case workCtx.Err() != nil:
		// A stopping worker gave up: nothing was recorded, the messages
		// go back.
		for _, id := range ids {
			out[id] = Requeue
		}
		return
	}
	var abort *batchAbort
	if !errors.As(err, &abort) && store.IsUnavailable(err) && !errors.Is(err, context.DeadlineExceeded) {
		p.Log.WarnContext(workCtx, "worker: database unavailable, batch requeued", "callbacks", len(ids), "error", err)
		for _, id := range ids {
			out[id] = Requeue
		}
		return
	}
	reason := "transaction"
	if abort != nil {
		reason = "handler"
	}
	p.Metrics.BatchFallbacks.WithLabelValues(reason).Inc()
	p.Log.InfoContext(workCtx, "worker: batch rolled back, running its callbacks one by one", "callbacks", len(ids), "error", err)
	for _, id := range ids {
		out[id] = p.Process(workCtx, id)
	}
}

// runBatch is the batch's transaction. The deadline is per callback: the
// transaction gets HandlerTimeout for each callback it holds, and each
// handler call its own share (see runHandler and runBatchHandler), so a
// batch of slow but healthy handlers commits. The moment a handler call
// outlives its share, or the batch its whole, the transaction is ended on
// the server too (Store.InTxBounded), even while a handler that ignores
// its context still runs, and the batch runs one by one (a batchAbort),
// where the slow callback's attempt is recorded as timed out.
func (p *Processor) runBatch(workCtx context.Context, ids []int64) (*batchRun, error) {
	p.Metrics.BatchSizes.Observe(float64(len(ids)))
	r := &batchRun{started: time.Now().UTC()}
	deadlineCtx, cancel := context.WithTimeout(workCtx, p.HandlerTimeout*time.Duration(len(ids)))
	defer cancel()
	txCtx, abort := context.WithCancelCause(deadlineCtx)
	defer abort(nil)
	err := p.Store.InTxBounded(txCtx, func(tx *store.Tx) error {
		*r = batchRun{started: r.started}
		claimed, held, today, err := p.Store.ClaimCallbacksTx(txCtx, tx, ids)
		if err != nil {
			return err
		}
		r.held = held
		runnable, err := p.claimBatch(txCtx, tx, claimed, r)
		if err != nil {
			return err
		}
		notes, rows, err := p.runHandlers(txCtx, abort, tx, runnable, r.started)
		if err != nil {
			return err
		}
		// On the claim's day, which the fast path's marking SENT then
		// names (a statement by message_id alone reads every day
		// partition).
		for i := range rows {
			rows[i].RetainDay = today
		}
		r.rows = rows
		attempts := make([]callback.Attempt, 0, len(runnable))
		for i := range runnable {
			cb := &runnable[i]
			attempts = append(attempts, callback.Attempt{LogID: cb.ID, Attempt: cb.Attempts + 1, StartedAt: r.started,
				Outcome: callback.OutcomeSuccess, WorkerID: p.WorkerID, Note: notes[i]})
		}
		// The outbox rows last before the statuses: their created_at (the
		// database's clock) is as close to the commit as it gets.
		if err := p.Store.InsertOutboxTx(txCtx, tx, r.rows); err != nil {
			return err
		}
		finished := time.Now().UTC()
		for i := range attempts {
			attempts[i].FinishedAt = finished
		}
		if err := p.Store.MarkSucceededManyTx(txCtx, tx, runnable, attempts); err != nil {
			return err
		}
		r.succeeded = runnable
		return nil
	}, nil) // past its deadline the batch runs one by one, each with its own
	if err != nil && txCtx.Err() != nil && workCtx.Err() == nil {
		// Whatever the statements said after the kill (a lost
		// connection), the deadline ended the batch: never "database
		// unavailable", or a handler that always outlives it would be
		// requeued for ever without an attempt.
		return r, &batchAbort{err: fmt.Errorf("batch ended at its deadline: %w (%w)", context.Cause(txCtx), err)}
	}
	return r, err
}

// claimBatch sorts the claimed callbacks into those that run now (in id
// order) and those that wait, and takes the key locks of those that run.
// Per-key order across any number of workers: a key's callbacks run in the
// order of its PENDING ids, one after the other, while this transaction
// holds the key's callback_key row; of the batch's callbacks of a key, those
// that follow the key's earliest PENDING callback without a gap run, the
// others wait: behind an earlier one that is elsewhere, woken when their
// turn comes; or, when another transaction holds the key, run again after
// a pause.
func (p *Processor) claimBatch(ctx context.Context, tx *store.Tx, claimed []callback.Log, r *batchRun) ([]callback.Log, error) {
	var keys []store.Key
	byKey := map[store.Key][]int64{}
	var maxID int64
	now := time.Now()
	skip := func(cb *callback.Log) bool { return cb.Status.Terminal() || !cb.Due(now) }
	for _, cb := range claimed {
		if skip(&cb) {
			r.skipped = append(r.skipped, cb)
			continue
		}
		k := store.KeyOf(&cb)
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], cb.ID) // claimed is in id order
		maxID = max(maxID, cb.ID)
	}
	pending, err := p.Store.PendingOfKeysTx(ctx, tx, keys, maxID)
	if err != nil {
		return nil, err
	}
	turn := map[int64]bool{} // ids whose turn it is
	var ours []store.Key
	for _, k := range keys {
		if ids := turnsOf(byKey[k], pending[k]); len(ids) > 0 {
			ours = append(ours, k)
			for _, id := range ids {
				turn[id] = true
			}
		}
	}
	busy, err := p.Store.LockKeysTx(ctx, tx, ours)
	if err != nil {
		return nil, err
	}
	var runnable []callback.Log
	for _, cb := range claimed {
		switch {
		case skip(&cb):
		case turn[cb.ID] && busy[store.KeyOf(&cb)]:
			r.held = append(r.held, cb.ID) // runs again after a pause, see errKeyBusy
			if r.heldKinds == nil {
				r.heldKinds = map[int64]string{}
			}
			r.heldKinds[cb.ID] = cb.Kind
		case turn[cb.ID]:
			runnable = append(runnable, cb)
		default:
			r.deferred = append(r.deferred, cb)
		}
	}
	return runnable, nil
}

// turnsOf returns which of a key's batch callbacks (ids, in order) may
// run now, given the key's line of PENDING callbacks (in id order): those
// that nothing before them in the line holds up. A PENDING callback that
// does not run now holds up every later one; one that awaits what it
// depends on (callback.NotYet) holds up only later awaiting ones (see
// store.EarlierPendingTx).
func turnsOf(ids []int64, line []store.Pending) []int64 {
	inBatch := make(map[int64]bool, len(ids))
	for _, id := range ids {
		inBatch[id] = true
	}
	var turns []int64
	blockAll, blockAwaiting := false, false
	for _, e := range line {
		if inBatch[e.ID] && !blockAll && (!e.Awaiting || !blockAwaiting) {
			turns = append(turns, e.ID)
			continue
		}
		if e.Awaiting {
			blockAwaiting = true
		} else {
			blockAll = true
		}
	}
	return turns
}

// runHandlers runs the handlers of runnable in the batch's transaction,
// kind by kind, each kind's callbacks in id order (a key belongs to one
// kind, so per-key order holds), and returns each callback's note and
// every outbox row, in id order. A kind whose handler is a
// callback.BatchHandler handles all its callbacks of the batch in one call;
// any other kind one callback at a time. The first failure ends the batch
// (a batchAbort).
func (p *Processor) runHandlers(txCtx context.Context, abort context.CancelCauseFunc, tx *store.Tx, runnable []callback.Log, started time.Time) ([]*string, []outbox.Row, error) {
	for i := range runnable {
		if err := p.reread(txCtx, tx, &runnable[i]); err != nil {
			return nil, nil, &batchAbort{logID: runnable[i].ID, err: err}
		}
	}
	notes := make([]*string, len(runnable))
	rows := make([][]outbox.Row, len(runnable))
	var kinds []string
	byKind := map[string][]int{}
	for i := range runnable {
		k := runnable[i].Kind
		if byKind[k] == nil {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], i)
	}
	for _, kind := range kinds {
		idx := byKind[kind]
		h, _ := p.Registry.Handler(kind)
		if bh, ok := h.(callback.BatchHandler); ok && len(idx) > 1 {
			if err := p.runBatchHandler(txCtx, abort, tx, bh, runnable, idx, started, notes, rows); err != nil {
				return nil, nil, err
			}
			continue
		}
		for _, i := range idx {
			r, note, err := p.runHandler(txCtx, abort, tx, &runnable[i], started)
			if err != nil {
				return nil, nil, &batchAbort{logID: runnable[i].ID, err: err}
			}
			rows[i], notes[i] = r, note
		}
	}
	return notes, slices.Concat(rows...), nil
}

// runBatchHandler runs h over the callbacks runnable[idx...] of its kind
// with one call, each callback in its own span and with its own outbox
// writer, and fills their notes and rows.
func (p *Processor) runBatchHandler(txCtx context.Context, abort context.CancelCauseFunc, tx *store.Tx, h callback.BatchHandler, runnable []callback.Log, idx []int,
	started time.Time, notes []*string, rows [][]outbox.Row) error {
	cbs := make([]*callback.Log, len(idx))
	outs := make([]callback.Outbox, len(idx))
	writers := make([]*outbox.Writer, len(idx))
	for j, i := range idx {
		cb := &runnable[i]
		spanCtx, end := p.Tracing.StartFromTraceParent(txCtx, traceParentOf(cb), "callgate.process")
		defer end()
		cbs[j] = cb
		writers[j] = outbox.NewWriter(p.Store, tx, p.Exchange, cb, tracing.TraceParent(spanCtx), started)
		outs[j] = writers[j]
	}
	// The call's share of the batch's deadline: HandlerTimeout for each
	// of its callbacks.
	budget := p.HandlerTimeout * time.Duration(len(idx))
	handlerCtx, cancel := context.WithTimeout(txCtx, budget)
	defer cancel()
	defer abortAtDeadline(handlerCtx, abort, fmt.Errorf("handlers timed out after %s", budget))()
	errs := safeHandleBatch(handlerCtx, h, tx, cbs, outs)
	for j, i := range idx {
		note, err := noteOf(errs[j])
		if err != nil {
			return &batchAbort{logID: runnable[i].ID, err: err}
		}
		notes[i], rows[i] = note, writers[j].Rows()
	}
	if err := handlerCtx.Err(); err != nil {
		return &batchAbort{logID: runnable[idx[0]].ID, err: fmt.Errorf("handlers timed out after %s: %w", budget, err)}
	}
	return nil
}

// runHandler runs cb's handler in the batch's transaction, within
// HandlerTimeout, and returns the outbox rows it wrote. A handler that
// outlives its time fails the batch even if it returns nil.
func (p *Processor) runHandler(txCtx context.Context, abort context.CancelCauseFunc, tx *store.Tx, cb *callback.Log, started time.Time) ([]outbox.Row, *string, error) {
	h, ok := p.Registry.Handler(cb.Kind)
	if !ok {
		return nil, nil, callback.Permanentf("no handler for kind %q", cb.Kind)
	}
	spanCtx, end := p.Tracing.StartFromTraceParent(txCtx, traceParentOf(cb), "callgate.process")
	defer end()
	handlerCtx, cancel := context.WithTimeout(spanCtx, p.HandlerTimeout)
	defer cancel()
	defer abortAtDeadline(handlerCtx, abort, fmt.Errorf("handler of callback log %d timed out after %s", cb.ID, p.HandlerTimeout))()
	w := outbox.NewWriter(p.Store, tx, p.Exchange, cb, tracing.TraceParent(handlerCtx), started)
	note, err := safeHandle(handlerCtx, h, tx, cb, w)
	if err != nil {
		return nil, nil, err
	}
	if err := handlerCtx.Err(); err != nil {
		return nil, nil, fmt.Errorf("handler timed out after %s: %w", p.HandlerTimeout, err)
	}
	return w.Rows(), note, nil
}

// settleBatch acts on a committed batch: publish its outbox, count, wake
// the next callbacks of its keys, push back the deferred ones, and say
// every message may be acked.
func (p *Processor) settleBatch(workCtx context.Context, r *batchRun, out map[int64]Result) {
	for _, cb := range r.succeeded {
		if p.Hooks.AfterCommit != nil {
			p.Hooks.AfterCommit(cb.ID)
		}
	}
	p.countNotifications(r.rows)
	sent, perr := outbox.Deliver(workCtx, p.Marker, p.Publisher, r.rows)
	p.Metrics.OutboxPublished.WithLabelValues("fast").Add(float64(sent))
	if perr != nil {
		p.Log.WarnContext(workCtx, "worker: outbox left for the relay", "callbacks", len(r.succeeded), "error", perr)
	}
	keys := make([]store.Key, 0, len(r.succeeded))
	seen := map[store.Key]bool{}
	for i := range r.succeeded {
		cb := &r.succeeded[i]
		p.observe(workCtx, cb.Kind, "success", r.started)
		if k := store.KeyOf(cb); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		out[cb.ID] = Ack
	}
	p.wakeKeys(workCtx, keys)
	if len(r.deferred) > 0 {
		ids := make([]int64, len(r.deferred))
		for i := range r.deferred {
			ids[i] = r.deferred[i].ID
			p.Log.Debug("worker: callback deferred behind its key", "log_id", ids[i])
			p.Metrics.Processed.WithLabelValues(r.deferred[i].Kind, "deferred").Inc()
			out[ids[i]] = Ack
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(workCtx), 5*time.Second)
		if err := p.Store.PushBackMany(wctx, ids, time.Now().UTC().Add(p.ReannounceAfter)); err != nil {
			p.Log.Warn("worker: could not push back deferred callbacks", "callbacks", len(ids), "error", err)
		}
		cancel()
	}
	for _, cb := range r.skipped {
		p.Metrics.Processed.WithLabelValues(cb.Kind, "skipped").Inc()
		out[cb.ID] = Ack
	}
	for _, id := range r.held {
		out[id] = Held // announced again, alone, after a pause
		kind := r.heldKinds[id]
		if kind == "" {
			kind = "unknown" // its row held: not read
		}
		p.Metrics.Processed.WithLabelValues(kind, "held").Inc()
	}
	for _, cb := range r.succeeded {
		if p.Hooks.BeforeAck != nil {
			p.Hooks.BeforeAck(cb.ID)
		}
	}
}

// wakeKeys announces the earliest PENDING callback of each key (which may
// have been deferred while the batch held the key), one announcement per
// kind.
func (p *Processor) wakeKeys(ctx context.Context, keys []store.Key) {
	if len(keys) == 0 {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	next, err := p.Store.NextPendingOfKeys(wctx, keys)
	if err != nil {
		p.Log.Warn("worker: could not look for the next callbacks of the batch's keys", "keys", len(keys), "error", err)
		return
	}
	for _, cb := range next {
		p.Log.Debug("worker: waking the next callback of a key", "log_id", cb.ID)
	}
	announceByKind(p.Announcer, next)
}

// announceByKind announces callbacks, one announcement per kind.
func announceByKind(a Announcer, cbs []callback.Log) {
	for _, an := range broker.Announcements(len(cbs), func(i int) string { return cbs[i].Kind }, func(i int) int64 { return cbs[i].ID },
		func(i int) string { return traceParentOf(&cbs[i]) }) {
		a.Announce(an)
	}
}

// uniqueSorted returns ids sorted, without repeats.
func uniqueSorted(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// abortAtDeadline ends the batch (abort, with cause) the moment
// handlerCtx's own deadline passes, rather than when the handler returns,
// which a handler that ignores its context may never do in time. It
// returns the function that stops watching.
func abortAtDeadline(handlerCtx context.Context, abort context.CancelCauseFunc, cause error) (stop func()) {
	unwatch := context.AfterFunc(handlerCtx, func() {
		if errors.Is(handlerCtx.Err(), context.DeadlineExceeded) {
			abort(cause)
		}
	})
	return func() { unwatch() }
}
