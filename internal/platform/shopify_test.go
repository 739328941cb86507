package platform_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

const shopifySecret = "shpss_callgate_test_secret"

// shopifyOrder is an order resource as Shopify's orders/paid sends it.
func shopifyOrder(name string, id int64, total string) []byte {
	return fmt.Appendf(nil, `{"id":%d,"name":%q,"email":"buyer@example.com","currency":"EUR","total_price":%q,`+
		`"financial_status":"paid","updated_at":"2026-11-30T12:00:00-05:00","line_items":[{"id":1,"title":"Mug","quantity":1,"price":%q}]}`,
		id, name, total, total)
}

// shopifyCode is the order code of name in the tests' shop.
func shopifyCode(name string) string { return shopifyShop + "/" + name }

// shopifyShop is the shop the tests' deliveries come from.
const shopifyShop = "callgate-test.myshopify.com"

// shopifyConfig is the shopify preset's keys, taking shopifyShop.
func shopifyConfig(secrets ...string) platform.Config {
	return platform.Config{Secrets: secrets, ShopDomains: "other-shop.myshopify.com, " + shopifyShop}
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
	h.Set("X-Shopify-Shop-Domain", shopifyShop)
	return h
}

func TestShopifyPaysTheOrder(t *testing.T) {
	p := testenv.StartPlatform(t, "shopify", shopifyConfig("old-secret-still-configured", shopifySecret))
	p.CreateOrder(t, shopifyCode("#1001"), 2550, "EUR")
	p.CreateOrder(t, "#1001", 2550, "EUR") // another shop's #1001, or an order of another platform
	body := shopifyOrder("#1001", 820982911946154508, "25.50")
	const id = "order:820982911946154508:2026-11-30T12:00:00-05:00:paid"

	a := p.Post(t, "shopify", body, shopifySigned(body, shopifySecret, "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/paid"))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	row := p.Settled(t, "shopify", id)
	require.Equal(t, shopifyCode("#1001"), row.BusinessKey)
	require.JSONEq(t, `{"orderCode":"`+shopifyCode("#1001")+`","paymentNo":"820982911946154508","amount":2550,"currency":"EUR","status":"SUCCESS"}`,
		string(row.Normalized))
	o := p.Order(t, shopifyCode("#1001"))
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Equal(t, "820982911946154508", *o.PaymentNo)
	require.Equal(t, payment.OrderUnpaid, p.Order(t, "#1001").PaymentStatus, "#1001 of the shop, not any #1001")

	// Shopify's retry, and the same body re-sent under a fresh webhook id
	// (the header is not signed): one callback.
	for _, webhookID := range []string{"b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "wh-replayed"} {
		again := p.Post(t, "shopify", body, shopifySigned(body, shopifySecret, webhookID, "orders/paid"))
		require.Equal(t, http.StatusOK, again.Status)
		require.Contains(t, string(again.Body), `"duplicate":true`, webhookID)
	}
	require.Equal(t, 1, p.Callbacks(t, "shopify"))

	// The topic header is not signed, and not read: a captured body of an
	// unpaid order re-sent as orders/paid pays nothing.
	p.CreateOrder(t, shopifyCode("#1002"), 2550, "EUR")
	pending := []byte(`{"id":820982911946154509,"name":"#1002","currency":"EUR","total_price":"25.50","financial_status":"pending","updated_at":"2026-11-30T12:00:00Z"}`)
	require.Equal(t, http.StatusOK, p.Post(t, "shopify", pending, shopifySigned(pending, shopifySecret, "wh-forged", "orders/paid")).Status)
	row = p.Settled(t, "shopify", "order:820982911946154509:2026-11-30T12:00:00Z")
	require.Contains(t, p.LastNote(t, row.ID), `financial_status "pending" is not paid`)
	require.Equal(t, payment.OrderUnpaid, p.Order(t, shopifyCode("#1002")).PaymentStatus)

	// The same order under another topic (orders/updated, which Shopify
	// sends beside orders/paid with the same body) is the same event.
	again := p.Post(t, "shopify", body, shopifySigned(body, shopifySecret, "wh-2", "orders/updated"))
	require.Equal(t, http.StatusOK, again.Status)
	require.Contains(t, string(again.Body), `"duplicate":true`)

	// A body of another resource is keyed by its digest: under another
	// webhook id, a duplicate.
	app := []byte(`{"id":5,"name":"#1001"}`)
	first := p.Post(t, "shopify", app, shopifySigned(app, shopifySecret, "wh-app", "app/uninstalled"))
	require.Contains(t, string(first.Body), `"duplicate":false`)
	row = p.Settled(t, "shopify", "sha256:"+fmt.Sprintf("%x", sha256.Sum256(app)))
	require.Contains(t, p.LastNote(t, row.ID), "changes no payment")
	again = p.Post(t, "shopify", app, shopifySigned(app, shopifySecret, "wh-app-2", "app/uninstalled"))
	require.Contains(t, string(again.Body), `"duplicate":true`)
}

