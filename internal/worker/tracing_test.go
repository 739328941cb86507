package worker_test

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/testenv"
	"callgate/internal/worker"
)

// TestSpansExportedOverOTLP: with tracing.otlp_endpoint set, the gateway's
// request span and the worker's processing span reach the collector,
// both in the platform's trace.
func TestSpansExportedOverOTLP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			mu.Lock()
			bodies = append(bodies, b)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()

	cfg := testenv.Config(t, fast, func(c *config.Config) { c.Tracing.OTLPEndpoint = collector.URL })
	gw := testenv.StartGateway(t, cfg)
	gw.WaitReady(t)
	w := testenv.StartWorker(t, cfg, worker.Options{})
	order := testenv.CreateOrders(t, cfg, "otlp", 1)[0]

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	body := testenv.PaymentBody(order, "PAY-OTLP", 1000)
	h := testenv.PaydemoHeaders(t, cfg, "msg_otlp", time.Now(), body)
	h.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	a := testenv.Post(t, gw.URL, "paydemo", body, h)
	require.Equal(t, http.StatusOK, a.Status)
	st := testenv.Store(t, cfg)
	require.Eventually(t, func() bool {
		l, err := st.GetCallback(t.Context(), a.LogID)
		require.NoError(t, err)
		return l.Status == callback.StatusSuccess
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, w.Stop())  // flushes the worker's spans
	require.NoError(t, gw.Stop()) // and the gateway's

	raw, _ := hex.DecodeString(traceID)
	mu.Lock()
	defer mu.Unlock()
	services := map[string]bool{}
	for _, b := range bodies {
		if !bytes.Contains(b, raw) {
			continue
		}
		for _, s := range []string{"callgate-gateway", "callgate-worker"} {
			if bytes.Contains(b, []byte(s)) {
				services[s] = true
			}
		}
	}
	require.Equal(t, map[string]bool{"callgate-gateway": true, "callgate-worker": true}, services,
		"both processes exported spans of the platform's trace")
}
