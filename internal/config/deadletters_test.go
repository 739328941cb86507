package config_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
)

// withStripe is valid plus a Stripe preset source.
const withStripe = valid + `
  - name: stripe
    preset: stripe
    platform: {secrets: ["whsec_test_callgate_stripe"]}
`

// TestDeadLetterSettings: the limits a file leaves out are 100
// notifications and 10 MiB an hour, a source's override replaces only
// what it sets, 0 is no limit, and dead letters are kept 90 days.
func TestDeadLetterSettings(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	cfg, err := config.Parse([]byte(withStripe), kinds)
	require.NoError(t, err)
	n, b := cfg.DeadLetters.For("stripe")
	require.Equal(t, 100, n)
	require.EqualValues(t, 10<<20, b)
	require.Equal(t, 90*24*time.Hour, cfg.Scheduler.Retention.DeadLetterMaxAge)

	cfg, err = config.Parse([]byte("dead_letters: {max_bytes_per_hour: 0, sources: {stripe: {max_per_hour: 7}}}\n"+withStripe), kinds)
	require.NoError(t, err)
	n, b = cfg.DeadLetters.For("stripe")
	require.Equal(t, 7, n, "the source's own")
	require.Zero(t, b, "the section's: no limit")

	shipped, err := config.Load(filepath.Join("..", "..", "configs", "callgate.yaml"), kinds)
	require.NoError(t, err)
	n, b = shipped.DeadLetters.For("adyen")
	require.Equal(t, 100, n)
	require.EqualValues(t, 10<<20, b)
	require.Equal(t, 2160*time.Hour, shipped.Scheduler.Retention.DeadLetterMaxAge)
}

func TestDeadLetterSettingsValidated(t *testing.T) {
	t.Setenv("T_SHIP_SECRET", "s3cret")
	for _, tc := range []struct {
		name, prefix, want string
	}{
		{"unknown source", "dead_letters: {sources: {strype: {max_per_hour: 5}}}\n",
			"dead_letters.sources.strype: no source of that name (sources: paydemo, shipdemo, stripe)"},
		{"a configured source stores none", "dead_letters: {sources: {paydemo: {max_per_hour: 5}}}\n",
			"dead_letters.sources.paydemo: not a preset source"},
		{"negative", "dead_letters: {max_per_hour: -1}\n", "dead_letters.max_per_hour: must not be negative"},
		{"fewer bytes than a body", "dead_letters: {max_bytes_per_hour: 1000}\n",
			"dead_letters.max_bytes_per_hour: 1000 is less than the max_body_bytes (1048576) of source stripe"},
		{"a source's bytes", "dead_letters: {sources: {stripe: {max_bytes_per_hour: 1000}}}\n",
			"dead_letters.sources.stripe.max_bytes_per_hour: 1000 is less than the max_body_bytes"},
		{"dead letters kept shorter than the rest", "scheduler: {retention: {max_age: 720h, dead_letter_max_age: 168h}}\n",
			"scheduler.retention.dead_letter_max_age: 168h0m0s must be at least max_age (720h0m0s)"},
		{"callbacks kept less than a day", "scheduler: {retention: {max_age: 1h}}\n",
			"scheduler.retention.max_age: 1h0m0s must be at least 24h0m0s (retention drops whole UTC days)"},
		{"dead letters deleted while a platform still resends", "scheduler: {retention: {max_age: 0s, dead_letter_max_age: 1h}}\n",
			"scheduler.retention.dead_letter_max_age: 1h0m0s must be at least 720h0m0s, the longest platform retry window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.prefix+withStripe), kinds)
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// A preset source without its keys stores nothing: its bodies are not
	// held to the bytes.
	_, err := config.Parse([]byte("dead_letters: {max_bytes_per_hour: 1000}\n"+strings.Replace(withStripe, "whsec_test_callgate_stripe", "", 1)), kinds)
	require.NoError(t, err)
	// Keeping dead letters (0), or everything else (max_age 0), is allowed.
	for _, ok := range []string{"scheduler: {retention: {dead_letter_max_age: 0s}}\n", "scheduler: {retention: {max_age: 0s}}\n",
		"dead_letters: {max_per_hour: 0, max_bytes_per_hour: 0}\n"} {
		_, err = config.Parse([]byte(ok+withStripe), kinds)
		require.NoError(t, err, strings.TrimSpace(ok))
	}
}
