package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
)

// TestDedupeMaxAge: events are remembered 90 days unless the file says
// otherwise; 0 keeps them; a value shorter than max_age or than Adyen's
// 30-day resend window is refused at start.
func TestDedupeMaxAge(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	cfg, err := config.Parse([]byte(valid), kinds)
	require.NoError(t, err)
	require.Equal(t, 90*24*time.Hour, cfg.Scheduler.Retention.DedupeMaxAge)

	shipped, err := config.Load(filepath.Join("..", "..", "configs", "callgate.yaml"), kinds)
	require.NoError(t, err)
	require.Equal(t, 2160*time.Hour, shipped.Scheduler.Retention.DedupeMaxAge)

	for _, ok := range []string{"scheduler: {retention: {dedupe_max_age: 0s}}\n", "scheduler: {retention: {max_age: 720h, dedupe_max_age: 720h}}\n",
		"scheduler: {retention: {max_age: 0s, dedupe_max_age: 8760h}}\n"} {
		_, err = config.Parse([]byte(ok+valid), kinds)
		require.NoError(t, err, strings.TrimSpace(ok))
	}
	require.Zero(t, func() time.Duration {
		cfg, err := config.Parse([]byte("scheduler: {retention: {dedupe_max_age: 0s}}\n"+valid), kinds)
		require.NoError(t, err)
		return cfg.Scheduler.Retention.DedupeMaxAge
	}(), "0 keeps them")

	for _, tc := range []struct{ name, prefix, want string }{
		{"shorter than the payloads", "scheduler: {retention: {max_age: 1440h, dedupe_max_age: 1000h}}\n",
			"scheduler.retention.dedupe_max_age: 1000h0m0s must be at least max_age (1440h0m0s)"},
		{"shorter than a platform resends", "scheduler: {retention: {max_age: 0s, dedupe_max_age: 168h}}\n",
			"scheduler.retention.dedupe_max_age: 168h0m0s must be at least 720h0m0s, the longest platform retry window"},
		{"negative", "scheduler: {retention: {dedupe_max_age: -1h}}\n", "scheduler.retention.dedupe_max_age: -1h0m0s must be at least max_age"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.prefix+valid), kinds)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
}
