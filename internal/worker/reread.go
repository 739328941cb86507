package worker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"callgate/internal/callback"
	"callgate/internal/platform"
	"callgate/internal/store"
)

// reread reads again, from its raw body, a stored notification (or query
// answer) that its preset could not read when it arrived
// (callback.Unreadable): its
// signature and merchant held then, so it was kept rather than refused.
// If its source's preset (as configured now: a replay after a
// configuration fix) reads it, the event is stored in the row and the
// callback runs on; otherwise it fails for good with the reason, and no
// handler runs.
func (p *Processor) reread(ctx context.Context, tx *store.Tx, cb *callback.Log) error {
	reason, ok := callback.UnreadableReason(cb.Normalized)
	if !ok {
		return nil
	}
	plat := p.Platforms[cb.Source]
	if plat == nil {
		return callback.Permanent(errors.New(reason))
	}
	var stored map[string]string
	_ = json.Unmarshal(cb.Headers, &stored)
	h := http.Header{}
	for k, v := range stored {
		h.Set(k, v)
	}
	var cbs []platform.Callback
	var err error
	if answers, ok := plat.(platform.Answerer); ok && cb.Origin == callback.OriginReconcile {
		// A query's answer, read as one (its business key is what was
		// asked about: the order, or the waybill).
		cbs, err = answers.ReadAnswer(cb.BusinessKey, cb.Payload)
	} else {
		cbs, err = plat.Reread(platform.Request{Header: h, Body: cb.Payload, Now: cb.ReceivedAt})
	}
	if err != nil {
		return callback.Permanentf("the notification could not be read: %w", err)
	}
	for _, c := range cbs {
		if c.EventID != cb.EventID {
			continue
		}
		if c.Unreadable != "" {
			return callback.Permanent(errors.New(c.Unreadable))
		}
		normalized, err := callback.MarshalEvent(c.Event)
		if err != nil {
			return callback.Permanentf("the notification could not be read: %w", err)
		}
		if err := p.Store.SetNormalizedTx(ctx, tx, cb.ID, normalized); err != nil {
			return err
		}
		cb.Normalized = normalized
		return nil
	}
	return callback.Permanentf("%s (read again, the notification holds no event %s)", reason, cb.EventID)
}
