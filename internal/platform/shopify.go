package platform

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// Shopify (preset shopify): the order resource (and refunds,
// transactions, disputes) as JSON, signed with a base64 HMAC-SHA256 of the
// raw body in X-Shopify-Hmac-Sha256, keyed with the app's client secret.
// Shopify signs the body only: no header and no timestamp. So nothing a
// header says decides an event id or an effect (docs/security.md):
//
//   - Resource and effect: from the signed body. An order (the body of
//     every orders/* topic) pays when its financial_status is paid, closes
//     when it has a cancelled_at; a refund counts its refund transactions;
//     a transaction of kind refund settles one; a dispute moves by its
//     status. X-Shopify-Topic is stored, never read: a body re-sent under
//     another topic is the same event.
//   - Event id: "order:<id>:<updated_at>:paid" (or ":cancelled"),
//     "transaction:<id>:<status>" (a refund transaction, by either
//     topic), "refund:<id>:<created_at>" (a refund with none settled),
//     "dispute:<id>:<status>", from Shopify's ids, unique across shops;
//     a body without them, or of another resource, "sha256:<digest of the
//     body>". X-Shopify-Webhook-Id is stored, never read.
//   - Shop: one app secret signs for every shop that installs the app,
//     and order names (#1001) repeat across shops, so the order code is
//     "<shop>/<name>" (e.g. "acme.myshopify.com/#1001"). The shop is the
//     one the signed body names (an order's order_status_url), else the
//     unsigned X-Shopify-Shop-Domain; it must be one of shop_domains
//     (required; others are refused, 403, nothing stored).
//
// Order: name (or order_path); payment: id; amount: total_price in the
// order's currency, converted to minor units. Keys: secrets (old and new
// during a rotation: Shopify may keep signing with the old one for up to
// an hour). Any 2xx within 5 s; Shopify retries 8 times over 4 hours.
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
	return p.interpret(req)
}

func (p *shopify) Reread(req Request) ([]Callback, error) { return p.interpret(req) }

// The resources a Shopify webhook body can be, told by the body's own
// (signed) fields, never by the unsigned X-Shopify-Topic.
const (
	shopifyResourceOrder       = "order"
	shopifyResourceRefund      = "refund"
	shopifyResourceTransaction = "transaction"
	shopifyResourceDispute     = "dispute"
)

// shopifyResource names the resource a body is by the fields only that
// resource has (shopify.dev/docs/api/admin-rest/latest/resources: an Order
// has financial_status and no order_id; a Refund, a Transaction and a
// Dispute name their order by order_id, and then transactions, kind and
// initiated_at tell them apart), or "" for any other topic's resource
// (products, customers, orders/edited's order_edit, orders/delete's bare
// id), which changes no payment.
func shopifyResource(obj callback.Object) string {
	_, hasOrderID := obj["order_id"]
	switch {
	case hasOrderID && obj.Has("transactions"):
		return shopifyResourceRefund
	case hasOrderID && obj.Has("kind"):
		return shopifyResourceTransaction
	case hasOrderID && obj.Has("initiated_at"):
		return shopifyResourceDispute
	case !hasOrderID && obj.Has("financial_status"):
		return shopifyResourceOrder
	}
	return ""
}

// interpret binds a verified delivery to its shop and maps it by the
// resource its signed body is (shopify.dev/docs/api/webhooks, "List of
// topics"): an order pays when its financial_status is paid and closes
// when it has a cancelled_at, whichever topic delivered it (orders/paid,
// orders/updated and orders/cancelled send the same order as it is); a
// refund counts or fails its refund transactions
// (shopify.dev/docs/api/admin-rest/latest/resources/refund); a refund
// transaction settles (order_transactions/create); a dispute moves a
// Shopify Payments dispute
// (shopify.dev/docs/api/admin-rest/latest/resources/dispute). Anything
// else is stored and processed without effect.
//
// Shopify signs the body only (no timestamp, no header), so nothing but
// the body decides an event id or an effect: X-Shopify-Topic,
// X-Shopify-Webhook-Id and the rest can be rewritten by whoever holds a
// captured delivery, and a re-send with any of them changed is the same
// event, a duplicate (docs/security.md).
func (p *shopify) interpret(req Request) ([]Callback, error) {
	obj, err := callback.ParseObject(req.Body)
	if err != nil {
		return nil, err
	}
	shop, err := p.shop(obj, req.Header)
	if err != nil {
		return nil, err
	}
	digest := callback.BodyDigest(req.Body)
	switch shopifyResource(obj) {
	case shopifyResourceOrder:
		return p.order(obj, shop, digest), nil
	case shopifyResourceRefund:
		return shopifyRefundCallbacks(obj, shop, digest), nil
	case shopifyResourceTransaction:
		return []Callback{shopifyTransaction(obj, shop, digest)}, nil
	case shopifyResourceDispute:
		return []Callback{shopifyDisputeCallback(obj, shop, digest)}, nil
	}
	topic := strings.TrimSpace(req.Header.Get(shopifyTopicHeader))
	return []Callback{{EventID: digest, BusinessKey: digest, Event: callback.PaymentEvent{
		Ignored: fmt.Sprintf("shopify %s body is not an order, a refund, a transaction or a dispute: it changes no payment", truncate(topic))}}}, nil
}

