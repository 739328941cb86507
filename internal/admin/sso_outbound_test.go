package admin

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSSOFollowsNoRedirectAndReadsNoOversizeAnswer: the provider's client
// is callgate's one outbound client: a discovery document behind a
// redirect is not fetched (the redirect's target is never asked), and one
// longer than 1 MiB is not read.
func TestSSOFollowsNoRedirectAndReadsNoOversizeAnswer(t *testing.T) {
	var came atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		came.Add(1)
		_, _ = io.WriteString(w, `{"issuer":"x"}`)
	}))
	defer elsewhere.Close()
	var oversize atomic.Bool
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if oversize.Load() {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"issuer":"`+strings.Repeat("x", 2<<20)+`"}`)
			return
		}
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer idp.Close()
	discover := func() error {
		s := NewSSO(SSOConfig{Issuer: idp.URL, ClientID: "callgate", ClientSecret: "client-secret-0123456789",
			RedirectURL: "https://callgate.example.com/admin/oidc/callback", Operators: []string{"ops"}}, nil, slog.New(slog.DiscardHandler))
		_, err := s.discoverNow(t.Context())
		return err
	}
	err := discover()
	require.ErrorContains(t, err, "redirect")
	require.Zero(t, came.Load(), "the redirect was followed")
	oversize.Store(true)
	require.ErrorContains(t, discover(), "longer than callgate reads")
}
