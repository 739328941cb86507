package intake

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"callgate/internal/callback"
	"callgate/internal/platform"
	"callgate/internal/store"
)

// A dead letter is a notification whose signature and merchant held but
// that its source's preset could not read (platform.Callback.Unreadable):
// it is stored rather than refused, so that nothing signed is lost, and
// the worker sets it FAILED without a handler. Nothing about it is
// bounded otherwise: a row keeps the whole body (up to max_body_bytes),
// presets have no rate limit by default, and FAILED rows stay until
// dead_letter_max_age. So one captured signed delivery, re-sent in ways
// that each make a new row, could grow callback_log without bound. Each
// source may therefore store so many new dead letters, and so many bytes
// of them, per hour; past that the request is answered 429 with
// Retry-After and nothing is stored, and the platform resends it later.
// Reconciliation's answers (stored by internal/reconcile through
// internal/ingest, never through this handler) are not counted: callgate
// asked for them over https, and nobody can re-send one.

// DeadLetterLimit is one source's bound on new dead letters per hour; a
// zero field is no bound.
type DeadLetterLimit struct {
	MaxPerHour      int
	MaxBytesPerHour int64
}

// StoredLookup says which of a source's event ids are stored already.
type StoredLookup interface {
	StoredEventIDs(ctx context.Context, source string, eventIDs []string) (map[string]bool, error)
}

var _ StoredLookup = (*store.Store)(nil)

// DeadLetters holds each source's dead-letter budget. The budgets are this
// process's, like rate_limit: a fleet of n gateways stores up to n times
// the limit, as the platform's requests spread over them.
type DeadLetters struct {
	budgets map[string]*deadLetterBudget
	stored  StoredLookup
}

// NewDeadLetters bounds the sources of limits (by name; a source left out,
// or whose limits are both 0, is not bounded). stored answers, once a
// source is over its limit, which of its notifications are resends of
// rows already stored: those cost nothing.
func NewDeadLetters(limits map[string]DeadLetterLimit, stored StoredLookup) *DeadLetters {
	d := &DeadLetters{budgets: map[string]*deadLetterBudget{}, stored: stored}
	for name, l := range limits {
		if l.MaxPerHour > 0 || l.MaxBytesPerHour > 0 {
			d.budgets[name] = &deadLetterBudget{limit: l}
		}
	}
	return d
}

// budget is source's budget, nil when it is not bounded.
func (d *DeadLetters) budget(source string) *deadLetterBudget {
	if d == nil {
		return nil
	}
	return d.budgets[source]
}

// deadLetterBudget is a pair of token buckets, rows and bytes, each
// holding an hour's limit and refilled continuously at that limit per
// hour: a source may store its whole hour's worth at once, then as much
// as an hour gives back.
type deadLetterBudget struct {
	limit DeadLetterLimit
	mu    sync.Mutex
	rows  float64 // what may be stored now
	bytes float64
	at    time.Time // when rows and bytes were refilled; zero: never, full
}

// refill adds what the time since the last refill gives back.
func (b *deadLetterBudget) refill(now time.Time) {
	maxRows, maxBytes := float64(b.limit.MaxPerHour), float64(b.limit.MaxBytesPerHour)
	if b.at.IsZero() {
		b.rows, b.bytes, b.at = maxRows, maxBytes, now
		return
	}
	if d := now.Sub(b.at); d > 0 {
		b.rows = min(maxRows, b.rows+d.Hours()*maxRows)
		b.bytes = min(maxBytes, b.bytes+d.Hours()*maxBytes)
		b.at = now
	}
}

// take charges n rows of size bytes each, all or nothing, and otherwise
// says how long until they fit. A request holding more than a whole hour's
// limit waits for a full budget and takes all of it, rather than never
// fitting.
func (b *deadLetterBudget) take(now time.Time, n int, size int64) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	maxRows, maxBytes := float64(b.limit.MaxPerHour), float64(b.limit.MaxBytesPerHour)
	needRows, needBytes := min(float64(n), maxRows), min(float64(n)*float64(size), maxBytes)
	if b.rows >= needRows && b.bytes >= needBytes {
		b.rows -= needRows
		b.bytes -= needBytes
		return 0, true
	}
	var wait float64 // hours
	if b.rows < needRows {
		wait = (needRows - b.rows) / maxRows
	}
	if b.bytes < needBytes {
		wait = max(wait, (needBytes-b.bytes)/maxBytes)
	}
	return time.Duration(wait * float64(time.Hour)), false
}

