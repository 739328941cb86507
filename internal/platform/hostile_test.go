package platform_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/testenv"
)

// TestStripeShopifyHostile sends correctly signed but unusable bodies and
// oversized ones: each gets a 4xx with a reason, nothing is stored, and a
// valid notification is still accepted afterwards.
func TestStripeShopifyHostile(t *testing.T) {
	p := testenv.StartPlatform(t, "stripe", stripeConfig(stripeSecret),
		testenv.WithPlatform("shopify", shopifyConfig(shopifySecret)))
	stripe := func(body string) (string, []byte, http.Header) {
		return "stripe", []byte(body), stripeSigned([]byte(body), stripeSecret, time.Now())
	}
	shopify := func(body string) (string, []byte, http.Header) {
		return "shopify", []byte(body), shopifySigned([]byte(body), shopifySecret, "wh-h", "orders/paid")
	}
	huge := `{"id":"evt_h","type":"payment_intent.succeeded","pad":"` + strings.Repeat("x", 2<<20) + `"}`
	cases := []struct {
		name   string
		req    func() (string, []byte, http.Header)
		status int
		reason string
	}{
		{"not JSON", func() (string, []byte, http.Header) { return stripe("id=evt_1&type=x") }, 400, "not a valid JSON object"},
		{"JSON array", func() (string, []byte, http.Header) { return stripe(`[{"id":"evt_1"}]`) }, 400, "not a valid JSON object"},
		{"no order code", func() (string, []byte, http.Header) {
			return stripe(`{"id":"evt_h","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"pi_1","amount":100,"amount_received":100}}}`)
		}, 400, `"data.object.metadata.order_code\" is missing`},
		{"amount as a float", func() (string, []byte, http.Header) {
			return stripe(`{"id":"evt_h","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"pi_1","amount_received":1.5,"metadata":{"order_code":"O"}}}}`)
		}, 400, "must be a string or an integer"},
		{"negative amount", func() (string, []byte, http.Header) {
			return stripe(`{"id":"evt_h","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"pi_1","amount_received":-5,"metadata":{"order_code":"O"}}}}`)
		}, 400, "not a decimal number"},
		{"order code of 300 bytes", func() (string, []byte, http.Header) {
			return stripe(`{"id":"evt_h","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"pi_1","amount_received":5,"currency":"usd","metadata":{"order_code":"` + strings.Repeat("o", 300) + `"}}}}`)
		}, 400, "longer than"},
		{"body over the limit", func() (string, []byte, http.Header) { return stripe(huge) }, 413, "size limit"},
		{"deep nesting", func() (string, []byte, http.Header) {
			return shopify(strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000))
		}, 400, ""},
		{"shopify total as a number", func() (string, []byte, http.Header) {
			return shopify(`{"id":1,"name":"#1","financial_status":"paid","currency":"EUR","total_price":25.5}`)
		}, 400, "must be a string or an integer"},
	}
	for _, c := range cases {
		src, body, h := c.req()
		a := p.Post(t, src, body, h)
		require.Equal(t, c.status, a.Status, "%s: %s", c.name, a.Body)
		require.Contains(t, string(a.Body), `"error":`, c.name)
		require.Contains(t, string(a.Body), c.reason, c.name)
	}
	require.Zero(t, p.Callbacks(t, "stripe")+p.Callbacks(t, "shopify"), "nothing refused is stored")

	p.CreateOrder(t, "ORD-H-1", 100, "USD")
	src, body, h := stripe(string(stripeEvent("evt_ok", "payment_intent.succeeded", "ORD-H-1", "pi_ok", 100)))
	require.Equal(t, http.StatusOK, p.Post(t, src, body, h).Status, "the gateway still serves")
	p.Settled(t, "stripe", "evt_ok")
}
