package intake

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDisabledLogNamesOncePerMinute: a disabled source's requests are
// logged at most once per DisabledLogEvery each, the next line counting
// those not logged; each source has its own minute.
func TestDisabledLogNamesOncePerMinute(t *testing.T) {
	var d disabledLog
	t0 := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	ok, skipped := d.take("stripe", t0)
	require.True(t, ok)
	require.Zero(t, skipped)
	for i := 1; i <= 5; i++ {
		ok, _ = d.take("stripe", t0.Add(time.Duration(i)*time.Second))
		require.False(t, ok, "within the minute")
	}
	ok, _ = d.take("shopify", t0.Add(time.Second))
	require.True(t, ok, "another source has its own minute")
	ok, skipped = d.take("stripe", t0.Add(DisabledLogEvery))
	require.True(t, ok)
	require.Equal(t, 5, skipped, "the line counts the requests not logged")
	ok, skipped = d.take("stripe", t0.Add(2*DisabledLogEvery))
	require.True(t, ok)
	require.Zero(t, skipped)
}
