package reconcile

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPauseFollowsRetryAfterCapped: a 429/503 pauses the source until its
// Retry-After, in seconds or as an HTTP date, at least a second and at
// most max_pause (a number too large for a Duration included), or for
// pause_default without one.
func TestPauseFollowsRetryAfterCapped(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	cfg := Config{PauseDefault: time.Minute, MaxPause: 15 * time.Minute}
	for retryAfter, want := range map[string]time.Duration{
		"":                     time.Minute,
		"120":                  2 * time.Minute,
		"0":                    time.Second,
		"3600":                 15 * time.Minute,
		"9223372037":           15 * time.Minute,
		"99999999999999999999": time.Minute, // not a number Go reads: the default
		"soon":                 time.Minute,
		now.Add(5 * time.Minute).Format(http.TimeFormat): 5 * time.Minute,
		now.Add(-time.Hour).Format(http.TimeFormat):      time.Second,
	} {
		g := newGate("alipay", cfg)
		g.configure(cfg, func() time.Time { return now })
		until := g.pause(http.StatusTooManyRequests, retryAfter)
		require.Equal(t, now.Add(want), until, "Retry-After %q", retryAfter)
		require.Contains(t, g.blocked(), "paused until", retryAfter)
		require.Contains(t, g.state().PauseReason, "HTTP 429")
	}
}

// TestCircuitOpensAfterARunOfFailuresAndOneQueryDecides: circuit_after
// unreachable queries in a row open it; any answer in between resets the
// count; after circuit_open one failure opens it again, one answer
// closes it.
func TestCircuitOpensAfterARunOfFailuresAndOneQueryDecides(t *testing.T) {
	now := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	cfg := Config{CircuitAfter: 3, CircuitOpen: 5 * time.Minute}
	g := newGate("wechatpay", cfg)
	g.configure(cfg, func() time.Time { return now })
	require.False(t, g.answered(OutcomeUnreachable, nil))
	require.False(t, g.answered(OutcomeUnreachable, nil))
	require.False(t, g.answered(OutcomeNothing, nil), "an answer resets the run")
	require.False(t, g.answered(OutcomeUnreachable, nil))
	require.False(t, g.answered(OutcomeUnreachable, nil))
	require.Empty(t, g.blocked())
	require.True(t, g.answered(OutcomeUnreachable, nil))
	require.Contains(t, g.blocked(), "circuit open until 2026-12-06T03:05:00Z")
	now = now.Add(5 * time.Minute)
	require.Empty(t, g.blocked(), "one query decides")
	require.True(t, g.answered(OutcomeUnreachable, nil), "a failure opens it again")
	now = now.Add(5 * time.Minute)
	require.False(t, g.answered(OutcomeBadSignature, nil), "an answer of any kind closes it")
	require.Empty(t, g.blocked())
	require.Zero(t, g.state().Failures)
	require.Equal(t, 2, g.state().CircuitOpened)
}

// TestRateMustFitTheQueryTimeout: a rate slower than one query per
// query_timeout is refused at start (every query would time out waiting
// for it).
func TestRateMustFitTheQueryTimeout(t *testing.T) {
	require.ErrorContains(t, Config{Rate: 0.05}.Validate(), "scheduler.reconcile.rate (0.05 a second) must allow a query within query_timeout (10s)")
	require.ErrorContains(t, Config{Rate: 1, QueryTimeout: time.Second}.Validate(), "must allow a query")
	require.NoError(t, Config{Rate: 0.5, QueryTimeout: 5 * time.Second}.Validate())
	require.NoError(t, Config{}.Validate())
}
