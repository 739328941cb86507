package differential_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"callgate/internal/callback"
)

// The reference model: the business rules written out once more, plainly,
// one callback after another in the order they were accepted. It shares
// no code with the handlers; where they disagree, one of them is wrong.

// outcome is what the model says of one accepted callback.
type outcome struct {
	Status    string   // SUCCESS or FAILED
	LastError string   // for FAILED
	Note      string   // for a SUCCESS that changed nothing on purpose
	Messages  []string // "routing.key {json}", in order
}

// modelOrder is an orders row as the model keeps it.
type modelOrder struct {
	order
	Status    string
	PaymentNo string
	PaidAt    string // RFC 3339 UTC; "received" when the event had no time
}

// modelShipment is a shipments row.
type modelShipment struct {
	Order   string
	Status  string
	LastSeq int64
}

// model is the state the rules lead to.
type model struct {
	orders    map[string]*modelOrder
	shipments map[string]*modelShipment
	events    map[string]string // "waybill:seq" -> "status|location|occurred_at"
	seen      map[string]bool   // source + "\x00" + event id, accepted
	accepted  []string          // keys of seen, in the order accepted
	outcomes  map[string]outcome
}

func newModel(orders []order) *model {
	m := &model{orders: map[string]*modelOrder{}, shipments: map[string]*modelShipment{}, events: map[string]string{},
		seen: map[string]bool{}, outcomes: map[string]outcome{}}
	for _, o := range orders {
		m.orders[o.Code] = &modelOrder{order: o, Status: "UNPAID"}
	}
	return m
}

// Intake answers.
const (
	answerAccepted  = "accepted"
	answerDuplicate = "duplicate"
	answerForeign   = "forbidden"
)

// intake says how the gateway answers step s, and takes it if it is new.
func (m *model) intake(s step) string {
	if s.Pay != nil && s.Pay.Foreign {
		return answerForeign
	}
	key := s.source() + "\x00" + s.eventID()
	if m.seen[key] {
		return answerDuplicate
	}
	m.seen[key] = true
	m.accepted = append(m.accepted, key)
	if s.Pay != nil {
		m.outcomes[key] = m.payment(s.Pay)
	} else {
		m.outcomes[key] = m.carrier(s.Ship)
	}
	return answerAccepted
}

func failed(format string, args ...any) outcome {
	return outcome{Status: "FAILED", LastError: fmt.Sprintf(format, args...)}
}

func message(routingKey string, payload map[string]any) string {
	b, _ := json.Marshal(payload)
	return routingKey + " " + string(b)
}

// paymentNo is the payment's number as its platform says it.
func paymentNo(p *payment) string {
	switch p.Source {
	case "adyen":
		return p.PaymentNoForAdyen()
	case "shopify":
		return strconv.Itoa(9000 + p.Seq) // the order's id
	}
	return p.PaymentNo
}

// ignoredNote is why a preset's other event changes nothing.
func ignoredNote(p *payment) string {
	switch p.Source {
	case "paydemo":
		return "payment " + p.PaymentNo + " is pending"
	case "stripe":
		return "stripe event type payment_intent.created is neither a payment nor a failed payment"
	case "adyen":
		return "adyen eventCode CAPTURE is not AUTHORISATION"
	case "wechatpay":
		return "wechat pay trade_state NOTPAY is neither a payment nor a failed payment"
	case "alipay":
		return "alipay trade_status WAIT_BUYER_PAY is neither a payment nor a failed payment"
	case "shopify":
		return `shopify topic "orders/updated" is not orders/paid`
	}
	panic(p.Source)
}

// payment applies the payment rules.
func (m *model) payment(p *payment) outcome {
	if p.Poison {
		return failed(`invalid payload: status "MAYBE" is not SUCCESS or FAILED`)
	}
	if p.Ignored {
		return outcome{Status: "SUCCESS", Note: ignoredNote(p)}
	}
	code := p.Order
	if p.Source == "shopify" {
		code = shop + "/" + p.Order
	}
	o, ok := m.orders[code]
	if !ok {
		return failed("order not found")
	}
	currency := p.Currency
	if currency == "" {
		currency = o.Currency
	}
	if currency != o.Currency {
		return failed("currency mismatch: payment in %s, order in %s", currency, o.Currency)
	}
	amount := p.Amount
	if p.Source == "stripe" && p.Status == callback.PaymentSuccess {
		amount = p.Received // Stripe's success pays what was received
	}
	if amount != o.Amount {
		return failed("amount mismatch: callback %d, order %d (%s minor units)", amount, o.Amount, currency)
	}
	no := paymentNo(p)
	if o.Status == "PAID" {
		if o.PaymentNo == no || p.Status == callback.PaymentFailed {
			return outcome{Status: "SUCCESS"}
		}
		return failed("order already paid by another payment")
	}
	if p.Status == callback.PaymentFailed {
		o.Status = "FAILED"
		return outcome{Status: "SUCCESS"}
	}
	o.Status, o.PaymentNo, o.PaidAt = "PAID", no, p.PaidAt.UTC().Format(time.RFC3339)
	if p.Source == "shopify" {
		o.PaidAt = "received" // Shopify's order says no payment time
	}
	return outcome{Status: "SUCCESS", Messages: []string{
		message("warehouse.ship", map[string]any{"orderCode": o.Code}),
		message("points.add", map[string]any{"orderCode": o.Code, "userId": o.User, "amount": o.Amount, "currency": o.Currency}),
	}}
}

// kuaidiStatus is Kuaidi100's state as a carrier status.
func kuaidiStatus(state int) string {
	switch state {
	case 1:
		return callback.CarrierPickedUp
	case 0, 8:
		return callback.CarrierInTransit
	case 5:
		return callback.CarrierOutForDelivery
	case 3:
		return callback.CarrierDelivered
	}
	return callback.CarrierException
}

// carrier applies the carrier rules: an event of a (waybill, seq) counts
// once; a shipment moves only to a higher seq; the first order code known
// stays; every new event is announced, a delivery of a known order too.
func (m *model) carrier(c *carrier) outcome {
	status := c.Status
	if c.Source == "kuaidi100" {
		status = kuaidiStatus(c.State)
	}
	k := c.Waybill + ":" + strconv.FormatInt(c.Seq, 10)
	if _, recorded := m.events[k]; recorded {
		return outcome{Status: "SUCCESS"}
	}
	m.events[k] = status + "|" + c.Location + "|" + c.OccurredAt.UTC().Format(time.RFC3339)
	sh, ok := m.shipments[c.Waybill]
	if !ok {
		sh = &modelShipment{Order: c.Order, Status: status, LastSeq: c.Seq}
		m.shipments[c.Waybill] = sh
	} else {
		if sh.Order == "" {
			sh.Order = c.Order
		}
		if c.Seq > sh.LastSeq {
			sh.Status, sh.LastSeq = status, c.Seq
		}
	}
	code := c.Order
	if code == "" {
		code = sh.Order
	}
	update := map[string]any{"waybillNo": c.Waybill, "seq": c.Seq, "status": status}
	if code != "" {
		update["orderCode"] = code
	}
	out := outcome{Status: "SUCCESS", Messages: []string{message("shipment.updated", update)}}
	if status == callback.CarrierDelivered && code != "" {
		out.Messages = append(out.Messages, message("order.delivered", map[string]any{"orderCode": code, "waybillNo": c.Waybill}))
	}
	return out
}
