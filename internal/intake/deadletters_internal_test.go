package intake

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeadLetterBudgetRefillsOverTheHour: a source may store its hour's
// limit at once, then one more each hour/limit; a refusal says how long
// until the request fits and charges nothing; a duplicate's charge comes
// back; a request larger than the whole hour waits for a full budget
// rather than never fitting.
func TestDeadLetterBudgetRefillsOverTheHour(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	b := &deadLetterBudget{limit: DeadLetterLimit{MaxPerHour: 4, MaxBytesPerHour: 4000}}
	for i := range 4 {
		_, ok := b.take(t0, 1, 100)
		require.True(t, ok, "the %dth of the hour's 4", i+1)
	}
	wait, ok := b.take(t0, 1, 100)
	require.False(t, ok)
	require.Equal(t, 15*time.Minute, wait, "one of 4 an hour comes back in 15 minutes")
	_, ok = b.take(t0.Add(14*time.Minute), 1, 100)
	require.False(t, ok, "not yet")
	_, ok = b.take(t0.Add(15*time.Minute), 1, 100)
	require.True(t, ok, "the refusals charged nothing")

	b.giveBack(100) // a duplicate
	_, ok = b.take(t0.Add(15*time.Minute), 1, 100)
	require.True(t, ok)

	// Bytes: 4000 an hour; three hours later the budget is full again
	// (not more than an hour's worth).
	later := t0.Add(3 * time.Hour)
	_, ok = b.take(later, 1, 3000)
	require.True(t, ok)
	wait, ok = b.take(later, 1, 3000)
	require.False(t, ok)
	require.Equal(t, 30*time.Minute, wait, "2000 more bytes at 4000 an hour")

	// More than the whole hour: it takes everything once the budget is full.
	big := &deadLetterBudget{limit: DeadLetterLimit{MaxPerHour: 2}}
	_, ok = big.take(t0, 5, 10)
	require.True(t, ok, "a full budget takes a request larger than it")
	wait, ok = big.take(t0, 5, 10)
	require.False(t, ok)
	require.Equal(t, time.Hour, wait)

	// A dimension at 0 is no limit.
	rowsOnly := &deadLetterBudget{limit: DeadLetterLimit{MaxPerHour: 1}}
	_, ok = rowsOnly.take(t0, 1, 1<<30)
	require.True(t, ok)
}
