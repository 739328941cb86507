package platform_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

const shopifySecret = "shpss_callgate_test_secret"

// shopifyOrder is an order resource as Shopify's orders/paid sends it.
func shopifyOrder(name string, id int64, total string) []byte {
	return fmt.Appendf(nil, `{"id":%d,"name":%q,"email":"buyer@example.com","currency":"EUR","total_price":%q,`+
		`"financial_status":"paid","line_items":[{"id":1,"title":"Mug","quantity":1,"price":%q}]}`, id, name, total, total)
}

// shopifySigned signs body as Shopify does: base64 HMAC-SHA256 of the raw
// body with the app secret.
func shopifySigned(body []byte, secret, webhookID, topic string) http.Header {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(m.Sum(nil)))
	h.Set("X-Shopify-Webhook-Id", webhookID)
	h.Set("X-Shopify-Topic", topic)
	h.Set("X-Shopify-Shop-Domain", "callgate-test.myshopify.com")
	return h
}

func TestShopifyPaysTheOrder(t *testing.T) {
	p := testenv.StartPlatform(t, "shopify", platform.Config{Secrets: []string{"old-secret-still-configured", shopifySecret}})
	p.CreateOrder(t, "#1001", 2550, "EUR")
	body := shopifyOrder("#1001", 820982911946154508, "25.50")

	a := p.Post(t, "shopify", body, shopifySigned(body, shopifySecret, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/paid"))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	row := p.Settled(t, "shopify", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")
	require.Equal(t, "#1001", row.BusinessKey)
	require.JSONEq(t, `{"orderCode":"#1001","paymentNo":"820982911946154508","amount":2550,"currency":"EUR","status":"SUCCESS"}`, string(row.Normalized))
	o := p.Order(t, "#1001")
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Equal(t, "820982911946154508", *o.PaymentNo)

	again := p.Post(t, "shopify", body, shopifySigned(body, shopifySecret, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/paid"))
	require.Equal(t, http.StatusOK, again.Status)
	require.Contains(t, string(again.Body), `"duplicate":true`)
	require.Equal(t, 1, p.Callbacks(t, "shopify"))

	// The topic header is not signed: a captured body of an unpaid order
	// re-sent as orders/paid under a fresh webhook id pays nothing.
	p.CreateOrder(t, "#1002", 2550, "EUR")
	pending := []byte(`{"id":820982911946154509,"name":"#1002","currency":"EUR","total_price":"25.50","financial_status":"pending"}`)
	require.Equal(t, http.StatusOK, p.Post(t, "shopify", pending, shopifySigned(pending, shopifySecret, "wh-forged", "orders/paid")).Status)
	row = p.Settled(t, "shopify", "wh-forged")
	require.Contains(t, p.LastNote(t, row.ID), `financial_status "pending" is not paid`)
	require.Equal(t, payment.OrderUnpaid, p.Order(t, "#1002").PaymentStatus)

	// Another topic is stored and changes nothing.
	other := shopifyOrder("#1001", 820982911946154508, "25.50")
	require.Equal(t, http.StatusOK, p.Post(t, "shopify", other, shopifySigned(other, shopifySecret, "wh-2", "orders/updated")).Status)
	row = p.Settled(t, "shopify", "wh-2")
	require.Contains(t, p.LastNote(t, row.ID), "orders/updated")
}

func TestShopifyRefusals(t *testing.T) {
	p := testenv.StartPlatform(t, "shopify", platform.Config{Secrets: []string{shopifySecret}})
	body := shopifyOrder("#2001", 1, "1.00")
	noID := shopifySigned(body, shopifySecret, "wh-x", "orders/paid")
	noID.Del("X-Shopify-Webhook-Id")
	cases := map[string]struct {
		body   []byte
		h      http.Header
		status int
	}{
		"wrong signature": {body, shopifySigned(body, "not-the-secret", "wh-x", "orders/paid"), http.StatusUnauthorized},
		"tampered body":   {shopifyOrder("#2001", 1, "0.01"), shopifySigned(body, shopifySecret, "wh-x", "orders/paid"), http.StatusUnauthorized},
		"no signature":    {body, http.Header{"X-Shopify-Webhook-Id": {"wh-x"}}, http.StatusUnauthorized},
		"no webhook id":   {body, noID, http.StatusBadRequest},
		"amount with more decimals than the currency": {shopifyOrder("#2001", 1, "1.001"),
			shopifySigned(shopifyOrder("#2001", 1, "1.001"), shopifySecret, "wh-y", "orders/paid"), http.StatusBadRequest},
	}
	for name, c := range cases {
		a := p.Post(t, "shopify", c.body, c.h)
		require.Equal(t, c.status, a.Status, "%s: %s", name, a.Body)
		require.Contains(t, string(a.Body), `"error"`, name)
	}
	require.Zero(t, p.Callbacks(t, "shopify"), "nothing refused is stored")
}
