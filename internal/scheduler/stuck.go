package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"callgate/internal/callback"
)

// Stuck makes due again what nothing would otherwise pick up.
//
// In this design a crash leaves no "in progress" state behind: a callback is
// processed inside one transaction that rolls back if the worker dies, its
// unacked message returns to the broker, and its row stays PENDING with a
// next_attempt_at the compensation job honours; outbox rows stay PENDING for
// the relay. What can still get stuck is a PENDING row whose
// next_attempt_at is missing (a row changed by hand) or further ahead than
// any backoff allows (written by an instance whose clock ran ahead). Stuck
// finds those and makes them due now.
type Stuck struct {
	DB *gorm.DB
	// Horizon is the furthest a legitimate next_attempt_at can lie ahead:
	// the largest retry max plus the compensation threshold.
	Horizon   time.Duration
	BatchSize int
	Log       *slog.Logger
}

// RunOnce makes stuck callbacks due and returns how many.
func (s *Stuck) RunOnce(ctx context.Context) (int, error) {
	total := 0
	for ctx.Err() == nil {
		bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		now := time.Now().UTC()
		res := s.DB.WithContext(bctx).Exec(`UPDATE callback_log SET next_attempt_at = ?
			WHERE status = ? AND (next_attempt_at IS NULL OR next_attempt_at > ?) ORDER BY id LIMIT ?`,
			now, callback.StatusPending, now.Add(s.Horizon), s.BatchSize)
		cancel()
		if res.Error != nil {
			return total, fmt.Errorf("error releasing stuck callbacks: %w", res.Error)
		}
		total += int(res.RowsAffected)
		if int(res.RowsAffected) < s.BatchSize {
			break
		}
	}
	if total > 0 {
		s.Log.Warn("stuck: made PENDING callbacks without a sane due time due now", "count", total)
	}
	return total, nil
}
