package intake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"callgate/internal/callback"
	"callgate/internal/platform"
)

// presetCallback serves a source with a preset: the platform verifies and
// reads the request into its callbacks (one, or several for Adyen), each is
// stored with its normalized event beside the raw body, and the platform's
// own answer goes back. A request with any unusable callback stores
// nothing; a callback whose signature and merchant held but which the
// preset could not read is stored as unreadable (see callback.Unreadable)
// and answered as accepted, so the platform stops resending what a replay
// can read once the configuration is fixed, within the source's
// dead-letter limit (deadletters.go; past it 429, nothing stored). If
// storing fails part way (a 503), the callbacks stored before stay, and
// the platform's resend finds them as duplicates.
func (h *Handler) presetCallback(c *gin.Context, src *Source, body []byte, now time.Time) {
	ctx := c.Request.Context()
	cbs, err := src.Platform.Read(platform.Request{Header: c.Request.Header, Body: body, Now: now})
	if err != nil {
		if platform.IsUnauthenticated(err) {
			h.refuse(c, src, http.StatusUnauthorized, "invalid signature: "+err.Error(), nil)
			return
		}
		if platform.IsForeignMerchant(err) {
			h.refuse(c, src, http.StatusForbidden, err.Error(), nil)
			return
		}
		h.refuse(c, src, http.StatusBadRequest, err.Error(), nil)
		return
	}
	if len(cbs) == 0 {
		h.refuse(c, src, http.StatusBadRequest, "the request holds no notification", nil)
		return
	}
	if h.overLimit(c, src) {
		return
	}
	template := h.newRow(c, src, "", "", body, now)
	// The unreadable ones are logged once stored (settleDeadLetters).
	rows, err := PresetRows(template, cbs, nil)
	if err != nil {
		h.refuse(c, src, http.StatusBadRequest, err.Error(), nil)
		return
	}
	dead := deadLetterRows(cbs)
	charged, ok := h.chargeDeadLetters(c, src, rows, dead, now)
	if !ok {
		return
	}
	stored, err := h.insertAll(ctx, rows)
	if err != nil {
		// What was charged stays spent: the rows before the failure are
		// stored.
		h.storeFailed(c, src, err)
		return
	}
	h.settleDeadLetters(c, src, cbs, rows, stored, dead, charged)
	dup := true
	for _, s := range stored {
		dup = dup && s.Duplicate
	}
	c.Set(ctxDuplicate, dup)
	write(c, src.Platform.Accepted(stored))
}

// PresetRows makes the rows the intake stores of the callbacks a preset
// read (from a notification, or, with template.Origin reconcile, from a
// platform's answer to a query): one per callback, a copy of template
// (source, kind, body, headers, trace, times) with the callback's event id,
// business key and canonical event. A callback that is signed and ours but
// unreadable is kept (FAILED with the reason by the worker) and reported to
// unreadable. An error is a reason to refuse them all, nothing stored.
func PresetRows(template *callback.Log, cbs []platform.Callback, unreadable func(platform.Callback)) ([]*callback.Log, error) {
	rows := make([]*callback.Log, len(cbs))
	for i, cb := range cbs {
		if err := checkIDs(cb); err != nil {
			return nil, err
		}
		event := cb.Event
		if cb.Unreadable != "" {
			event = callback.Unreadable{Reason: callback.Truncate(cb.Unreadable, 2000)}
			if unreadable != nil {
				unreadable(cb)
			}
		}
		normalized, err := callback.MarshalEvent(event)
		if err != nil || len(normalized) > callback.MaxNormalizedBytes {
			return nil, errors.New("the notification's fields are too large")
		}
		row := *template
		row.EventID, row.BusinessKey, row.Normalized = cb.EventID, cb.BusinessKey, normalized
		rows[i] = &row
	}
	return rows, nil
}

// insertAll stores rows one after the other, in the request's order, so
// that the log ids, and per-key processing, follow it (several callbacks
// in one request are rare: Adyen's JSON webhooks carry one item).
func (h *Handler) insertAll(ctx context.Context, rows []*callback.Log) ([]platform.Stored, error) {
	sctx, cancel := context.WithTimeout(ctx, h.StoreTimeout)
	defer cancel()
	stored := make([]platform.Stored, len(rows))
	for i, row := range rows {
		res, err := h.Store.InsertCallback(sctx, row)
		if err != nil {
			return nil, err
		}
		stored[i] = platform.Stored{LogID: res.ID, Duplicate: res.Duplicate}
	}
	return stored, nil
}

// checkIDs refuses an event id or business key the columns cannot hold or
// a person could not read back.
func checkIDs(cb platform.Callback) error {
	switch {
	case cb.EventID == "":
		return fmt.Errorf("the notification has no event id")
	case len(cb.EventID) > callback.MaxEventIDLen:
		return fmt.Errorf("event id is longer than %d characters", callback.MaxEventIDLen)
	case cb.BusinessKey == "":
		return fmt.Errorf("the notification has no order or waybill number")
	case len(cb.BusinessKey) > callback.MaxBusinessKeyLen:
		return fmt.Errorf("business key is longer than %d characters", callback.MaxBusinessKeyLen)
	}
	return nil
}
