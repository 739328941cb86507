package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Reconciliation's checkpoints (migration 017): how far a source's events
// list (Stripe's) was read and stored.

// ReconcileCheckpoint returns the `created` time up to which every event
// source's list gave was stored (ok false: never listed).
func (s *Store) ReconcileCheckpoint(ctx context.Context, source string) (until time.Time, ok bool, err error) {
	err = s.sql.QueryRowContext(ctx, `SELECT listed_until FROM reconcile_checkpoints WHERE source = ?`, source).Scan(&until)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("error reading the reconciliation checkpoint of %s: %w", source, err)
	}
	return until.UTC(), true, nil
}

// SetReconcileCheckpoint records that every event of source's list created
// up to until was stored. It never moves the checkpoint back.
func (s *Store) SetReconcileCheckpoint(ctx context.Context, source string, until, now time.Time) error {
	_, err := s.sql.ExecContext(ctx, `INSERT INTO reconcile_checkpoints (source, listed_until, updated_at) VALUES (?, ?, ?)
 ON DUPLICATE KEY UPDATE listed_until = GREATEST(listed_until, VALUES(listed_until)), updated_at = VALUES(updated_at)`,
		source, until.UTC(), now.UTC())
	if err != nil {
		return fmt.Errorf("error recording the reconciliation checkpoint of %s: %w", source, err)
	}
	return nil
}
