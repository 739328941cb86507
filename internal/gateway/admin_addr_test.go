package gateway_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/gateway"
	"callgate/internal/testenv"
)

const adminAddrToken = "ops-token-0123456789"

// status GETs (or, with a body, POSTs) url and returns the status and body,
// without following redirects.
func status(t *testing.T, method, url string, body []byte, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(string(body)))
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// TestAdminAddrSeparatesOperatorSurface: with http.admin_addr the admin
// page, its API and /metrics answer only on the admin listener; the public
// listener serves the intake and health and answers 404 to the rest. Both
// listeners stop on shutdown.
func TestAdminAddrSeparatesOperatorSurface(t *testing.T) {
	t.Parallel()
	pubLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testenv.Config(t, func(c *config.Config) {
		c.Admin.Token = "ops:" + adminAddrToken
		c.HTTP.AdminAddr = adminLn.Addr().String()
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- gateway.RunListeners(ctx, cfg, testenv.Logger(t, cfg), gateway.Listeners{Public: pubLn, Admin: adminLn})
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	})
	pub, adm := "http://"+pubLn.Addr().String(), "http://"+adminLn.Addr().String()
	testenv.WaitReadyURL(t, pub)

	// Public: the intake and health work...
	body := testenv.PaymentBody("ORD-ADMIN-ADDR", "PAY-ADMIN-ADDR", 100)
	a := testenv.Post(t, pub, "paydemo", body, testenv.PaydemoHeaders(t, cfg, "msg_"+testenv.Suffix(), time.Now(), body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	require.Positive(t, a.LogID)
	code, _ := status(t, http.MethodGet, pub+"/healthz", nil, nil)
	require.Equal(t, http.StatusOK, code)
	// ...and the operator surface is not there.
	for _, path := range []string{"/metrics", "/admin/", "/admin/login", "/admin/static/app.js", "/admin/api/callbacks"} {
		code, _ := status(t, http.MethodGet, pub+path, nil, bearer(adminAddrToken))
		require.Equal(t, http.StatusNotFound, code, "public %s", path)
	}
	code, _ = status(t, http.MethodPost, pub+"/admin/login", []byte("token="+adminAddrToken),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	require.Equal(t, http.StatusNotFound, code, "public POST /admin/login")

	// Admin: the page, the API and the metrics answer...
	code, body2 := status(t, http.MethodGet, adm+"/metrics", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body2, "# TYPE")
	code, body2 = status(t, http.MethodGet, adm+"/admin/login", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body2, `name="token"`)
	code, _ = status(t, http.MethodGet, adm+"/admin/", nil, nil)
	require.Equal(t, http.StatusSeeOther, code, "to the login page")
	code, body2 = status(t, http.MethodGet, adm+"/admin/api/callbacks", nil, bearer(adminAddrToken))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body2, "ORD-ADMIN-ADDR", "the callback taken on the public listener")
	// ...and the intake is not there.
	code, _ = status(t, http.MethodPost, adm+"/callbacks/paydemo", body, testenv.PaydemoHeaders(t, cfg, "msg_"+testenv.Suffix(), time.Now(), body))
	require.Equal(t, http.StatusNotFound, code, "admin POST /callbacks/paydemo")

	// Stopping closes both listeners and returns cleanly.
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
		done <- nil // for the cleanup
	case <-time.After(15 * time.Second):
		require.FailNow(t, "gateway did not stop")
	}
	for _, addr := range []string{pubLn.Addr().String(), adminLn.Addr().String()} {
		_, err := net.DialTimeout("tcp", addr, time.Second)
		require.Error(t, err, "%s still accepts connections", addr)
	}
}

// TestAdminAddrUnsetServesAllOnOneListener: without http.admin_addr
// everything stays on the one listener, as before.
func TestAdminAddrUnsetServesAllOnOneListener(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.Admin.Token = "ops:" + adminAddrToken })
	require.Empty(t, cfg.HTTP.AdminAddr, "off in the shipped config")
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	body := testenv.PaymentBody("ORD-ONE-LN", "PAY-ONE-LN", 100)
	a := testenv.Post(t, gw.URL, "paydemo", body, testenv.PaydemoHeaders(t, cfg, "msg_"+testenv.Suffix(), time.Now(), body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	for path, want := range map[string]int{"/healthz": 200, "/metrics": 200, "/admin/login": 200, "/admin/": 303} {
		code, _ := status(t, http.MethodGet, gw.URL+path, nil, nil)
		require.Equal(t, want, code, path)
	}
	code, _ := status(t, http.MethodGet, gw.URL+"/admin/api/callbacks", nil, bearer(adminAddrToken))
	require.Equal(t, http.StatusOK, code)
}

// TestMetricsNotPublicByDefault: without http.admin_addr, /metrics is
// served to anyone only with metrics.public (the shipped file has it off);
// the intake and health endpoints are there all the same.
func TestMetricsNotPublicByDefault(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.Metrics.Public = false })
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	for path, want := range map[string]int{"/metrics": 404, "/healthz": 200, "/readyz": 200} {
		code, _ := status(t, http.MethodGet, gw.URL+path, nil, nil)
		require.Equal(t, want, code, path)
	}
}
