package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
)

// UnresolvedOrder is an order reconciliation gave up on that is still
// UNPAID or FAILED: on-call's to look at (docs/reconciliation.md).
type UnresolvedOrder struct {
	OrderCode   string  `json:"order_code"`
	Source      string  `json:"source"`
	Queries     int     `json:"queries"`
	LastOutcome string  `json:"last_outcome"`
	LastError   *string `json:"last_error"`
	// GaveUpAt is when reconciliation stopped asking; NextAt is when it
	// had planned to ask next (it does not, once given up).
	GaveUpAt time.Time `json:"gave_up_at"`
	NextAt   time.Time `json:"next_at"`
}

// PlatformStatus is where one reconciled platform stands
// (reconcile_platforms): a platform that said 429 or 503 is paused, one
// whose queries in a row reached no answer has its circuit open.
type PlatformStatus struct {
	Source string `json:"source"`
	// Stalled says why it is not asked now ("": it is).
	Stalled          string     `json:"stalled"`
	PausedUntil      *time.Time `json:"paused_until"`
	PauseReason      string     `json:"pause_reason"`
	CircuitOpenUntil *time.Time `json:"circuit_open_until"`
	// Failures are the queries in a row that reached no answer;
	// CircuitOpened how often the circuit opened.
	Failures      int    `json:"failures"`
	CircuitOpened int    `json:"circuit_opened"`
	LastError     string `json:"last_error"`
}

// Unresolved is GET /admin/api/reconcile/unresolved.
type Unresolved struct {
	// Platforms are where each platform asked stands, by source.
	Platforms []PlatformStatus `json:"platforms"`
	// Orders are the most recently given up on first, at most the limit.
	Orders []UnresolvedOrder `json:"orders"`
	// Count is how many there are in all (more than Orders holds when
	// the limit cut the list).
	Count int64 `json:"count"`
}

// DefaultUnresolvedLimit and MaxUnresolvedLimit bound the unresolved list.
const (
	DefaultUnresolvedLimit = 100
	MaxUnresolvedLimit     = 500
)

// ParseUnresolvedLimit reads the limit parameter ("" is the default).
func ParseUnresolvedLimit(v string) (int, error) {
	if v == "" {
		return DefaultUnresolvedLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxUnresolvedLimit {
		return 0, errors.New("limit: want 1..500")
	}
	return n, nil
}

// Unresolved lists up to limit unresolved orders, most recently given up
// on first, and counts them all.
func (s *Service) Unresolved(ctx context.Context, limit int) (*Unresolved, error) {
	if limit <= 0 || limit > MaxUnresolvedLimit {
		limit = DefaultUnresolvedLimit
	}
	rows, err := s.Store.Unresolved(ctx, limit)
	if err != nil {
		return nil, err
	}
	n, err := s.Store.CountUnresolved(ctx)
	if err != nil {
		return nil, err
	}
	platforms, err := s.Store.ReconcilePlatforms(ctx)
	if err != nil {
		return nil, err
	}
	out := &Unresolved{Orders: make([]UnresolvedOrder, 0, len(rows)), Count: max(n, int64(len(rows))),
		Platforms: make([]PlatformStatus, 0, len(platforms))}
	now := time.Now()
	for _, p := range platforms {
		out.Platforms = append(out.Platforms, PlatformStatus{Source: p.Source, Stalled: p.Stalled(now), PausedUntil: p.PausedUntil,
			PauseReason: p.PauseReason, CircuitOpenUntil: p.CircuitOpenUntil, Failures: p.Failures, CircuitOpened: p.CircuitOpened, LastError: p.LastError})
	}
	for _, r := range rows {
		o := UnresolvedOrder{OrderCode: r.Order, Source: r.Source, Queries: r.Queries, LastOutcome: r.LastOutcome, NextAt: r.NextAt}
		if r.LastError != "" {
			o.LastError = &r.LastError
		}
		if r.GaveUpAt != nil {
			o.GaveUpAt = *r.GaveUpAt
		}
		out.Orders = append(out.Orders, o)
	}
	return out, nil
}

func (h *Handler) apiUnresolved(c *gin.Context) {
	limit, err := ParseUnresolvedLimit(c.Query("limit"))
	if err != nil {
		apiError(c, http.StatusBadRequest, err.Error())
		return
	}
	u, err := h.Service.Unresolved(c.Request.Context(), limit)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
}
