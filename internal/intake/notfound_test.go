package intake_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/require"

	"callgate/internal/intake"
	"callgate/internal/metrics"
)

// TestNotFoundNamesTheSource: a disabled source answers 404 saying it is
// not enabled, naming it but not why (that is the log's); a source no
// config names answers 404 naming what was asked for, shortened, so a
// sender who mistyped the URL sees what the gateway read.
func TestNotFoundNamesTheSource(t *testing.T) {
	t.Parallel()
	gin.SetMode(gin.ReleaseMode)
	var logs bytes.Buffer
	const why = "platform.secrets (STRIPE_WEBHOOK_SECRET) not set"
	h := &intake.Handler{
		Sources:  map[string]*intake.Source{},
		Disabled: map[string]string{"stripe": why},
		Log:      slog.New(slog.NewJSONHandler(&logs, nil)),
		Metrics:  metrics.New("gateway"),
		Now:      time.Now,
	}
	r := gin.New()
	r.POST("/callbacks/:source", h.Callback)
	post := func(source string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/callbacks/"+source, strings.NewReader(`{}`)))
		return w
	}

	w := post("stripe")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.JSONEq(t, `{"error":"source \"stripe\" is not enabled on this gateway"}`, w.Body.String())
	require.NotContains(t, w.Body.String(), "STRIPE_WEBHOOK_SECRET", "why is the operator's, in the log")
	require.Contains(t, logs.String(), `"msg":"intake: request to a disabled source (answered 404 not enabled)"`)
	require.Contains(t, logs.String(), why)

	w = post("strpie")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.JSONEq(t, `{"error":"unknown source \"strpie\""}`, w.Body.String())

	w = post(strings.Repeat("x", 500))
	require.Equal(t, http.StatusNotFound, w.Code)
	require.JSONEq(t, `{"error":"unknown source \"`+strings.Repeat("x", 61)+`…\""}`, w.Body.String(), "a long name is shortened")

	w = post("%3Cscript%3E")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	require.JSONEq(t, `{"error":"unknown source \"<script>\""}`, w.Body.String())
}
