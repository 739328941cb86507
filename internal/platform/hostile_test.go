package platform_test

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/testenv"
)

// shopifyNumberTotal is a paid order without updated_at (its event id is
// its digest) whose total is a number, not Shopify's decimal string.
const shopifyNumberTotal = `{"id":1,"name":"#1","financial_status":"paid","currency":"EUR","total_price":25.5}`

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
		{"body over the limit", func() (string, []byte, http.Header) { return stripe(huge) }, 413, "size limit"},
		{"deep nesting", func() (string, []byte, http.Header) {
			return shopify(strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000))
		}, 400, ""},
	}
	for _, c := range cases {
		src, body, h := c.req()
		a := p.Post(t, src, body, h)
		require.Equal(t, c.status, a.Status, "%s: %s", c.name, a.Body)
		require.Contains(t, string(a.Body), `"error":`, c.name)
		require.Contains(t, string(a.Body), c.reason, c.name)
	}
	require.Zero(t, p.Callbacks(t, "stripe")+p.Callbacks(t, "shopify"), "nothing refused is stored")

	// Signed and ours, but not readable: stored (Stripe would otherwise
	// retry for three days and the payment would exist only in our logs),
	// answered 2xx, FAILED with the reason, nothing processed.
	for _, c := range []struct {
		name, event string
		req         func() (string, []byte, http.Header)
		reason      string
	}{
		{"no order code (Checkout puts metadata on the Session)", "evt_nocode", func() (string, []byte, http.Header) {
			return stripe(`{"id":"evt_nocode","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"object":"payment_intent","id":"pi_1","amount":100,"amount_received":100,"currency":"usd"}}}`)
		}, `the notification could not be read: field "data.object.metadata.order_code" is missing`},
		{"amount as a float", "evt_float", func() (string, []byte, http.Header) {
			return stripe(`{"id":"evt_float","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"pi_1","amount_received":1.5,"metadata":{"order_code":"O"}}}}`)
		}, `the notification could not be read: field "data.object.amount_received" must be a string or an integer`},
		{"negative amount", "evt_neg", func() (string, []byte, http.Header) {
			return stripe(`{"id":"evt_neg","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"pi_1","amount_received":-5,"metadata":{"order_code":"O"}}}}`)
		}, `the notification could not be read: data.object.amount_received: amount "-5" is not a decimal number`},
		{"order code of 300 bytes (no order has one)", "evt_h", func() (string, []byte, http.Header) {
			return stripe(`{"id":"evt_h","type":"payment_intent.succeeded","livemode":false,"data":{"object":{"id":"pi_1","amount_received":5,"currency":"usd","metadata":{"order_code":"` + strings.Repeat("o", 300) + `"}}}}`)
		}, `the notification could not be read: the order code at data.object.metadata.order_code is longer than 191 characters`},
		{"shopify total as a number", "sha256:" + fmt.Sprintf("%x", sha256.Sum256([]byte(shopifyNumberTotal))) + ":paid", func() (string, []byte, http.Header) {
			return shopify(shopifyNumberTotal)
		}, `the notification could not be read: field "total_price" must be a string or an integer`},
	} {
		src, body, h := c.req()
		a := p.Post(t, src, body, h)
		require.Equal(t, http.StatusOK, a.Status, "%s: %s", c.name, a.Body)
		row := p.St.WaitStatus(t, logIDOf(t, p, src, c.event), callback.StatusFailed)
		require.Equal(t, c.reason, *row.LastError, c.name)
	}

	p.CreateOrder(t, "ORD-H-1", 100, "USD")
	src, body, h := stripe(string(stripeEvent("evt_ok", "payment_intent.succeeded", "ORD-H-1", "pi_ok", 100)))
	require.Equal(t, http.StatusOK, p.Post(t, src, body, h).Status, "the gateway still serves")
	p.Settled(t, "stripe", "evt_ok")
}
