package outbound_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/outbound"
)

// TestRedirectIsNotFollowed: a 307 to another address is an error naming
// where it pointed, and the other address is never asked (the request's
// Authorization header never reaches it).
func TestRedirectIsNotFollowed(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, `{"believed":true}`)
	}))
	defer elsewhere.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+"/v1/events", code)
		}))
		req, err := http.NewRequest(http.MethodGet, api.URL+"/v1/events", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer sk_live_secret")
		res, err := outbound.Client(outbound.Options{Timeout: 5 * time.Second}).Do(req)
		api.Close()
		if res != nil {
			_ = res.Body.Close()
		}
		require.ErrorIs(t, err, outbound.ErrRedirect, "HTTP %d", code)
		require.Contains(t, err.Error(), elsewhere.URL+"/v1/events")
	}
	require.Zero(t, reached.Load(), "the redirect's target was asked")
}

// TestOnlyHTTPSOrLoopback: http to any other host is refused before a
// connection is made; the configured base is checked the same way.
func TestOnlyHTTPSOrLoopback(t *testing.T) {
	for _, u := range []string{"http://example.com/v3/certificates", "http://10.0.0.1:8080/", "ftp://example.com/", "http://[::ffff:8.8.8.8]/"} {
		_, err := outbound.Client(outbound.Options{Timeout: time.Second}).Get(u)
		require.ErrorIs(t, err, outbound.ErrInsecure, u)
		_, err = outbound.Base("X_API_BASE", u, "")
		require.Error(t, err, u)
	}
	for _, u := range []string{"https://api.stripe.com", "http://127.0.0.1:9", "http://localhost:9", "http://[::1]:9"} {
		parsed, err := url.Parse(u)
		require.NoError(t, err)
		require.NoError(t, outbound.CheckURL(parsed), u)
		base, err := outbound.Base("X_API_BASE", u+"/", "")
		require.NoError(t, err)
		require.Equal(t, u, base)
	}
	base, err := outbound.Base("X_API_BASE", " ", "https://api.mch.weixin.qq.com")
	require.NoError(t, err)
	require.Equal(t, "https://api.mch.weixin.qq.com", base)
}

// TestOversizeAnswerIsAnError: an answer longer than the limit is an error
// whether its length is announced or not; one of exactly the limit is read
// whole.
func TestOversizeAnswerIsAnError(t *testing.T) {
	const limit = 1000
	var size atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := strings.Repeat("x", int(size.Load()))
		if r.URL.Query().Get("chunked") != "" {
			w.(http.Flusher).Flush() // no Content-Length
		}
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	hc := outbound.Client(outbound.Options{Timeout: 5 * time.Second, MaxAnswerBytes: limit})
	get := func(q string) ([]byte, error) {
		res, err := hc.Get(srv.URL + "/?" + q)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		return io.ReadAll(res.Body)
	}
	for _, q := range []string{"", "chunked=1"} {
		size.Store(limit + 1)
		_, err := get(q)
		require.ErrorIs(t, err, outbound.ErrTooLarge, "query %q", q)
		size.Store(limit)
		body, err := get(q)
		require.NoError(t, err, "query %q", q)
		require.Len(t, body, limit)
	}
	size.Store(limit + 1)
	_, err := get("")
	require.True(t, errors.Is(err, outbound.ErrTooLarge))
}

// TestTimeout: the whole exchange is bounded.
func TestTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer srv.Close()
	start := time.Now()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL, nil)
	_, err := outbound.Client(outbound.Options{Timeout: 200 * time.Millisecond}).Do(req)
	require.Error(t, err)
	require.Less(t, time.Since(start), 4*time.Second)
}
