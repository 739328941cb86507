package platform

import (
	"fmt"
	"net/http"
	"net/url"
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
	// The lifecycle topics.
	shopifyTopicCancelled     = "orders/cancelled"
	shopifyTopicRefund        = "refunds/create"
	shopifyTopicDisputeCreate = "disputes/create"
	shopifyTopicDisputeUpdate = "disputes/update"
	// A transaction created: a pending refund transaction that settled.
	shopifyTopicTransaction = "order_transactions/create"
	shopifyFinancialPaid    = "paid"
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
	return p.interpret(req)
}

func (p *shopify) Reread(req Request) ([]Callback, error) { return p.interpret(req) }

// interpret checks a verified delivery's shop and maps it by topic
// (shopify.dev/docs/api/webhooks, "List of topics"): orders/paid pays;
// orders/cancelled closes; refunds/create counts or fails a refund
// (shopify.dev/docs/api/admin-rest/latest/resources/refund); disputes/create
// and disputes/update move a Shopify Payments dispute
// (shopify.dev/docs/api/admin-rest/latest/resources/dispute). Any other
// topic is stored and processed without effect.
func (p *shopify) interpret(req Request) ([]Callback, error) {
	shop := strings.ToLower(strings.TrimSpace(req.Header.Get(shopifyShopHeader)))
	if shop == "" {
		return nil, badRequest("header %s is missing", shopifyShopHeader)
	}
	if !p.shops[shop] {
		return nil, foreign(shopifyShopHeader, shop)
	}
	topic := strings.TrimSpace(req.Header.Get(shopifyTopicHeader))
	obj, err := callback.ParseObject(req.Body)
	if err != nil {
		return nil, err
	}
	// The shop header is not signed; where the signed body names a shop
	// (an order's order_status_url on its myshopify.com domain), it must
	// be the same one, so a body captured from one shop is never taken as
	// another's.
	if u, err := obj.Scalar("order_status_url"); err == nil {
		if host := shopifyHost(u); strings.HasSuffix(host, ".myshopify.com") && host != shop {
			return nil, foreign("order_status_url", host)
		}
	}
	id, err := shopifyEventID(obj, shop, topic, req.Header)
	if err != nil {
		return nil, err
	}
	key := id
	if name, err := obj.Scalar(p.orderPath); err == nil && strings.HasPrefix(topic, "orders/") {
		if code := ShopifyOrderCode(shop, name); len(code) <= callback.MaxBusinessKeyLen {
			key = code
		}
	} else if no, err := obj.Scalar("order_id"); err == nil && len(no) < 64 {
		// A refund or dispute names the order by Shopify's id: its key
		// is the order's payment number, as its order finds it.
		key = shop + "/order_id:" + no
	}
	if topic == shopifyTopicRefund {
		evs, ids, err := shopifyRefund(obj, shop)
		if err != nil {
			return []Callback{unreadable(id, key, err)}, nil
		}
		if len(evs) == 0 {
			return []Callback{{EventID: id, BusinessKey: key, Event: callback.PaymentEvent{
				Ignored: "shopify refund has no settled refund transaction: a pending one counts when its order_transactions/create says it succeeded"}}}, nil
		}
		cbs := make([]Callback, len(evs))
		for i := range evs {
			cbs[i] = Callback{EventID: ids[i], BusinessKey: key, Event: evs[i]}
		}
		return cbs, nil
	}
	ev, err := p.event(obj, shop, topic)
	if err != nil {
		return []Callback{unreadable(id, key, err)}, nil
	}
	return []Callback{{EventID: id, BusinessKey: key, Event: ev}}, nil
}