func TestShopifyRefusals(t *testing.T) {
	p := testenv.StartPlatform(t, "shopify", shopifyConfig(shopifySecret))
	body := shopifyOrder("#2001", 1, "1.00")
	noShop := shopifySigned(body, shopifySecret, "wh-x", "orders/paid")
	noShop.Del("X-Shopify-Shop-Domain")
	otherShop := shopifySigned(body, shopifySecret, "wh-x", "orders/paid")
	otherShop.Set("X-Shopify-Shop-Domain", "someone-else.myshopify.com")
	cases := map[string]struct {
		body   []byte
		h      http.Header
		status int
	}{
		"wrong signature":       {body, shopifySigned(body, "not-the-secret", "wh-x", "orders/paid"), http.StatusUnauthorized},
		"tampered body":         {shopifyOrder("#2001", 1, "0.01"), shopifySigned(body, shopifySecret, "wh-x", "orders/paid"), http.StatusUnauthorized},
		"no signature":          {body, http.Header{"X-Shopify-Webhook-Id": {"wh-x"}}, http.StatusUnauthorized},
		"no shop":               {body, noShop, http.StatusBadRequest},
		"a shop not configured": {body, otherShop, http.StatusForbidden},
	}
	for name, c := range cases {
		a := p.Post(t, "shopify", c.body, c.h)
		require.Equal(t, c.status, a.Status, "%s: %s", name, a.Body)
		require.Contains(t, string(a.Body), `"error"`, name)
	}
	require.Zero(t, p.Callbacks(t, "shopify"), "nothing refused is stored")
	// Signed and of our shop, but unreadable: stored, FAILED with why.
	odd := shopifyOrder("#2001", 1, "1.001")
	require.Equal(t, http.StatusOK, p.Post(t, "shopify", odd, shopifySigned(odd, shopifySecret, "wh-y", "orders/paid")).Status)
	var last string
	require.Eventually(t, func() bool {
		return p.St.DB.Raw(`SELECT COALESCE(last_error, '') FROM callback_log WHERE source = 'shopify' AND status = 'FAILED'`).Scan(&last).Error == nil && last != ""
	}, 20*time.Second, 20*time.Millisecond)
	require.Contains(t, last, "the notification could not be read: total_price: amount \"1.001\" has more than 2 decimal places")
}

// TestShopifyShopFromTheSignedBody: the shop header is not signed, so it
// is never part of an event id (Shopify's ids are unique across shops): the
// same body re-sent under another configured shop's domain is a duplicate
// and pays nothing there; where the signed body names its shop
// (order_status_url), that shop is the order's whatever the header says,
// and a shop not configured is refused (403), nothing stored.
func TestShopifyShopFromTheSignedBody(t *testing.T) {
	p := testenv.StartPlatform(t, "shopify", shopifyConfig(shopifySecret))
	const other = "other-shop.myshopify.com"
	p.CreateOrder(t, shopifyCode("#3001"), 100, "EUR")
	p.CreateOrder(t, other+"/#3001", 100, "EUR")
	body := shopifyOrder("#3001", 3001, "1.00")
	require.Equal(t, http.StatusOK, p.Post(t, "shopify", body, shopifySigned(body, shopifySecret, "wh-a", "orders/paid")).Status)
	h := shopifySigned(body, shopifySecret, "wh-b", "orders/paid")
	h.Set("X-Shopify-Shop-Domain", other)
	a := p.Post(t, "shopify", body, h)
	require.Equal(t, http.StatusOK, a.Status)
	require.Contains(t, string(a.Body), `"duplicate":true`, "the same signed body under another shop's header is the same event")
	row := p.Settled(t, "shopify", "order:3001:2026-11-30T12:00:00-05:00:paid")
	require.Equal(t, shopifyCode("#3001"), row.BusinessKey)
	require.Equal(t, payment.OrderPaid, p.Order(t, shopifyCode("#3001")).PaymentStatus)
	require.Equal(t, payment.OrderUnpaid, p.Order(t, other+"/#3001").PaymentStatus)

	p.CreateOrder(t, shopifyCode("#3002"), 100, "EUR")
	p.CreateOrder(t, other+"/#3002", 100, "EUR")
	bound := bytes.Replace(shopifyOrder("#3002", 3002, "1.00"), []byte(`{`),
		[]byte(`{"order_status_url":"https://`+shopifyShop+`/548380009/orders/abc/authenticate?key=k",`), 1)
	h = shopifySigned(bound, shopifySecret, "wh-c", "orders/paid")
	h.Set("X-Shopify-Shop-Domain", other)
	a = p.Post(t, "shopify", bound, h)
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	row = p.Settled(t, "shopify", "order:3002:2026-11-30T12:00:00-05:00:paid")
	require.Equal(t, shopifyCode("#3002"), row.BusinessKey, "the shop the signed body names")
	require.Equal(t, payment.OrderPaid, p.Order(t, shopifyCode("#3002")).PaymentStatus)
	require.Equal(t, payment.OrderUnpaid, p.Order(t, other+"/#3002").PaymentStatus)

	foreignShop := bytes.Replace(shopifyOrder("#3003", 3003, "1.00"), []byte(`{`),
		[]byte(`{"order_status_url":"https://someone-else.myshopify.com/548380009/orders/abc/authenticate?key=k",`), 1)
	a = p.Post(t, "shopify", foreignShop, shopifySigned(foreignShop, shopifySecret, "wh-d", "orders/paid"))
	require.Equal(t, http.StatusForbidden, a.Status, string(a.Body))
	require.Contains(t, string(a.Body), `order_status_url \"someone-else.myshopify.com\" is not this source's`)
	require.Equal(t, 2, p.Callbacks(t, "shopify"))
}
