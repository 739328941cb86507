package scheduler

import (
	"callgate/internal/store"
	"context"
	"log/slog"
	"time"
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
	Store *store.Store
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

// batch releases one batch of stuck rows.
func (s *Stuck) batch(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	return s.Store.ReleaseStuck(ctx, now, now.Add(s.Horizon), s.BatchSize)
}
