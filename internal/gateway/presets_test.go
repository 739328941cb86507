package gateway_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/gateway"
	"callgate/internal/logging"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// TestPresetSourcesWithoutKeysAreDisabled: the shipped configuration lists
// every platform; those whose keys are unset answer 404 and are named in
// one start-up line, the one given its key serves.
func TestPresetSourcesWithoutKeysAreDisabled(t *testing.T) {
	cfg := testenv.Config(t, testenv.WithPlatform("stripe", platform.Config{Secrets: []string{"whsec_enabled"}}))
	var disabled []string
	for _, s := range cfg.Sources {
		if s.Disabled() {
			disabled = append(disabled, s.Name)
		}
	}
	require.Contains(t, disabled, "shopify")
	require.NotContains(t, disabled, "stripe")

	logs := &testenv.SyncBuffer{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- gateway.Run(ctx, cfg, logging.New(logging.Config{Level: "info", Format: "json"}, logs), ln)
	}()
	defer func() { cancel(); require.NoError(t, <-done) }()
	url := "http://" + ln.Addr().String()
	testenv.WaitReadyURL(t, url)

	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "sources disabled") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1, "one line lists the disabled sources:\n%s", logs.String())
	require.Contains(t, lines[0], `"sources":"`+strings.Join(disabled, ", ")+`"`)

	for _, name := range disabled {
		a := testenv.PostRaw(t, url, name, []byte(`{}`), http.Header{"Content-Type": {"application/json"}})
		require.Equal(t, http.StatusNotFound, a.Status, name)
		require.JSONEq(t, `{"error":"unknown source"}`, string(a.Body), name)
	}
	a := testenv.PostRaw(t, url, "stripe", []byte(`{}`), http.Header{"Content-Type": {"application/json"}})
	require.Equal(t, http.StatusUnauthorized, a.Status, "stripe is enabled: an unsigned request is refused, not unknown")
}

// TestPresetKeysSetButInvalidStopTheStart: a key that is set but unusable
// is a configuration error naming the source and the key.
func TestPresetKeysSetButInvalidStopTheStart(t *testing.T) {
	cfg := testenv.Config(t)
	for i := range cfg.Sources {
		if cfg.Sources[i].Name == "stripe" {
			cfg.Sources[i].Platform.Secrets = []string{" whsec_with_a_space"}
		}
	}
	err := cfg.Validate([]string{"payment", "logistics"})
	require.ErrorContains(t, err, "(stripe).platform.secrets: secrets[0]: secret has leading or trailing whitespace")
	require.NotContains(t, err.Error(), "whsec_with_a_space", "the key itself is never printed")
}
