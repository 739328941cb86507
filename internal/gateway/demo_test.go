package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/demo"
	"callgate/internal/testenv"
)

// TestDemoPrintsTheConsoleAndItsToken: in demo mode with the demo admin
// token (config.Parse gives it when none is configured), the gateway
// prints the console's URL and the token once it listens, and the token
// opens the admin API; with a token of one's own, neither is printed.
func TestDemoPrintsTheConsoleAndItsToken(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.Admin.Token = demo.AdminToken })
	url, logs := startLogged(t, cfg)
	want := "gateway: demo: the console is at " + url + "/admin/, log in with the demo admin token " + demo.AdminToken
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), want) }, 5*time.Second, 10*time.Millisecond, "%s", logs)
	require.Equal(t, 1, strings.Count(logs.String(), "the console is at"), "printed once")
	require.Equal(t, http.StatusOK, testenv.AdminCall(t, url, http.MethodGet, "/admin/api/stats", demo.AdminToken, nil, nil))

	own := testenv.Config(t, func(c *config.Config) { c.Admin.Token = "ops:a-token-of-our-own" })
	url, logs = startLogged(t, own)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "gateway: demo: try scripts/demo-callback.sh") }, 5*time.Second, 10*time.Millisecond)
	require.NotContains(t, logs.String(), "the console is at")
	require.Equal(t, http.StatusUnauthorized, testenv.AdminCall(t, url, http.MethodGet, "/admin/api/stats", demo.AdminToken, nil, nil))
}