// shopifyHost is the lower-case host of an absolute URL, or "".
func shopifyHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// event maps a delivery of topic.
func (p *shopify) event(obj callback.Object, shop, topic string) (callback.PaymentEvent, error) {
	var ev callback.PaymentEvent
	switch topic {
	case shopifyTopicPaid:
		// The topic header is not signed: the signed body must say paid
		// too, or a captured orders/create body re-sent as orders/paid
		// would pay.
		if fs, _ := obj.Scalar("financial_status"); fs != shopifyFinancialPaid {
			return callback.PaymentEvent{Ignored: fmt.Sprintf("shopify order financial_status %q is not %s", truncate(fs), shopifyFinancialPaid)}, nil
		}
		ev.Status = callback.PaymentSuccess
		name, err := obj.Scalar(p.orderPath)
		if err != nil {
			return ev, err
		}
		ev.OrderCode = ShopifyOrderCode(shop, name)
		if ev.PaymentNo, err = obj.Scalar("id"); err != nil {
			return ev, err
		}
		// The order is paid in the customer's (presentment) currency, the
		// one its refund transactions are in
		// (shopify.dev/docs/api/admin-rest/latest/resources/order,
		// total_price_set); a body without it is in the shop's.
		field := "total_price_set.presentment_money"
		total, err := decimalAt(obj, field+".amount")
		currency, cerr := obj.Scalar(field + ".currency_code")
		if err != nil || cerr != nil || currency == "" {
			field = "total_price"
			if currency, err = obj.Scalar("currency"); err != nil {
				return ev, err
			}
			if total, err = obj.Scalar("total_price"); err != nil {
				return ev, err
			}
		}
		if ev.Amount, ev.Currency, err = AmountIn(total, currency); err != nil {
			return ev, badRequest("%s: %v", field, err)
		}
		ev.PaidAt = rfc3339At(obj, "processed_at")
		return ev, nil
	case shopifyTopicCancelled:
		// The signed body must say cancelled too.
		if at, _ := obj.Scalar("cancelled_at"); at == "" {
			return callback.PaymentEvent{Ignored: "shopify order has no cancelled_at: it is not cancelled"}, nil
		}
		name, err := obj.Scalar(p.orderPath)
		if err != nil {
			return ev, err
		}
		reason, _ := obj.Scalar("cancel_reason")
		return callback.PaymentEvent{Type: callback.TypeClose, OrderCode: ShopifyOrderCode(shop, name),
			Reason: strings.TrimSpace("shopify orders/cancelled " + reason), OccurredAt: rfc3339At(obj, "cancelled_at")}, nil
	case shopifyTopicTransaction:
		// A refund transaction that was pending when its refund was
		// created says here that it settled.
		if kind, _ := obj.Scalar("kind"); kind != "refund" {
			return callback.PaymentEvent{Ignored: fmt.Sprintf("shopify transaction of kind %q is not a refund", truncate(kind))}, nil
		}
		ev, ok, err := shopifyRefundTransaction(obj, "", nil)
		if err != nil {
			return ev, err
		}
		if !ok {
			return callback.PaymentEvent{Ignored: "shopify refund transaction is not settled yet"}, nil
		}
		return ev, nil
	case shopifyTopicDisputeCreate, shopifyTopicDisputeUpdate:
		return shopifyDispute(obj)
	}
	return callback.PaymentEvent{Ignored: fmt.Sprintf("shopify topic %q changes no payment", truncate(topic))}, nil
}

// shopifyRefund maps a Refund: each of its refund transactions is a
// refund of its own (by the transaction's id), SUCCESS or FAILED as it
// settled; a pending one is left for its order_transactions/create. Its
// payment is the order it refunds (order_id, the payment number
// orders/paid recorded). A transaction's currency may be null (Shopify's
// own sample): the refund's line items' presentment currency is taken.
// It returns the events and their event ids.
func shopifyRefund(obj callback.Object, shop string) ([]callback.PaymentEvent, []string, error) {
	if _, err := obj.Scalar("id"); err != nil {
		return nil, nil, err
	}
	if _, err := obj.Scalar("order_id"); err != nil {
		return nil, nil, err
	}
	txs, ok := obj.Array("transactions")
	if !ok {
		return nil, nil, badRequest("transactions is missing")
	}
	var fallback *string
	if items, ok := obj.Array("refund_line_items"); ok {
		for _, raw := range items {
			if m, ok := raw.(map[string]any); ok {
				if c, err := callback.Object(m).Scalar("subtotal_set.presentment_money.currency_code"); err == nil && c != "" {
					fallback = &c
					break
				}
			}
		}
	}
	var evs []callback.PaymentEvent
	var ids []string
	for i, raw := range txs {
		m, isMap := raw.(map[string]any)
		if !isMap {
			return nil, nil, badRequest("transactions[%d] is not an object", i)
		}
		tx := callback.Object(m)
		if kind, _ := tx.Scalar("kind"); kind != "refund" {
			continue
		}
		if _, err := tx.Scalar("order_id"); err != nil {
			m["order_id"], _ = obj.Scalar("order_id")
		}
		ev, settled, err := shopifyRefundTransaction(tx, fmt.Sprintf("transactions[%d].", i), fallback)
		if err != nil {
			return nil, nil, err
		}
		if !settled {
			continue
		}
		if ev.OccurredAt == nil {
			ev.OccurredAt = rfc3339At(obj, "processed_at")
		}
		if ev.InitiatedAt = rfc3339At(obj, "created_at"); ev.InitiatedAt == nil {
			ev.InitiatedAt = ev.OccurredAt
		}
		evs = append(evs, ev)
		ids = append(ids, shop+"/transaction:"+ev.RefundNo+":"+ev.Status)
	}
	return evs, ids, nil
}

