package admin_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
)

// TestTokensAuthenticate: a token is accepted as its secret alone or as
// name:secret[:role] (the form of CALLGATE_ADMIN_TOKEN), and only under
// its own name and role; a token without a role is an operator.
func TestTokensAuthenticate(t *testing.T) {
	t.Parallel()
	tokens, err := admin.ParseTokens("ops:ops-token-0123456789,oncall:oncall-token-987,audit:audit-token-0123:viewer,lead:lead-token-0123:operator")
	require.NoError(t, err)
	bare, err := admin.ParseTokens("bare-token-0123456789")
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		tokens    admin.Tokens
		presented string
		want      string // "" = refused
		role      admin.Role
	}{
		{"secret", tokens, "ops-token-0123456789", "ops", admin.RoleOperator},
		{"name and secret", tokens, "ops:ops-token-0123456789", "ops", admin.RoleOperator},
		{"second token", tokens, "oncall-token-987", "oncall", admin.RoleOperator},
		{"second token by name", tokens, "oncall:oncall-token-987", "oncall", admin.RoleOperator},
		{"a fourth field", tokens, "oncall:oncall-token-987:operator:x", "", ""},
		{"role in another case", tokens, "audit:audit-token-0123:Viewer", "", ""},
		{"another token's name", tokens, "oncall:ops-token-0123456789", "", ""},
		{"unknown name", tokens, "root:ops-token-0123456789", "", ""},
		{"empty name", tokens, ":ops-token-0123456789", "", ""},
		{"wrong secret", tokens, "ops:ops-token-0123456780", "", ""},
		{"name only", tokens, "ops:", "", ""},
		{"empty", tokens, "", "", ""},
		{"bare token", bare, "bare-token-0123456789", "admin", admin.RoleOperator},
		{"bare token named admin", bare, "admin:bare-token-0123456789", "admin", admin.RoleOperator},
		{"viewer secret", tokens, "audit-token-0123", "audit", admin.RoleViewer},
		{"viewer as configured", tokens, "audit:audit-token-0123:viewer", "audit", admin.RoleViewer},
		{"viewer claiming operator", tokens, "audit:audit-token-0123:operator", "", ""},
		{"viewer secret with its role", tokens, "audit-token-0123:viewer", "", ""},
		{"explicit operator", tokens, "lead:lead-token-0123:operator", "lead", admin.RoleOperator},
		{"explicit operator secret", tokens, "lead-token-0123", "lead", admin.RoleOperator},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.tokens.Authenticate(tc.presented)
			if tc.want == "" {
				require.ErrorIs(t, err, admin.ErrBadToken)
				return
			}
			require.NoError(t, err)
			require.Equal(t, admin.Identity{Kind: admin.KindToken, Actor: tc.want, Role: tc.role}, got)
		})
	}
}

// TestParseTokensRoles: a role is exactly viewer or operator; without a
// third field a token is an operator.
func TestParseTokensRoles(t *testing.T) {
	t.Parallel()
	tokens, err := admin.ParseTokens("a:secret-0123456789:viewer, b:secret-9876543210:operator, c:secret-5555555555")
	require.NoError(t, err)
	require.Len(t, tokens, 3)
	require.Equal(t, admin.RoleViewer, tokens[0].Role)
	require.Equal(t, admin.RoleOperator, tokens[1].Role)
	require.Equal(t, admin.RoleOperator, tokens[2].Role)
	require.Equal(t, "a=viewer,b=operator,c=operator", tokens.Summary())
	_, err = admin.ParseTokens("a::viewer")
	require.Error(t, err, "a role without a secret")
}

// TestParseTokensRefusesAMistypedRole: a third field that is not exactly
// a known role used to stay in the secret and grant operator; it is an
// error that names the token and never shows its secret.
func TestParseTokensRefusesAMistypedRole(t *testing.T) {
	t.Parallel()
	const secret = "audit-secret-0123456789"
	for _, spec := range []string{
		"audit:" + secret + ":Viewer",
		"audit:" + secret + ":viewers",
		"audit:" + secret + ": viewer",
		"audit:" + secret + ":",
		"audit:" + secret + ":admin",
		"audit:" + secret + ":viewer:x",
		"ops:ops-token-0123456789,audit:" + secret + ":VIEWER",
	} {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			tokens, err := admin.ParseTokens(spec)
			require.Error(t, err, "parsed as %s", tokens.Summary())
			require.Contains(t, err.Error(), "audit")
			require.NotContains(t, err.Error(), secret)
		})
	}
	// A bare secret with colons in it: its pieces are not printed as a
	// name either.
	for _, spec := range []string{"x7/Kq+Zr:a8w2Lm0pQ4", "x7/Kq+Zr:a8w2:Lm0pQ4", "x7/Kq+Zr:a8w2:Lm0p:Q4"} {
		_, err := admin.ParseTokens(spec)
		require.Error(t, err, spec)
		require.NotContains(t, err.Error(), "x7/Kq+Zr", spec)
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
