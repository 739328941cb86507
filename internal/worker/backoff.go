package worker

import (
	"math/rand/v2"
	"time"

	"callgate/internal/source"
)

// Backoff returns the delay before attempt+1 after attempt (1-based) failed:
// exponential from retry.Initial, capped at retry.Max, with "equal jitter"
// (half fixed, half random) so a burst of failures does not come back as
// one burst.
func Backoff(retry source.Retry, attempt int) time.Duration {
	d := retry.Initial
	for i := 1; i < attempt && d < retry.Max; i++ {
		d *= 2
	}
	d = min(d, retry.Max)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}