// shopifyRefundTransaction maps one refund transaction; settled is false
// for one that is pending. where prefixes its fields in errors.
func shopifyRefundTransaction(tx callback.Object, where string, fallbackCurrency *string) (callback.PaymentEvent, bool, error) {
	ev := callback.PaymentEvent{Type: callback.TypeRefund}
	var err error
	if ev.RefundNo, err = tx.Scalar("id"); err != nil {
		return ev, false, badRequest("%sid is missing", where)
	}
	if ev.PaymentNo, err = tx.Scalar("order_id"); err != nil {
		return ev, false, badRequest("%sorder_id is missing", where)
	}
	switch status, _ := tx.Scalar("status"); status {
	case "success":
		ev.Status = callback.RefundSuccess
	case "failure", "error":
		ev.Status, ev.Reason = callback.RefundFailed, "shopify refund transaction "+status
		if msg, _ := tx.Scalar("message"); msg != "" {
			ev.Reason += ": " + msg
		}
	default: // pending
		return ev, false, nil
	}
	amount, err := decimalAt(tx, "amount") // "10.00" or 10.00
	if err != nil {
		return ev, false, badRequest("%s%v", where, err)
	}
	currency, _ := tx.Scalar("currency")
	if currency == "" && fallbackCurrency != nil {
		currency = *fallbackCurrency
	}
	if currency == "" {
		return ev, false, badRequest("%scurrency is missing, and no refund line item names one", where)
	}
	if ev.Amount, ev.Currency, err = AmountIn(amount, currency); err != nil {
		return ev, false, badRequest("%samount: %v", where, err)
	}
	if ev.OccurredAt = rfc3339At(tx, "processed_at"); ev.OccurredAt == nil {
		ev.OccurredAt = rfc3339At(tx, "created_at")
	}
	return ev, true, nil
}

// shopifyDispute maps a Dispute by its status: needs_response and
// under_review are open; won, prevented and charge_refunded are won;
// lost and accepted (the merchant accepted the chargeback) are lost.
func shopifyDispute(obj callback.Object) (callback.PaymentEvent, error) {
	ev := callback.PaymentEvent{Type: callback.TypeDispute}
	var err error
	if ev.DisputeID, err = obj.Scalar("id"); err != nil {
		return ev, err
	}
	if ev.PaymentNo, err = obj.Scalar("order_id"); err != nil {
		return ev, err
	}
	status, err := obj.Scalar("status")
	if err != nil {
		return ev, err
	}
	// won and prevented (resolved before it became a chargeback) give
	// nothing; charge_refunded (deprecated) is resolved by a refund, which
	// refunds/create counts: the dispute itself takes nothing.
	switch status {
	case "needs_response", "under_review":
		ev.Status = callback.DisputeOpen
	case "won", "prevented", "charge_refunded":
		ev.Status = callback.DisputeWon
	case "lost", "accepted":
		ev.Status = callback.DisputeLost
	default:
		return ev, badRequest("status %q is not a dispute status", truncate(status))
	}
	amount, err := decimalAt(obj, "amount")
	if err != nil {
		return ev, err
	}
	currency, err := obj.Scalar("currency")
	if err != nil {
		return ev, err
	}
	if ev.Amount, ev.Currency, err = AmountIn(amount, currency); err != nil {
		return ev, badRequest("amount: %v", err)
	}
	// A decided dispute is dated when it was finalized, an open one when
	// it was initiated (its stages are facts by their time).
	if ev.Status != callback.DisputeOpen {
		ev.OccurredAt = rfc3339At(obj, "finalized_on")
	}
	if ev.OccurredAt == nil {
		ev.OccurredAt = rfc3339At(obj, "initiated_at")
	}
	return ev, nil
}

// decimalAt reads a decimal amount sent as a string ("10.00") or as a
// number (10.00).
func decimalAt(obj callback.Object, path string) (string, error) {
	if s, err := obj.Number(path); err == nil {
		return s, nil
	}
	s, _ := obj.Scalar(path)
	if s == "" {
		return "", &callback.FieldError{Field: path, Reason: "must be a decimal amount"}
	}
	return s, nil
}

// shopifyEventID is the event id of a delivery: from the signed body,
// "<shop>/<id>:<topic>:<updated_at>" (created_at for a body that has no
// updated_at, a Refund), which every retry of a delivery repeats, so that
// a captured body re-sent with a new X-Shopify-Webhook-Id is a duplicate,
// and one shop's resource never collides with another's; a body without
// them falls back to "<shop>/" and X-Shopify-Webhook-Id. A Dispute has
// no updated_at (its initiated_at never moves): its status stands in, so
// each status of a dispute is one event, and a captured "lost" re-sent
// after the dispute was won is a duplicate, not a second loss.
func shopifyEventID(obj callback.Object, shop, topic string, h http.Header) (string, error) {
	id, errID := obj.Scalar("id")
	at, errAt := obj.Scalar("updated_at")
	if errAt != nil && strings.HasPrefix(topic, "disputes/") {
		at, errAt = obj.Scalar("status")
	}
	if errAt != nil {
		at, errAt = obj.Scalar("created_at")
	}
	if errID == nil && errAt == nil {
		return shop + "/" + id + ":" + topic + ":" + at, nil
	}
	hdr := strings.TrimSpace(h.Get(shopifyWebhookHeader))
	if hdr == "" {
		return "", badRequest("header %s is missing", shopifyWebhookHeader)
	}
	return shop + "/" + hdr, nil
}

func (p *shopify) Accepted(stored []Stored) Answer { return acceptedJSON(stored) }

func (p *shopify) Refused(status int, reason string) Answer { return refusedJSON(status, reason) }
