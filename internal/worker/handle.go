package worker

import (
	"context"
	"fmt"
	"runtime/debug"

	"callgate/internal/callback"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Calling the handlers: panics, notes, the trace.

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