// shop is the shop a delivery is from: the one its signed body names (an
// order's order_status_url on its myshopify.com domain), else the
// unsigned X-Shopify-Shop-Domain; either must be one of shop_domains
// (403 otherwise, nothing stored). The header is used only where the body
// names no shop, and then only for the business key of a refund,
// transaction or dispute (which pays nothing by it: they find their
// payment by Shopify's order id, unique across shops); it is never part
// of an event id.
func (p *shopify) shop(obj callback.Object, h http.Header) (string, error) {
	if u, err := obj.Scalar("order_status_url"); err == nil {
		if host := shopifyHost(u); strings.HasSuffix(host, ".myshopify.com") {
			if !p.shops[host] {
				return "", foreign("order_status_url", host)
			}
			return host, nil
		}
	}
	shop := strings.ToLower(strings.TrimSpace(h.Get(shopifyShopHeader)))
	if shop == "" {
		return "", badRequest("header %s is missing", shopifyShopHeader)
	}
	if !p.shops[shop] {
		return "", foreign(shopifyShopHeader, shop)
	}
	return shop, nil
}

// shopifyVersioned is "<resource>:<id>:<version>" from the signed body,
// or digest when it lacks either: the id is Shopify's, unique across
// shops, and version is what changes between two deliveries of the same
// resource that mean different things.
func shopifyVersioned(obj callback.Object, resource, versionField, digest string) string {
	id, errID := obj.Scalar("id")
	v, errV := obj.Scalar(versionField)
	if errID != nil || errV != nil {
		return digest
	}
	return resource + ":" + id + ":" + v
}

// order maps an order as it is: paid (financial_status paid) pays,
// cancelled (cancelled_at) closes, both gives both (a paid order
// cancelled), each its own event "order:<id>:<updated_at>:paid" or
// ":cancelled", so that orders/paid and orders/updated delivering the same
// order at the same updated_at are one event, and neither can be lost to
// the other; neither is one event without effect.
func (p *shopify) order(obj callback.Object, shop, digest string) []Callback {
	base := shopifyVersioned(obj, shopifyResourceOrder, "updated_at", digest)
	key := base
	if name, err := obj.Scalar(p.orderPath); err == nil {
		if code := ShopifyOrderCode(shop, name); len(code) <= callback.MaxBusinessKeyLen {
			key = code
		}
	}
	fs, _ := obj.Scalar("financial_status")
	cancelledAt, _ := obj.Scalar("cancelled_at")
	var cbs []Callback
	if fs == shopifyFinancialPaid {
		id := base + ":paid"
		if ev, err := p.paid(obj, shop); err != nil {
			cbs = append(cbs, unreadable(id, key, err))
		} else {
			cbs = append(cbs, Callback{EventID: id, BusinessKey: key, Event: ev})
		}
	}
	if cancelledAt != "" {
		id := base + ":cancelled"
		if ev, err := p.cancelled(obj, shop); err != nil {
			cbs = append(cbs, unreadable(id, key, err))
		} else {
			cbs = append(cbs, Callback{EventID: id, BusinessKey: key, Event: ev})
		}
	}
	if len(cbs) == 0 {
		cbs = append(cbs, Callback{EventID: base, BusinessKey: key, Event: callback.PaymentEvent{
			Ignored: fmt.Sprintf("shopify order financial_status %q is not %s, and it is not cancelled", truncate(fs), shopifyFinancialPaid)}})
	}
	return cbs
}

// paid maps a paid order: its payment is the order's id, in the customer's
// (presentment) currency, the one its refund transactions are in
// (shopify.dev/docs/api/admin-rest/latest/resources/order,
// total_price_set); a body without it is in the shop's.
func (p *shopify) paid(obj callback.Object, shop string) (callback.PaymentEvent, error) {
	ev := callback.PaymentEvent{Status: callback.PaymentSuccess}
	name, err := obj.Scalar(p.orderPath)
	if err != nil {
		return ev, err
	}
	ev.OrderCode = ShopifyOrderCode(shop, name)
	if ev.PaymentNo, err = obj.Scalar("id"); err != nil {
		return ev, err
	}
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
}

