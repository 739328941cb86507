package worker

import (
	"context"
	"time"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/store"
)

// The per-key order: which callback of a key may run, and waking the next.

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
