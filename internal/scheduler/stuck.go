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
		n, err := s.batch(ctx)
		total += n
		if err != nil {
			return total, err
		}
		if n < s.BatchSize {
			break
		}
	}
	if total > 0 {
		s.Log.Warn("stuck: made PENDING callbacks without a sane due time due now", "count", total)
	}
	return total, nil
}

// batch finds stuck rows with a plain read on (status, next_attempt_at) and
// updates them by id, so the scan takes no locks: an UPDATE ... WHERE over
// the PENDING range would lock every row it looked at.
func (s *Stuck) batch(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	horizon := now.Add(s.Horizon)
	var ids []int64
	err := s.DB.WithContext(ctx).Model(&callback.Log{}).
		Where("status = ? AND (next_attempt_at IS NULL OR next_attempt_at > ?)", callback.StatusPending, horizon).
		Limit(s.BatchSize).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	res := s.DB.WithContext(ctx).Exec(`UPDATE callback_log SET next_attempt_at = ?
		WHERE id IN ? AND status = ? AND (next_attempt_at IS NULL OR next_attempt_at > ?)`,
		now, ids, callback.StatusPending, horizon)
	if res.Error != nil {
		return 0, fmt.Errorf("error releasing stuck callbacks: %w", res.Error)
	}
	return len(ids), nil
}
