package platform

import (
	"fmt"
	"strings"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// Shopify (preset shopify): the order resource as JSON, signed with a
// base64 HMAC-SHA256 of the raw body in X-Shopify-Hmac-Sha256, keyed with
// the app's client secret. Event id: the X-Shopify-Webhook-Id header (the
// same on every retry). Topic (X-Shopify-Topic) orders/paid pays, when the
// signed body's financial_status is paid too (the headers are not
// signed: a body of an unpaid order under that topic is stored without
// effect); other topics are stored and processed without effect. Order: name (or
// order_path); payment: id; amount: total_price in the order's currency,
// converted to minor units. Keys: secrets (old and new during a rotation:
// Shopify may keep signing with the old one for up to an hour). Any 2xx
// within 5 s; Shopify retries 8 times over 4 hours.
type shopify struct {
	verifier  signature.Verifier
	orderPath string
}

// Shopify's headers.
const (
	shopifyHMACHeader    = "X-Shopify-Hmac-Sha256"
	shopifyWebhookHeader = "X-Shopify-Webhook-Id"
	shopifyTopicHeader   = "X-Shopify-Topic"
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
	p := &shopify{verifier: v, orderPath: cfg.OrderPath}
	if p.orderPath == "" {
		p.orderPath = ShopifyOrderPathDefault
	}
	return p, nil
}

func (p *shopify) Kind() string { return callback.KindPayment }

func (p *shopify) Headers() []string {
	return append(p.verifier.Headers(), shopifyWebhookHeader, shopifyTopicHeader, "X-Shopify-Shop-Domain",
		"X-Shopify-Api-Version", "X-Shopify-Event-Id", "X-Shopify-Triggered-At")
}

func (p *shopify) Read(req Request) ([]Callback, error) {
	if _, err := p.verifier.Verify(req.Header, req.Body, req.Now); err != nil {
		return nil, err
	}
	id := strings.TrimSpace(req.Header.Get(shopifyWebhookHeader))
	if id == "" {
		return nil, badRequest("header %s is missing", shopifyWebhookHeader)
	}
	topic := strings.TrimSpace(req.Header.Get(shopifyTopicHeader))
	obj, err := callback.ParseObject(req.Body)
	if err != nil {
		return nil, err
	}
	if topic != shopifyTopicPaid {
		ev := callback.PaymentEvent{Ignored: fmt.Sprintf("shopify topic %q is not %s", topic, shopifyTopicPaid)}
		return []Callback{{EventID: id, BusinessKey: orderOr(obj, p.orderPath, id), Event: ev}}, nil
	}
	// The topic header is not signed: the signed body must say paid too,
	// or a captured orders/create body re-sent as orders/paid would pay.
	if fs, _ := obj.Scalar("financial_status"); fs != shopifyFinancialPaid {
		ev := callback.PaymentEvent{Ignored: fmt.Sprintf("shopify order financial_status %q is not %s", truncate(fs), shopifyFinancialPaid)}
		return []Callback{{EventID: id, BusinessKey: orderOr(obj, p.orderPath, id), Event: ev}}, nil
	}
	ev := callback.PaymentEvent{Status: callback.PaymentSuccess}
	if ev.OrderCode, err = obj.Scalar(p.orderPath); err != nil {
		return nil, err
	}
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

func (p *shopify) Accepted(stored []Stored) Answer { return acceptedJSON(stored) }

func (p *shopify) Refused(status int, reason string) Answer { return refusedJSON(status, reason) }