// cancelled maps a cancelled order: it closes.
func (p *shopify) cancelled(obj callback.Object, shop string) (callback.PaymentEvent, error) {
	name, err := obj.Scalar(p.orderPath)
	if err != nil {
		return callback.PaymentEvent{}, err
	}
	reason, _ := obj.Scalar("cancel_reason")
	return callback.PaymentEvent{Type: callback.TypeClose, OrderCode: ShopifyOrderCode(shop, name),
		Reason: strings.TrimSpace("shopify orders/cancelled " + reason), OccurredAt: rfc3339At(obj, "cancelled_at")}, nil
}

// shopifyOrderKey is the business key of a resource that names its order
// by Shopify's id: the order's payment number, as its order finds it.
func shopifyOrderKey(obj callback.Object, shop, fallback string) string {
	if no, err := obj.Scalar("order_id"); err == nil && len(no) < 64 {
		return shop + "/order_id:" + no
	}
	return fallback
}

// shopifyTransactionID is the event id of a settled refund transaction,
// whether a refunds/create or its order_transactions/create delivered
// it: one event.
func shopifyTransactionID(ev callback.PaymentEvent) string {
	return shopifyResourceTransaction + ":" + ev.RefundNo + ":" + ev.Status
}

// shopifyRefundCallbacks maps a Refund: one event per settled refund
// transaction; none settled is one event without effect.
func shopifyRefundCallbacks(obj callback.Object, shop, digest string) []Callback {
	id := shopifyVersioned(obj, shopifyResourceRefund, "created_at", digest)
	key := shopifyOrderKey(obj, shop, id)
	evs, err := shopifyRefund(obj)
	if err != nil {
		return []Callback{unreadable(id, key, err)}
	}
	if len(evs) == 0 {
		return []Callback{{EventID: id, BusinessKey: key, Event: callback.PaymentEvent{
			Ignored: "shopify refund has no settled refund transaction: a pending one counts when its order_transactions/create says it succeeded"}}}
	}
	cbs := make([]Callback, len(evs))
	for i := range evs {
		cbs[i] = Callback{EventID: shopifyTransactionID(evs[i]), BusinessKey: key, Event: evs[i]}
	}
	return cbs
}

// shopifyTransaction maps a Transaction: a refund transaction that was
// pending when its refund was created says here that it settled.
func shopifyTransaction(obj callback.Object, shop, digest string) Callback {
	id := shopifyVersioned(obj, shopifyResourceTransaction, "status", digest)
	key := shopifyOrderKey(obj, shop, id)
	if kind, _ := obj.Scalar("kind"); kind != "refund" {
		return Callback{EventID: id, BusinessKey: key, Event: callback.PaymentEvent{
			Ignored: fmt.Sprintf("shopify transaction of kind %q is not a refund", truncate(kind))}}
	}
	ev, settled, err := shopifyRefundTransaction(obj, "", nil)
	switch {
	case err != nil:
		return unreadable(id, key, err)
	case !settled:
		return Callback{EventID: id, BusinessKey: key, Event: callback.PaymentEvent{Ignored: "shopify refund transaction is not settled yet"}}
	}
	return Callback{EventID: shopifyTransactionID(ev), BusinessKey: key, Event: ev}
}

// shopifyDisputeCallback maps a Dispute. It has no updated_at (its
// initiated_at never moves): its status stands in, so each status of a
// dispute is one event, and a captured "lost" re-sent after the dispute
// was won is a duplicate, not a second loss.
func shopifyDisputeCallback(obj callback.Object, shop, digest string) Callback {
	id := shopifyVersioned(obj, shopifyResourceDispute, "status", digest)
	key := shopifyOrderKey(obj, shop, id)
	ev, err := shopifyDispute(obj)
	if err != nil {
		return unreadable(id, key, err)
	}
	return Callback{EventID: id, BusinessKey: key, Event: ev}
}

// shopifyHost is the lower-case host of an absolute URL, or "".
func shopifyHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// shopifyRefund maps a Refund: each of its refund transactions is a
// refund of its own (by the transaction's id), SUCCESS or FAILED as it
// settled; a pending one is left for its order_transactions/create. Its
// payment is the order it refunds (order_id, the payment number
// orders/paid recorded). A transaction's currency may be null (Shopify's
// own sample): the refund's line items' presentment currency is taken.
func shopifyRefund(obj callback.Object) ([]callback.PaymentEvent, error) {
	if _, err := obj.Scalar("id"); err != nil {
		return nil, err
	}
	if _, err := obj.Scalar("order_id"); err != nil {
		return nil, err
	}
	txs, ok := obj.Array("transactions")
	if !ok {
		return nil, badRequest("transactions is missing")
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
	for i, raw := range txs {
		m, isMap := raw.(map[string]any)
		if !isMap {
			return nil, badRequest("transactions[%d] is not an object", i)
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
			return nil, err
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
	}
	return evs, nil
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

func (p *shopify) Accepted(stored []Stored) Answer { return acceptedJSON(stored) }

func (p *shopify) Refused(status int, reason string) Answer { return refusedJSON(status, reason) }
