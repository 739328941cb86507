package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/signature"
)

// Secret returns the first secret of the named source.
func Secret(t testing.TB, cfg *config.Config, source string) string {
	t.Helper()
	for _, s := range cfg.Sources {
		if s.Name == source {
			return s.Signature.Secrets[0]
		}
	}
	require.FailNow(t, "no such source", source)
	return ""
}

// PaymentBody is a paydemo payload.
func PaymentBody(orderCode, paymentNo string, amount int64) []byte {
	return fmt.Appendf(nil, `{"orderCode":%q,"paymentNo":%q,"amount":%d,"status":"SUCCESS","paidAt":%q}`,
		orderCode, paymentNo, amount, time.Now().UTC().Format(time.RFC3339))
}

// ShipmentBody is a shipdemo payload.
func ShipmentBody(waybill, orderCode string, seq int, status string) []byte {
	return fmt.Appendf(nil, `{"waybillNo":%q,"orderCode":%q,"seq":%d,"status":%q,"location":"Hamburg","occurredAt":%q}`,
		waybill, orderCode, seq, status, time.Now().UTC().Format(time.RFC3339))
}

// PaydemoHeaders signs body the Standard Webhooks way for paydemo.
func PaydemoHeaders(t testing.TB, cfg *config.Config, msgID string, ts time.Time, body []byte) http.Header {
	t.Helper()
	sig, err := signature.SignStandardWebhooks(Secret(t, cfg, "paydemo"), msgID, ts, body)
	require.NoError(t, err)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("webhook-id", msgID)
	h.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
	h.Set("webhook-signature", sig)
	return h
}

// ShipdemoHeaders signs body with HMAC-SHA256 hex in X-Signature.
func ShipdemoHeaders(t testing.TB, cfg *config.Config, body []byte) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Signature", signature.SignHMAC(Secret(t, cfg, "shipdemo"), body, "hex", ""))
	return h
}

// Answer is a decoded gateway answer.
type Answer struct {
	Status    int    `json:"-"`
	Body      []byte `json:"-"`
	Accepted  string `json:"status"`
	LogID     int64  `json:"log_id"`
	Duplicate bool   `json:"duplicate"`
	Error     string `json:"error"`
}

// Post sends body with headers to POST /callbacks/{source} and reads the
// JSON answer.
func Post(t testing.TB, baseURL, source string, body []byte, h http.Header) Answer {
	t.Helper()
	r := PostRaw(t, baseURL, source, body, h)
	a := Answer{Status: r.Status, Body: r.Body}
	require.NoError(t, json.Unmarshal(r.Body, &a), "answer is not JSON: %s", r.Body)
	return a
}
