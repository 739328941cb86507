package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"callgate/internal/callback"
)

// Where each reconciled platform stands (migration 021): paused, its
// circuit, and the walk through orders older than the query window
// (internal/reconcile decides; this keeps it for the fleet).

// PlatformState is one source's row of reconcile_platforms.
type PlatformState struct {
	Source string
	// PausedUntil: the platform said 429 or 503; nothing is asked before
	// (nil: not paused). PauseReason says what it answered.
	PausedUntil *time.Time
	PauseReason string
	// CircuitOpenUntil: Failures queries in a row reached no answer; nothing
	// is asked before, then one query decides (nil: closed).
	CircuitOpenUntil *time.Time
	Failures         int
	// CircuitOpened counts the times the circuit opened.
	CircuitOpened int
	LastError     string
	// LateCreatedAt and LateOrderCode are the last order the walk through
	// orders older than the window passed (nil: none yet).
	LateCreatedAt *time.Time
	LateOrderCode string
	UpdatedAt     time.Time
}

// ReconcilePlatforms returns every source's row, by source.
func (s *Store) ReconcilePlatforms(ctx context.Context) ([]PlatformState, error) {
	return s.readPlatforms(ctx, "")
}

// ReconcilePlatform returns source's row (a zero one, Source set, when it
// has none).
func (s *Store) ReconcilePlatform(ctx context.Context, source string) (PlatformState, error) {
	out, err := s.readPlatforms(ctx, source)
	if err != nil || len(out) == 0 {
		return PlatformState{Source: source}, err
	}
	return out[0], nil
}

func (s *Store) readPlatforms(ctx context.Context, source string) ([]PlatformState, error) {
	q := `SELECT source, paused_until, pause_reason, circuit_open_until, failures, circuit_opened, last_error,
 late_created_at, late_order_code, updated_at FROM reconcile_platforms`
	var args []any
	if source != "" {
		q += ` WHERE source = ?`
		args = append(args, source)
	}
	rows, err := s.sql.QueryContext(ctx, q+` ORDER BY source`, args...)
	if err != nil {
		return nil, fmt.Errorf("error reading the reconciled platforms: %w", err)
	}
	defer rows.Close()
	var out []PlatformState
	for rows.Next() {
		var p PlatformState
		var paused, open, late sql.NullTime
		var reason, lastErr, lateCode sql.NullString
		if err := rows.Scan(&p.Source, &paused, &reason, &open, &p.Failures, &p.CircuitOpened, &lastErr, &late, &lateCode, &p.UpdatedAt); err != nil {
			return nil, fmt.Errorf("error reading the reconciled platforms: %w", err)
		}
		p.PausedUntil, p.CircuitOpenUntil, p.LateCreatedAt = timePtr(paused), timePtr(open), timePtr(late)
		p.PauseReason, p.LastError, p.LateOrderCode = reason.String, lastErr.String, lateCode.String
		out = append(out, p)
	}
	return out, rows.Err()
}

func timePtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	v := t.Time
	return &v
}

// SetReconcilePlatform writes p as its source's row.
func (s *Store) SetReconcilePlatform(ctx context.Context, p PlatformState, now time.Time) error {
	null := func(v string, n int) any {
		if v == "" {
			return nil
		}
		return callback.Truncate(v, n)
	}
	_, err := s.sql.ExecContext(ctx, `INSERT INTO reconcile_platforms
 (source, paused_until, pause_reason, circuit_open_until, failures, circuit_opened, last_error, late_created_at, late_order_code, updated_at)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
 ON DUPLICATE KEY UPDATE paused_until = VALUES(paused_until), pause_reason = VALUES(pause_reason),
  circuit_open_until = VALUES(circuit_open_until), failures = VALUES(failures), circuit_opened = VALUES(circuit_opened),
  last_error = VALUES(last_error), late_created_at = VALUES(late_created_at), late_order_code = VALUES(late_order_code),
  updated_at = VALUES(updated_at)`,
		p.Source, p.PausedUntil, null(p.PauseReason, 250), p.CircuitOpenUntil, p.Failures, p.CircuitOpened, null(p.LastError, 250),
		p.LateCreatedAt, null(p.LateOrderCode, 64), now)
	if err != nil {
		return fmt.Errorf("error recording where %s's reconciliation stands: %w", p.Source, err)
	}
	return nil
}

// LateReconciles returns up to limit orders of source still open (UNPAID or
// FAILED) created before before and after the order (afterAt, afterCode)
// (afterAt nil: from the oldest), oldest first, each with whether it was
// given up on already: the walk through orders older than the query
// window, so that none is left neither asked nor listed (reconciliation
// switched on late, a backlog longer than the window).
func (s *Store) LateReconciles(ctx context.Context, source string, afterAt *time.Time, afterCode string, before time.Time, limit int) ([]DueOrder, error) {
	args := []any{source, before}
	cond := ""
	if afterAt != nil {
		cond = ` AND (o.created_at > ? OR (o.created_at = ? AND o.order_code > ?))`
		args = append(args, *afterAt, *afterAt, afterCode)
	}
	args = append(args, limit)
	rows, err := s.sql.QueryContext(ctx, `SELECT o.order_code, o.payment_source, o.created_at, COALESCE(r.queries, 0), r.gave_up_at IS NOT NULL
FROM orders o LEFT JOIN reconcile_orders r ON r.order_code = o.order_code
WHERE o.payment_status IN (`+openStatuses+`) AND o.payment_source = ? AND o.created_at < ?`+cond+`
ORDER BY o.created_at, o.order_code LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("error reading orders older than the reconciliation window: %w", err)
	}
	defer rows.Close()
	var out []DueOrder
	for rows.Next() {
		var d DueOrder
		if err := rows.Scan(&d.Code, &d.Source, &d.CreatedAt, &d.Queries, &d.GaveUp); err != nil {
			return nil, fmt.Errorf("error reading orders older than the reconciliation window: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// openStatuses are the payment statuses reconciliation asks about: not
// paid yet, or failed (a failed attempt; the order can still be paid).
var openStatuses = "'" + strings.Join([]string{"UNPAID", "FAILED"}, "','") + "'"

// Stalled says why the platform is not asked at now ("": it is).
func (p PlatformState) Stalled(now time.Time) string {
	switch {
	case p.PausedUntil != nil && now.Before(*p.PausedUntil):
		return "paused until " + p.PausedUntil.UTC().Format(time.RFC3339) + " (" + p.PauseReason + ")"
	case p.CircuitOpenUntil != nil && now.Before(*p.CircuitOpenUntil):
		return fmt.Sprintf("circuit open until %s after %d queries in a row without an answer (last: %s)",
			p.CircuitOpenUntil.UTC().Format(time.RFC3339), p.Failures, p.LastError)
	}
	return ""
}
