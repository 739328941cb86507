package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"callgate/internal/callback"
)

// CallbackFilter selects callback_log rows for operators: a zero field
// matches everything.
type CallbackFilter struct {
	Status  string
	Source  string
	Kind    string
	Key     string // business key
	EventID string
	Since   *time.Time // received at or after
	Until   *time.Time // received before
	// ErrorContains matches last_error literally (no wildcards).
	ErrorContains string
	IDs           []int64
	// Origin is callback.OriginNotify or callback.OriginReconcile. No
	// index leads with it: alone it walks the ids newest first until the
	// page is full.
	Origin string
}

func (f CallbackFilter) scope(q *gorm.DB) *gorm.DB {
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Source != "" {
		q = q.Where("source = ?", f.Source)
	}
	if f.Kind != "" {
		q = q.Where("kind = ?", f.Kind)
	}
	if f.Key != "" {
		q = q.Where("business_key = ?", f.Key)
	}
	if f.EventID != "" {
		q = q.Where("event_id = ?", f.EventID)
	}
	if f.Since != nil {
		q = q.Where("received_at >= ?", f.Since.UTC())
	}
	if f.Until != nil {
		q = q.Where("received_at < ?", f.Until.UTC())
	}
	if f.ErrorContains != "" {
		esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(f.ErrorContains)
		q = q.Where("last_error LIKE ?", "%"+esc+"%")
	}
	if len(f.IDs) > 0 {
		q = q.Where("id IN ?", f.IDs)
	}
	if f.Origin != "" {
		q = q.Where("origin = ?", f.Origin)
	}
	return q
}

// summaryColumns are what a list shows: everything but the bodies.
var summaryColumns = []string{"id", "source", "kind", "event_id", "business_key", "status", "attempts", "last_error", "trace_id",
	"received_at", "processed_at", "next_attempt_at", "origin"}

// ListCallbacks returns up to limit callbacks matching f with an id below
// beforeID (0: from the newest), newest first, without their bodies:
// keyset pagination, never an OFFSET scan.
func (s *Store) ListCallbacks(ctx context.Context, f CallbackFilter, beforeID int64, limit int) ([]callback.Log, error) {
	q := f.scope(s.q(ctx, nil).Model(&callback.Log{}))
	if beforeID > 0 {
		q = q.Where("id < ?", beforeID)
	}
	var rows []callback.Log
	if err := q.Select(summaryColumns).Order("id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("error listing callbacks: %w", translate(err))
	}
	return rows, nil
}

// CountCallbacks counts the callbacks matching f.
func (s *Store) CountCallbacks(ctx context.Context, f CallbackFilter) (int64, error) {
	var n int64
	if err := f.scope(s.q(ctx, nil).Model(&callback.Log{})).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("error counting callbacks: %w", translate(err))
	}
	return n, nil
}

// MatchesTx counts the callbacks matching f and returns the newest one's
// id (0 when none), in tx.
func (s *Store) MatchesTx(ctx context.Context, tx *Tx, f CallbackFilter) (n, maxID int64, err error) {
	var agg struct {
		N     int64
		MaxID *int64
	}
	if err := f.scope(s.q(ctx, tx).Model(&callback.Log{})).Select("COUNT(*) AS n, MAX(id) AS max_id").Scan(&agg).Error; err != nil {
		return 0, 0, fmt.Errorf("error counting callbacks: %w", translate(err))
	}
	if agg.MaxID != nil {
		maxID = *agg.MaxID
	}
	return agg.N, maxID, nil
}

// LockMatchingTx locks, until tx ends, up to limit callbacks matching f
// with afterID < id <= maxID, in id order, and returns them with id, kind
// and trace id. It waits for rows others hold (no SKIP LOCKED: a row
// skipped by a job that moves on past it would be passed over for good).
func (s *Store) LockMatchingTx(ctx context.Context, tx *Tx, f CallbackFilter, afterID, maxID int64, limit int) ([]callback.Log, error) {
	var rows []callback.Log
	err := f.scope(s.q(ctx, tx).Model(&callback.Log{})).Where("id > ? AND id <= ?", afterID, maxID).
		Select("id", "kind", "trace_id").Order("id").Limit(limit).
		Clauses(clause.Locking{Strength: "UPDATE"}).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("error selecting callbacks to replay: %w", translate(err))
	}
	return rows, nil
}
