// Package ingest is the step every way a callback arrives shares: a
// notification already verified and normalized (by the HTTP intake,
// internal/intake, from a platform's request; by reconciliation,
// internal/reconcile, from a platform's answer to a query) becomes
// PENDING callback_log rows, stored in order, the new ones announced to
// the workers. It holds the rules both follow: the rows made of a
// preset's callbacks (rows.go), which request or answer headers are kept
// with them (headers.go), storing them (InsertAll) and announcing the new
// ones (announce.go).
//
// It speaks no HTTP and decides no answer: the caller verifies, refuses
// and answers (intake the platform's request, reconcile its query's
// outcome). Storage itself is internal/store, announcing internal/broker.
package ingest

import (
	"context"
	"errors"

	"callgate/internal/callback"
	"callgate/internal/platform"
	"callgate/internal/store"
)

// Inserter stores a callback as PENDING, announces it when it is new, and
// says whether it was (store.Batcher with AnnounceNew as its hook, or
// OneByOne).
type Inserter interface {
	InsertCallback(ctx context.Context, l *callback.Log) (store.InsertResult, error)
}

var (
	_ Inserter = (*store.Batcher)(nil)
	_ Inserter = OneByOne{}
)

// InsertAll stores rows through ins one after the other, in their order,
// so that the log ids, and per-key processing, follow it (several
// callbacks in one request or answer are rare: an Adyen batch, a Stripe
// listing). It stops at the first row not stored and returns what the rows
// before it became, with the error. A row the primary alone holds
// (store.ErrNotReplicated) is stored and announced: the rows after it are
// stored too, and the first such error comes back with all of them; the
// caller says whether that counts (the intake answers 503 and the
// platform's resend finds duplicates; reconciliation counts it found).
func InsertAll(ctx context.Context, ins Inserter, rows []*callback.Log) ([]platform.Stored, error) {
	stored := make([]platform.Stored, 0, len(rows))
	var notReplicated error
	for _, row := range rows {
		res, err := ins.InsertCallback(ctx, row)
		switch {
		case errors.Is(err, store.ErrNotReplicated):
			if notReplicated == nil {
				notReplicated = err
			}
		case err != nil:
			return stored, err
		}
		stored = append(stored, platform.Stored{LogID: res.ID, Duplicate: res.Duplicate})
	}
	return stored, notReplicated
}
