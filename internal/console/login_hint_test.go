package console_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"callgate/internal/admin"
	"callgate/internal/console"
	"callgate/internal/demo"
)

// TestLoginPageNamesTheDemoToken: in demo mode (`make run`: the gateway
// accepts the published demo token) the login page says to log in with
// it; with the operator's own tokens it names only CALLGATE_ADMIN_TOKEN,
// never the demo token.
func TestLoginPageNamesTheDemoToken(t *testing.T) {
	t.Parallel()
	page := func(t *testing.T, setting string) string {
		t.Helper()
		tokens, err := admin.ParseTokens(setting)
		require.NoError(t, err)
		h := &admin.Handler{Tokens: tokens, Log: slog.New(slog.DiscardHandler)}
		r := gin.New()
		console.New(h).Mount(r)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/admin/login", nil))
		require.Equal(t, http.StatusOK, w.Code)
		return w.Body.String()
	}

	demoPage := page(t, demo.AdminToken)
	require.Contains(t, demoPage, `id="demo-token"`)
	require.Contains(t, demoPage, "<code>"+demo.AdminToken+"</code>")
	require.Contains(t, demoPage, "CALLGATE_ADMIN_TOKEN")

	own := page(t, "ops:"+operatorToken+":operator")
	require.NotContains(t, own, demo.AdminToken)
	require.NotContains(t, own, `id="demo-token"`)
	require.Contains(t, own, "One of the tokens in CALLGATE_ADMIN_TOKEN.")
}
