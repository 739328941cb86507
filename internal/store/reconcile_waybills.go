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

// Reconciliation of waybills (migration 018): which shipments have been
// silent, and where each query stands.

// SilentWaybill is a waybill due to be asked about.
type SilentWaybill struct {
	WaybillNo, Source string
	// Carrier is the carrier's code as the platform names it, Phone the
	// number some carriers ask for ("" when none).
	Carrier, Phone string
	// Queries is how often it was asked before.
	Queries int
	// UpdatedAt is when the shipment last changed: silent since.
	UpdatedAt time.Time
}

// SilentWaybills returns up to limit shipments not delivered whose
// tracking source is one of sources, last updated between updatedAfter and
// updatedBefore (silent since), never asked about or due again at now and
// not given up on since their last change: the longest silent first.
func (s *Store) SilentWaybills(ctx context.Context, sources []string, updatedAfter, updatedBefore, now time.Time, limit int) ([]SilentWaybill, error) {
	if len(sources) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(sources)+5)
	for _, src := range sources {
		args = append(args, src)
	}
	args = append(args, callback.CarrierDelivered, updatedAfter, updatedBefore, now, limit)
	// ix_shipments_silent (tracking_source, updated_at, status) walks the
	// window in order and tests the status without reading the rows.
	rows, err := s.sql.QueryContext(ctx, `SELECT sh.waybill_no, sh.tracking_source, sh.carrier_code, COALESCE(sh.carrier_phone, ''), COALESCE(r.queries, 0), sh.updated_at
FROM shipments sh LEFT JOIN reconcile_waybills r ON r.waybill_no = sh.waybill_no
WHERE sh.tracking_source IN (?`+strings.Repeat(",?", len(sources)-1)+`) AND sh.status <> ?
  AND sh.updated_at >= ? AND sh.updated_at <= ? AND sh.carrier_code IS NOT NULL
  AND (r.waybill_no IS NULL OR (r.next_at <= ? AND (r.gave_up_at IS NULL OR r.gave_up_at < sh.updated_at)))
ORDER BY sh.updated_at LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("error reading silent waybills: %w", err)
	}
	defer rows.Close()
	var out []SilentWaybill
	for rows.Next() {
		var w SilentWaybill
		if err := rows.Scan(&w.WaybillNo, &w.Source, &w.Carrier, &w.Phone, &w.Queries, &w.UpdatedAt); err != nil {
			return nil, fmt.Errorf("error reading silent waybills: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// RecordWaybill records r (its Order is the waybill number) for its
// waybill.
func (s *Store) RecordWaybill(ctx context.Context, r ReconcileResult, now time.Time) error {
	var found, lastErr, gaveUp any
	if r.FoundLogID != 0 {
		found = r.FoundLogID
	}
	if r.Error != "" {
		lastErr = callback.Truncate(r.Error, 250)
	}
	if r.GaveUp {
		gaveUp = now
	}
	_, err := s.sql.ExecContext(ctx, `INSERT INTO reconcile_waybills
 (waybill_no, source, queries, next_at, last_outcome, last_error, found_log_id, gave_up_at, updated_at)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
 ON DUPLICATE KEY UPDATE source = VALUES(source), queries = VALUES(queries), next_at = VALUES(next_at),
  last_outcome = VALUES(last_outcome), last_error = VALUES(last_error),
  found_log_id = COALESCE(VALUES(found_log_id), found_log_id), gave_up_at = VALUES(gave_up_at), updated_at = VALUES(updated_at)`,
		r.Order, r.Source, r.Queries, r.NextAt, r.Outcome, lastErr, found, gaveUp, now)
	if err != nil {
		return fmt.Errorf("error recording the reconciliation of waybill %s: %w", r.Order, err)
	}
	return nil
}

// GetWaybillReconcile returns waybill's reconciliation (ErrNotFound: never
// asked).
func (s *Store) GetWaybillReconcile(ctx context.Context, waybill string) (ReconcileState, error) {
	var st ReconcileState
	var lastErr *string
	var found *int64
	err := s.sql.QueryRowContext(ctx, `SELECT waybill_no, source, last_outcome, queries, last_error, found_log_id, next_at, gave_up_at
FROM reconcile_waybills WHERE waybill_no = ?`, waybill).Scan(&st.Order, &st.Source, &st.LastOutcome, &st.Queries, &lastErr, &found, &st.NextAt, &st.GaveUpAt)
	if errors.Is(err, sql.ErrNoRows) {
		return st, ErrNotFound
	}
	if err != nil {
		return st, fmt.Errorf("error reading the reconciliation of waybill %s: %w", waybill, err)
	}
	if lastErr != nil {
		st.LastError = *lastErr
	}
	if found != nil {
		st.FoundLogID = *found
	}
	return st, nil
}