// giveBack returns a charged row that turned out to be a duplicate.
func (b *deadLetterBudget) giveBack(size int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.rows = min(float64(b.limit.MaxPerHour), b.rows+1)
	b.bytes = min(float64(b.limit.MaxBytesPerHour), b.bytes+float64(size))
}

// deadLetterRows are the indexes of the callbacks the preset could not read.
func deadLetterRows(cbs []platform.Callback) []int {
	var dead []int
	for i, cb := range cbs {
		if cb.Unreadable != "" {
			dead = append(dead, i)
		}
	}
	return dead
}

// chargeDeadLetters charges the source's budget with the dead letters
// among rows (indexes dead) before they are stored, and returns the
// indexes it charged. Past the limit, those that are resends of rows
// already stored are left out (storing them again is a duplicate, no new
// row); if new ones remain that do not fit, the request is answered 429
// with Retry-After in the platform's words, nothing is stored, and it
// returns false. Only requests whose signature held get here, so nothing
// unauthenticated spends the budget.
func (h *Handler) chargeDeadLetters(c *gin.Context, src *Source, rows []*callback.Log, dead []int, now time.Time) ([]int, bool) {
	b := h.DeadLetters.budget(src.Config.Name)
	if b == nil || len(dead) == 0 {
		return nil, true
	}
	size := int64(len(rows[dead[0]].Payload)) // each row keeps the whole body
	if _, ok := b.take(now, len(dead), size); ok {
		return dead, true
	}
	ids := make([]string, len(dead))
	for i, d := range dead {
		ids[i] = rows[d].EventID
	}
	sctx, cancel := context.WithTimeout(c.Request.Context(), h.StoreTimeout)
	have, err := h.DeadLetters.stored.StoredEventIDs(sctx, src.Config.Name, ids)
	cancel()
	if err != nil {
		h.storeFailed(c, src, err)
		return nil, false
	}
	var fresh []int
	for _, d := range dead {
		if !have[rows[d].EventID] {
			fresh = append(fresh, d)
		}
	}
	if len(fresh) == 0 {
		return nil, true
	}
	wait, ok := b.take(now, len(fresh), size)
	if ok {
		return fresh, true
	}
	h.Metrics.DeadLettersRefused.WithLabelValues(src.Config.Name).Inc()
	c.Header("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
	h.refuse(c, src, http.StatusTooManyRequests, fmt.Sprintf(
		"source %s has stored its limit of notifications it cannot read (dead_letters: %s an hour), retry later",
		src.Config.Name, limitWords(b.limit)), nil)
	return nil, false
}

// settleDeadLetters, once rows are stored, gives back what a dead letter
// that turned out to be a duplicate was charged (a resend racing its
// first delivery), counts the new ones and logs each.
func (h *Handler) settleDeadLetters(c *gin.Context, src *Source, cbs []platform.Callback, rows []*callback.Log, stored []platform.Stored, dead, charged []int) {
	b := h.DeadLetters.budget(src.Config.Name)
	for _, i := range charged {
		if stored[i].Duplicate {
			b.giveBack(int64(len(rows[i].Payload)))
		}
	}
	for _, i := range dead {
		if !stored[i].Duplicate {
			h.Metrics.DeadLetters.WithLabelValues(src.Config.Name).Inc()
		}
		h.Log.WarnContext(c.Request.Context(), "intake: notification stored unreadable", "source", src.Config.Name, "event_id", cbs[i].EventID,
			"log_id", stored[i].LogID, "duplicate", stored[i].Duplicate, "reason", cbs[i].Unreadable)
	}
}

// limitWords says a limit as the reason of a 429 gives it.
func limitWords(l DeadLetterLimit) string {
	var s string
	if l.MaxPerHour > 0 {
		s = strconv.Itoa(l.MaxPerHour) + " notifications"
	}
	if l.MaxBytesPerHour > 0 {
		if s != "" {
			s += " or "
		}
		s += strconv.FormatInt(l.MaxBytesPerHour, 10) + " bytes"
	}
	return s
}
