package intake

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"callgate/internal/ingest"
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
	rows, err := ingest.PresetRows(template, cbs, nil)
	if err != nil {
		h.refuse(c, src, http.StatusBadRequest, err.Error(), nil)
		return
	}
	dead := deadLetterRows(cbs)
	charged, ok := h.chargeDeadLetters(c, src, rows, dead, now)
	if !ok {
		return
	}
	// In the request's order, so that the log ids, and per-key
	// processing, follow it.
	sctx, cancel := context.WithTimeout(ctx, h.StoreTimeout)
	stored, err := ingest.InsertAll(sctx, h.Store, rows)
	cancel()
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
