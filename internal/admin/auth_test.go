package admin_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
)

// TestTokensAuthenticate: a token is accepted as its secret alone or as
// name:secret (the form of CALLGATE_ADMIN_TOKEN), and only under its own
// name.
func TestTokensAuthenticate(t *testing.T) {
	t.Parallel()
	tokens, err := admin.ParseTokens("ops:ops-token-0123456789,oncall:on:call-token-987")
	require.NoError(t, err)
	bare, err := admin.ParseTokens("bare-token-0123456789")
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		tokens    admin.Tokens
		presented string
		want      string // "" = refused
	}{
		{"secret", tokens, "ops-token-0123456789", "ops"},
		{"name and secret", tokens, "ops:ops-token-0123456789", "ops"},
		{"secret with a colon", tokens, "on:call-token-987", "oncall"},
		{"name and secret with a colon", tokens, "oncall:on:call-token-987", "oncall"},
		{"another token's name", tokens, "oncall:ops-token-0123456789", ""},
		{"unknown name", tokens, "root:ops-token-0123456789", ""},
		{"empty name", tokens, ":ops-token-0123456789", ""},
		{"wrong secret", tokens, "ops:ops-token-0123456780", ""},
		{"name only", tokens, "ops:", ""},
		{"empty", tokens, "", ""},
		{"bare token", bare, "bare-token-0123456789", "admin"},
		{"bare token named admin", bare, "admin:bare-token-0123456789", "admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.tokens.Authenticate(tc.presented)
			if tc.want == "" {
				require.ErrorIs(t, err, admin.ErrBadToken)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestFailureLimiterFullKeepsRecentClientBlocked: a spray of fresh
// addresses that fills the limiter past its (default) capacity must not
// unblock a client that is still guessing. Resetting the whole table when
// full would hand it a fresh burst.
func TestFailureLimiterFullKeepsRecentClientBlocked(t *testing.T) {
	t.Parallel()
	f := &admin.FailureLimiter{Every: time.Hour, Burst: 2}
	const guesser = "192.0.2.1"
	f.Fail(guesser)
	f.Fail(guesser)
	blocked, _ := f.Blocked(guesser)
	require.True(t, blocked, "two failures use up the burst")

	for i := range admin.FailureMaxClientsDefault + 100 {
		f.Fail(fmt.Sprintf("spray-%d", i))
		// The guesser keeps trying, so it stays among the recent clients.
		blocked, wait := f.Blocked(guesser)
		require.True(t, blocked, "after %d sprayed addresses the guesser was unblocked", i+1)
		require.Greater(t, wait, 50*time.Minute)
	}
}

// TestFailureLimiterEvictsLeastRecentlySeen: with a small capacity the
// client seen longest ago is forgotten first, and only it.
func TestFailureLimiterEvictsLeastRecentlySeen(t *testing.T) {
	t.Parallel()
	f := &admin.FailureLimiter{Every: time.Hour, Burst: 1, MaxClients: 3}
	for _, c := range []string{"old", "recent"} {
		f.Fail(c)
		blocked, _ := f.Blocked(c)
		require.True(t, blocked, c)
	}
	f.Fail("a") // full: old, recent, a
	blocked, _ := f.Blocked("recent")
	require.True(t, blocked, "recent is seen again, so old is now the least recently seen")
	f.Fail("b") // over capacity: old goes
	blocked, _ = f.Blocked("recent")
	require.True(t, blocked, "recent was not evicted")
	blocked, _ = f.Blocked("old")
	require.False(t, blocked, "old was evicted (forgotten), so it starts afresh")
}
