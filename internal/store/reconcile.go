package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"callgate/internal/callback"
)

// Reconciliation's rows (migration 016): which orders are asked about,
// and where each stands (internal/reconcile decides when and how).

// DueOrder is an order due to be asked about.
type DueOrder struct {
	Code      string
	Source    string
	CreatedAt time.Time
	// Queries is how often it was asked before.
	Queries int
	// GaveUp: reconciliation gave up on it already (LateReconciles).
	GaveUp bool
}

// DueReconciles returns up to limit orders still UNPAID or FAILED whose payment
// source is one of sources, created between createdAfter and
// createdBefore, never asked about or due again at now and not given up
// on: oldest first. (createdAfter keeps the orders given up on long ago
// out of the index range walked.) An order created after waitAfter (its
// give_up not reached) whose last answer that found something stored a
// callback still PENDING waits for it: asking again before the worker has
// applied what was found would store nothing new (the same event id) and
// only count the same find again. Past give_up it is due as before, so
// that its last query gives up on it.
func (s *Store) DueReconciles(ctx context.Context, sources []string, createdAfter, createdBefore, waitAfter, now time.Time, limit int) ([]DueOrder, error) {
	if len(sources) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(sources)+3)
	for _, src := range sources {
		args = append(args, src)
	}
	args = append(args, createdAfter, createdBefore, now, waitAfter, limit)
	rows, err := s.sql.QueryContext(ctx, `SELECT o.order_code, o.payment_source, o.created_at, COALESCE(r.queries, 0)
FROM orders o LEFT JOIN reconcile_orders r ON r.order_code = o.order_code
WHERE o.payment_status IN (`+openStatuses+`) AND o.payment_source IN (?`+strings.Repeat(",?", len(sources)-1)+`) AND o.created_at >= ? AND o.created_at <= ?
  AND (r.order_code IS NULL OR (r.gave_up_at IS NULL AND r.next_at <= ?
    AND (o.created_at <= ? OR NOT EXISTS (SELECT 1 FROM callback_log c WHERE c.id = r.found_log_id AND c.status = 'PENDING'))))
ORDER BY o.created_at, o.order_code LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("error reading orders due for reconciliation: %w", err)
	}
	defer rows.Close()
	var out []DueOrder
	for rows.Next() {
		var d DueOrder
		if err := rows.Scan(&d.Code, &d.Source, &d.CreatedAt, &d.Queries); err != nil {
			return nil, fmt.Errorf("error reading orders due for reconciliation: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// ReconcileResult is what one query about an order gave.
type ReconcileResult struct {
	Order, Source string
	// Queries is how often the order has now been asked about.
	Queries int
	// Outcome is the query's outcome (internal/reconcile's names).
	Outcome string
	// Error is why the query failed ("" when it did not).
	Error string
	// FoundLogID is the callback the answer stored (0: none).
	FoundLogID int64
	// NextAt is when to ask again; GaveUp: never, it is unresolved.
	NextAt time.Time
	GaveUp bool
}

// RecordReconcile records r for its order.
func (s *Store) RecordReconcile(ctx context.Context, r ReconcileResult, now time.Time) error {
	var found, gaveUp, lastErr any
	if r.FoundLogID != 0 {
		found = r.FoundLogID
	}
	if r.GaveUp {
		gaveUp = now
	}
	if r.Error != "" {
		lastErr = callback.Truncate(r.Error, 250)
	}
	_, err := s.sql.ExecContext(ctx, `INSERT INTO reconcile_orders
 (order_code, source, queries, next_at, last_outcome, last_error, found_log_id, gave_up_at, updated_at)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
 ON DUPLICATE KEY UPDATE source = VALUES(source), queries = VALUES(queries), next_at = VALUES(next_at),
  last_outcome = VALUES(last_outcome), last_error = VALUES(last_error),
  found_log_id = COALESCE(VALUES(found_log_id), found_log_id), gave_up_at = VALUES(gave_up_at), updated_at = VALUES(updated_at)`,
		r.Order, r.Source, r.Queries, r.NextAt, r.Outcome, lastErr, found, gaveUp, now)
	if err != nil {
		return fmt.Errorf("error recording the reconciliation of %s: %w", r.Order, err)
	}
	return nil
}

// ReconcileState is where an order's reconciliation stands.
type ReconcileState struct {
	Order, Source, LastOutcome string
	Queries                    int
	LastError                  string
	FoundLogID                 int64
	NextAt                     time.Time
	GaveUpAt                   *time.Time
}

// GetReconcile returns order's reconciliation (ErrNotFound: never asked).
func (s *Store) GetReconcile(ctx context.Context, order string) (ReconcileState, error) {
	var st ReconcileState
	var lastErr sql.NullString
	var found sql.NullInt64
	var gaveUp sql.NullTime
	err := s.sql.QueryRowContext(ctx, `SELECT order_code, source, last_outcome, queries, last_error, found_log_id, next_at, gave_up_at
FROM reconcile_orders WHERE order_code = ?`, order).Scan(&st.Order, &st.Source, &st.LastOutcome, &st.Queries, &lastErr, &found, &st.NextAt, &gaveUp)
	if errors.Is(err, sql.ErrNoRows) {
		return st, ErrNotFound
	}
	if err != nil {
		return st, fmt.Errorf("error reading the reconciliation of %s: %w", order, err)
	}
	st.LastError, st.FoundLogID = lastErr.String, found.Int64
	if gaveUp.Valid {
		st.GaveUpAt = &gaveUp.Time
	}
	return st, nil
}

// Unresolved lists up to limit orders reconciliation gave up on that are
// still UNPAID or FAILED, most recent first: on-call's to look at.
func (s *Store) Unresolved(ctx context.Context, limit int) ([]ReconcileState, error) {
	rows, err := s.sql.QueryContext(ctx, `SELECT r.order_code, r.source, r.last_outcome, r.queries, r.last_error, r.next_at, r.gave_up_at
FROM reconcile_orders r JOIN orders o ON o.order_code = r.order_code
WHERE r.gave_up_at IS NOT NULL AND o.payment_status IN (`+openStatuses+`) ORDER BY r.gave_up_at DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("error reading unresolved orders: %w", err)
	}
	defer rows.Close()
	var out []ReconcileState
	for rows.Next() {
		var st ReconcileState
		var lastErr sql.NullString
		var gaveUp time.Time
		if err := rows.Scan(&st.Order, &st.Source, &st.LastOutcome, &st.Queries, &lastErr, &st.NextAt, &gaveUp); err != nil {
			return nil, fmt.Errorf("error reading unresolved orders: %w", err)
		}
		st.LastError, st.GaveUpAt = lastErr.String, &gaveUp
		out = append(out, st)
	}
	return out, rows.Err()
}

