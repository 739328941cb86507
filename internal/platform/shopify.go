package platform

import (
	"fmt"
	"net/http"
	"strings"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// Shopify (preset shopify): the order resource as JSON, signed with a
// base64 HMAC-SHA256 of the raw body in X-Shopify-Hmac-Sha256, keyed with
// the app's client secret. One app secret signs for every shop that
// installs the app, and order names (#1001) repeat across shops, so the
// shop is part of the order: a delivery's X-Shopify-Shop-Domain must be
// one of shop_domains (required; others are refused, 403, nothing stored),
// and the order code is "<shop>/<name>" (e.g.
// "acme.myshopify.com/#1001"). The headers are not signed: a captured
// body re-sent under another configured shop's domain names an order of
// that shop, which must then also have the same name, amount and
// currency to be paid.
//
// Event id: from the signed body, "<id>:<topic>:<updated_at>" (the
// order's id and last update, which every retry of a delivery repeats),
// so a captured body re-sent with a new X-Shopify-Webhook-Id is a
// duplicate, not a new callback; a body without id or updated_at (not an
// order) falls back to X-Shopify-Webhook-Id. Topic (X-Shopify-Topic)
// orders/paid pays, when the signed body's financial_status is paid too
// (a body of an unpaid order under that topic is stored without effect);
// other topics are stored and processed without effect. Order: name (or
// order_path); payment: id; amount: total_price in the order's currency,
// converted to minor units. Keys: secrets (old and new during a rotation:
// Shopify may keep signing with the old one for up to an hour). Any 2xx
// within 5 s; Shopify retries 8 times over 4 hours.
type shopify struct {
	verifier  signature.Verifier
	orderPath string
	shops     map[string]bool // lower case
}

// Shopify's headers.
const (
	shopifyHMACHeader    = "X-Shopify-Hmac-Sha256"
	shopifyWebhookHeader = "X-Shopify-Webhook-Id"
	shopifyTopicHeader   = "X-Shopify-Topic"
	shopifyShopHeader    = "X-Shopify-Shop-Domain"
	shopifyTopicPaid     = "orders/paid"
	shopifyFinancialPaid = "paid"
)

// ShopifyOrderPathDefault is where the shopify preset reads the order code.
const ShopifyOrderPathDefault = "name"

func newShopify(cfg Config) (Platform, error) {
	v, err := signature.New(signature.Config{Scheme: signature.SchemeHMACSHA256, Secrets: nonEmpty(cfg.Secrets),
		Header: shopifyHMACHeader, Encoding: signature.EncodingBase64})
	if err != nil {
		return nil, fieldErr("secrets", err)
	}
	p := &shopify{verifier: v, orderPath: cfg.OrderPath, shops: map[string]bool{}}
	if p.orderPath == "" {
		p.orderPath = ShopifyOrderPathDefault
	}
	for _, d := range splitList(cfg.ShopDomains) {
		p.shops[strings.ToLower(d)] = true
	}
	return p, nil
}

func (p *shopify) Kind() string { return callback.KindPayment }

func (p *shopify) Headers() []string {
	return append(p.verifier.Headers(), shopifyWebhookHeader, shopifyTopicHeader, shopifyShopHeader,
		"X-Shopify-Api-Version", "X-Shopify-Event-Id", "X-Shopify-Triggered-At")
}

// ShopifyOrderCode is the order code of order name in shop: the shop is
// part of it, since names repeat across shops.
func ShopifyOrderCode(shop, name string) string { return strings.ToLower(shop) + "/" + name }

func (p *shopify) Read(req Request) ([]Callback, error) {
	if _, err := p.verifier.Verify(req.Header, req.Body, req.Now); err != nil {
		return nil, err
	}
	shop := strings.TrimSpace(req.Header.Get(shopifyShopHeader))
	if shop == "" {
		return nil, badRequest("header %s is missing", shopifyShopHeader)
	}
	if !p.shops[strings.ToLower(shop)] {
		return nil, foreign(shopifyShopHeader, shop)
	}
	topic := strings.TrimSpace(req.Header.Get(shopifyTopicHeader))
	obj, err := callback.ParseObject(req.Body)
	if err != nil {
		return nil, err
	}
	id, err := shopifyEventID(obj, topic, req.Header)
	if err != nil {
		return nil, err
	}
	key := func() string {
		if name, err := obj.Scalar(p.orderPath); err == nil {
			if code := ShopifyOrderCode(shop, name); len(code) <= callback.MaxBusinessKeyLen {
				return code
			}
		}
		return id
	}
	if topic != shopifyTopicPaid {
		ev := callback.PaymentEvent{Ignored: fmt.Sprintf("shopify topic %q is not %s", truncate(topic), shopifyTopicPaid)}
		return []Callback{{EventID: id, BusinessKey: key(), Event: ev}}, nil
	}
	// The topic header is not signed: the signed body must say paid too,
	// or a captured orders/create body re-sent as orders/paid would pay.
	if fs, _ := obj.Scalar("financial_status"); fs != shopifyFinancialPaid {
		ev := callback.PaymentEvent{Ignored: fmt.Sprintf("shopify order financial_status %q is not %s", truncate(fs), shopifyFinancialPaid)}
		return []Callback{{EventID: id, BusinessKey: key(), Event: ev}}, nil
	}
	ev := callback.PaymentEvent{Status: callback.PaymentSuccess}
	name, err := obj.Scalar(p.orderPath)
	if err != nil {
		return nil, err
	}
	ev.OrderCode = ShopifyOrderCode(shop, name)
	if ev.PaymentNo, err = obj.Scalar("id"); err != nil {
		return nil, err
	}
	currency, err := obj.Scalar("currency")
	if err != nil {
		return nil, err
	}
	total, err := obj.Scalar("total_price")
	if err != nil {
		return nil, err
	}
	if ev.Amount, ev.Currency, err = AmountIn(total, currency); err != nil {
		return nil, badRequest("total_price: %v", err)
	}
	return []Callback{{EventID: id, BusinessKey: ev.OrderCode, Event: ev}}, nil
}

// shopifyEventID is the event id of a delivery: "<id>:<topic>:<updated_at>"
// from the signed body when it has both, else X-Shopify-Webhook-Id.
func shopifyEventID(obj callback.Object, topic string, h http.Header) (string, error) {
	id, errID := obj.Scalar("id")
	updated, errUpdated := obj.Scalar("updated_at")
	if errID == nil && errUpdated == nil {
		return id + ":" + topic + ":" + updated, nil
	}
	hdr := strings.TrimSpace(h.Get(shopifyWebhookHeader))
	if hdr == "" {
		return "", badRequest("header %s is missing", shopifyWebhookHeader)
	}
	return hdr, nil
}

func (p *shopify) Accepted(stored []Stored) Answer { return acceptedJSON(stored) }

func (p *shopify) Refused(status int, reason string) Answer { return refusedJSON(status, reason) }
