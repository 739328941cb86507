package admin_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

const shopifyAPISecret = "shpss_admin_api_test"

// postShopify sends a Shopify order webhook and returns its log id.
func (e *apiEnv) postShopify(t *testing.T, webhookID, topic, body string) int64 {
	t.Helper()
	m := hmac.New(sha256.New, []byte(shopifyAPISecret))
	m.Write([]byte(body))
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(m.Sum(nil)))
	h.Set("X-Shopify-Webhook-Id", webhookID)
	h.Set("X-Shopify-Topic", topic)
	h.Set("X-Shopify-Shop-Domain", "api-test.myshopify.com")
	a := testenv.PostRaw(t, e.gw.URL, "shopify", []byte(body), h)
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	var ans struct {
		Callbacks []platform.Stored `json:"callbacks"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &ans))
	require.Len(t, ans.Callbacks, 1)
	return ans.Callbacks[0].LogID
}

// TestAdminAPIPresetCallbacks: an on-call engineer sees a preset
// callback's raw body and its normalized event, the note of an attempt
// that changed nothing, and replays a FAILED one once its cause is fixed.
func TestAdminAPIPresetCallbacks(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, testenv.WithPlatform("shopify", platform.Config{Secrets: []string{shopifyAPISecret}, ShopDomains: "api-test.myshopify.com"}))

	body := `{"id":4501,"name":"#4501","currency":"USD","total_price":"12.30","financial_status":"paid"}`
	failed := e.postShopify(t, "wh-api-1", "orders/paid", body)
	e.waitStatus(t, failed, callback.StatusFailed) // no such order yet

	var d struct {
		Payload    string         `json:"payload"`
		Normalized map[string]any `json:"normalized"`
		LastError  string         `json:"last_error"`
	}
	require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/callbacks/%d", failed), opsToken, nil, &d))
	require.Equal(t, body, d.Payload, "the raw body as signed")
	require.Equal(t, map[string]any{"orderCode": "api-test.myshopify.com/#4501", "paymentNo": "4501", "amount": float64(1230), "currency": "USD", "status": "SUCCESS"}, d.Normalized)
	require.Equal(t, "order not found", d.LastError)

	e.createOrder(t, "api-test.myshopify.com/#4501", 1230, "USD")
	path := fmt.Sprintf("/admin/api/callbacks/%d/replay", failed)
	require.Equal(t, http.StatusOK, e.call(t, "POST", path, opsToken, map[string]any{"reason": "order imported late"}, nil))
	e.waitStatus(t, failed, callback.StatusSuccess)
	var paid string
	require.NoError(t, e.st.DB.Raw("SELECT payment_status FROM orders WHERE order_code = 'api-test.myshopify.com/#4501'").Scan(&paid).Error)
	require.Equal(t, "PAID", paid, "the replay reads the stored normalized event")

	pending := `{"id":4502,"name":"#4502","currency":"USD","total_price":"12.30","financial_status":"pending"}`
	other := e.postShopify(t, "wh-api-2", "orders/updated", pending)
	e.waitStatus(t, other, callback.StatusSuccess)
	var o struct {
		Attempts []struct {
			Outcome string  `json:"outcome"`
			Note    *string `json:"note"`
		} `json:"attempt_history"`
	}
	require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/callbacks/%d", other), opsToken, nil, &o))
	require.Len(t, o.Attempts, 1)
	require.Equal(t, "SUCCESS", o.Attempts[0].Outcome)
	require.NotNil(t, o.Attempts[0].Note)
	require.Equal(t, `shopify order financial_status "pending" is not paid, and it is not cancelled`, *o.Attempts[0].Note)

	var plain map[string]any
	demo := e.failedPayment(t, "ORD-API-PLAIN", 100)
	require.Equal(t, http.StatusOK, e.call(t, "GET", fmt.Sprintf("/admin/api/callbacks/%d", demo), opsToken, nil, &plain))
	require.NotContains(t, plain, "normalized", "a source without a preset has no normalized event")
}
