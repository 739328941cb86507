package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// retryTransient runs try until it succeeds or fails with an error other
// than a deadlock or a lock wait timeout, pausing a short jittered while
// between tries, or until ctx ends.
func retryTransient(ctx context.Context, try func() error) error {
	for n := 0; ; n++ {
		err := try()
		if err == nil || !IsTransient(err) {
			return err
		}
		pause := time.Duration(rand.Int64N(int64(min(50, 1<<min(n, 6))) * int64(time.Millisecond)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (after %d tries): %w", ctx.Err(), n+1, err)
		case <-time.After(pause):
		}
	}
}
