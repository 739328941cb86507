package store

import (
	"context"
	"fmt"

	"callgate/internal/callback"
)

// InsertAttemptTx records one attempt at processing a callback, in tx.
func (s *Store) InsertAttemptTx(ctx context.Context, tx *Tx, a *callback.Attempt) error {
	if err := s.q(ctx, tx).Create(a).Error; err != nil {
		return fmt.Errorf("error recording attempt %d of callback log %d: %w", a.Attempt, a.LogID, translate(err))
	}
	return nil
}

// Attempts returns every attempt at callback logID, in order.
func (s *Store) Attempts(ctx context.Context, logID int64) ([]callback.Attempt, error) {
	var out []callback.Attempt
	if err := s.q(ctx, nil).Where("log_id = ?", logID).Order("attempt, id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("error loading attempts of callback log %d: %w", logID, translate(err))
	}
	return out, nil
}