// CountUnresolved counts the orders Unresolved lists, without a limit.
func (s *Store) CountUnresolved(ctx context.Context) (int64, error) {
	var n int64
	err := s.sql.QueryRowContext(ctx, `SELECT COUNT(*)
FROM reconcile_orders r JOIN orders o ON o.order_code = r.order_code
WHERE r.gave_up_at IS NOT NULL AND o.payment_status IN (`+openStatuses+`)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("error counting unresolved orders: %w", err)
	}
	return n, nil
}

// ReconcileOrder returns order as the reconciliation job sees it, due or
// not (ErrNotFound: no such order; a "" Source: it has no payment source).
func (s *Store) ReconcileOrder(ctx context.Context, order string) (DueOrder, error) {
	var d DueOrder
	var src sql.NullString
	err := s.sql.QueryRowContext(ctx, `SELECT o.order_code, o.payment_source, o.created_at, COALESCE(r.queries, 0)
FROM orders o LEFT JOIN reconcile_orders r ON r.order_code = o.order_code WHERE o.order_code = ?`, order).
		Scan(&d.Code, &src, &d.CreatedAt, &d.Queries)
	if errors.Is(err, sql.ErrNoRows) {
		return d, ErrNotFound
	}
	if err != nil {
		return d, fmt.Errorf("error reading order %s: %w", order, err)
	}
	d.Source = src.String
	return d, nil
}
