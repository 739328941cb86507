package differential_test

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"callgate/internal/signature"
	"callgate/internal/testenv"
)

// The world a sequence plays in: orders of several currencies, shared by
// the payment sources that key on the merchant's order code, Shopify's
// orders (keyed "<shop>/<name>"), and waybills.
const (
	shop          = "diff-shop.myshopify.com"
	foreignShop   = "elsewhere.myshopify.com"
	alipayApp     = "2021000000000042"
	alipaySeller  = "2088000000000042"
	wechatMch     = "1230000109"
	wechatApp     = "wxdiff00000000001"
	wechatKey     = "callgate0diff0apiv3key0032bytes!"
	wechatKeyID   = "PUB_KEY_ID_0000000000000000000000000042"
	adyenKey      = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	adyenAccount  = "CallgateECOM"
	stripeSecret  = "whsec_callgate_differential"
	shopifySecret = "shpss_callgate_differential"
	kuaidiSalt    = "callgate-differential-salt"
)

// order is one orders row of the world.
type order struct {
	Code     string
	User     int64
	Amount   int64
	Currency string
}

// event is one payment-kind notification, as the handler will read it
// once its platform's preset has (what each platform's page under
// docs/platforms/ says it maps to), before the platform words it.
type event struct {
	Source string // paydemo, stripe, adyen, wechatpay, alipay, shopify
	Seq    int    // its number in the sequence: event ids derive from it
	Type   string // payment, refund, close, dispute
	// Order is the order as the platform names it (Shopify: the name);
	// the event's body names it only when NamesOrder (a refund or dispute
	// may name only its payment).
	Order      string
	NamesOrder bool
	// PaymentNo is the payment as the handler reads it (Adyen: the
	// pspReference of the AUTHORISATION; Shopify: the order's id).
	PaymentNo string
	RefundNo  string // "" with Total: a running total that names no refund
	DisputeID string
	Amount    int64 // minor units of Currency: paid, refunded, disputed
	Received  int64 // Stripe: what the PaymentIntent received (a success pays on it)
	Total     int64 // a refund given as a running total (Alipay refund_fee, Stripe amount_refunded)
	Currency  string
	Status    string // payment SUCCESS/FAILED; refund SUCCESS/FAILED/REVERSED; dispute OPEN/WON/LOST; "" for a close
	Reason    string // as the handler will read it
	Ignored   bool   // no business effect (another event type)
	Foreign   bool   // for another merchant: refused at intake
	Poison    bool   // an invalid payload (paydemo): FAILED for good
	PaidAt    time.Time
	// Variant picks between a platform's ways of saying the same thing
	// (Stripe: refund.updated or refund.failed; Adyen: REFUND false or
	// REFUND_FAILED).
	Variant int
}

// carrier is one carrier event.
type carrier struct {
	Source     string // shipdemo or kuaidi100
	Waybill    string
	Order      string // shipdemo only; "" when the carrier does not know it
	Seq        int64
	Status     string // shipdemo: a carrier status; kuaidi100: from State
	State      int    // kuaidi100's lastResult.state
	Location   string
	OccurredAt time.Time
}

// step is one request of a sequence: a payment-kind event or a carrier
// event, or a platform's resend of an earlier step. Barrier: everything
// sent before is settled before it is sent (a round ends).
type step struct {
	Pay     *event
	Ship    *carrier
	Resend  bool
	Barrier bool
}

// world is a generated sequence and what it starts from.
type world struct {
	Orders []order
	Steps  []step
}

var currencies = []string{"CNY", "USD", "JPY", "KWD", "EUR"}

// orderCode is the order the handler looks up ("" when the event names
// only its payment).
func (e *event) orderCode() string {
	if !e.NamesOrder {
		return ""
	}
	if e.Source == "shopify" {
		return shop + "/" + e.Order
	}
	return e.Order
}

// code is the order the event is about (the generator knows it even when
// the event does not say it).
func (e *event) code() string {
	if e.Source == "shopify" {
		return shop + "/" + e.Order
	}
	return e.Order
}

func (e *event) paymentNo() string { return e.PaymentNo }

// paidAmount is what a payment success pays.
func (e *event) paidAmount() int64 {
	if e.Source == "stripe" {
		return e.Received
	}
	return e.Amount
}

// id is a refund's or dispute's row id.
func (e *event) id() string {
	switch e.Type {
	case "refund":
		if e.RefundNo == "" {
			return "total:" + strconv.FormatInt(e.Total, 10)
		}
		return e.RefundNo
	case "dispute":
		return e.DisputeID
	}
	return ""
}

// key is the business key the preset gives the event: per-key order runs
// a key's callbacks one after the other.
func (e *event) key() string {
	if e.Ignored && e.Source == "adyen" {
		return e.Order
	}
	if e.Type == "payment" || e.NamesOrder || e.Ignored {
		return e.code()
	}
	switch e.Source {
	case "shopify":
		return shop + "/order_id:" + e.PaymentNo
	default: // stripe's PaymentIntent, adyen's originalReference
		return e.PaymentNo
	}
}

// mayWait reports an event that, by the table, can wait for another.
func (e *event) mayWait() bool { return e.Type == "refund" || e.Type == "dispute" }

// ignoredNote is why a preset's other event changes nothing.
func ignoredNote(e *event) string {
	switch e.Source {
	case "paydemo":
		return "payment " + e.PaymentNo + " is pending"
	case "stripe":
		return "stripe event type payment_intent.created changes no payment"
	case "adyen":
		return "adyen eventCode CAPTURE (success true) changes no payment"
	case "wechatpay":
		return "wechat pay trade_state NOTPAY is neither a payment nor a failed payment"
	case "alipay":
		return "alipay trade_status WAIT_BUYER_PAY is neither a payment, a refund nor a closure"
	case "shopify":
		return `shopify order financial_status "pending" is not paid, and it is not cancelled`
	}
	panic(e.Source)
}

// closeReason is the reason a close carries, as each platform's page
// under docs/platforms/ says.
func closeReason(e *event) string { return e.Reason }

// history is what the generator has sent for one order (the model decides
// what it did).
type history struct {
	payments []*event // payment events sent, any source
	refunds  []*event
	disputes []*event
	total    int64 // the last running total sent (Alipay)
	refunded int64 // what the generator has asked to refund so far
}

// generate makes a sequence from seed: payments SUCCESS and FAILED,
// resends, second payments, amount and currency mismatches, unknown
// orders, foreign merchants, events of no effect, poison; refunds (partial,
// full, repeated, over the paid amount, before their payment, as running
// totals), refund failures and reversals, closures, disputes opened, won
// and lost, in and out of order; and carrier events in and out of order,
// over a few orders and waybills so that they meet. It ends a round where
// the rules need what came before settled: before an event keyed
// otherwise than the order's earlier ones of the round (a refund known by
// its payment), and after the event that follows one that may wait, so
// that what waits is tried again after it.
func generate(seed int64, n int) world {
	r := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	var w world
	for i := range 16 {
		w.Orders = append(w.Orders, order{Code: fmt.Sprintf("D-%d", i), User: int64(100 + i),
			Amount: int64(2 + r.IntN(500000)), Currency: currencies[r.IntN(len(currencies))]})
	}
	for i := range 4 {
		w.Orders = append(w.Orders, order{Code: shop + "/S-" + strconv.Itoa(i), User: int64(200 + i),
			Amount: int64(2 + r.IntN(500000)), Currency: currencies[r.IntN(len(currencies))]})
	}
	find := func(code string) *order {
		for i := range w.Orders {
			if w.Orders[i].Code == code {
				return &w.Orders[i]
			}
		}
		return nil
	}
	hist := map[string]*history{}
	histOf := func(code string) *history {
		if hist[code] == nil {
			hist[code] = &history{}
		}
		return hist[code]
	}
	// The round: the key each order's events use, which orders follow an
	// event that may wait, and which take no more events.
	roundKey, afterWait, frozen := map[string]string{}, map[string]bool{}, map[string]bool{}
	endRound := func() { roundKey, afterWait, frozen = map[string]string{}, map[string]bool{}, map[string]bool{} }
	var sent []int // indexes of steps that can be resent
	base := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	prelude(&w, base)
	endRound()
	barrier := len(w.Steps) > 0
	add := func(s step) {
		if s.Barrier {
			endRound()
		}
		if p := s.Pay; p != nil && !p.Foreign {
			code, key := p.code(), p.key()
			if k, ok := roundKey[code]; ok && k != key || frozen[code] {
				s.Barrier = true
				endRound()
			}
			roundKey[code] = key
			if afterWait[code] {
				frozen[code] = true
			}
			if p.mayWait() {
				afterWait[code] = true
			}
		}
		w.Steps = append(w.Steps, s)
	}
	for i := range n {
		if len(sent) > 0 && r.IntN(12) == 0 {
			prev := w.Steps[sent[r.IntN(len(sent))]]
			prev.Resend, prev.Barrier = true, false
			w.Steps = append(w.Steps, prev)
			continue
		}
		if r.IntN(4) == 0 {
			c := carrier{Waybill: "WB-" + strconv.Itoa(r.IntN(5)), Seq: int64(1 + r.IntN(6)),
				OccurredAt: base.Add(time.Duration(i) * time.Minute)}
			if r.IntN(2) == 0 {
				c.Source = "shipdemo"
				c.Status = []string{"PICKED_UP", "IN_TRANSIT", "OUT_FOR_DELIVERY", "DELIVERED", "EXCEPTION"}[r.IntN(5)]
				if r.IntN(2) == 0 {
					c.Order = "D-" + strconv.Itoa(r.IntN(16))
				}
				c.Location = []string{"Hamburg", "Lyon", "Porto"}[r.IntN(3)]
			} else {
				c.Source = "kuaidi100"
				c.State = []int{0, 1, 2, 3, 5, 8, 14}[r.IntN(7)]
				c.Location = []string{"上海市", "浙江省,杭州市", "广东省,深圳市"}[r.IntN(3)]
			}
			w.Steps = append(w.Steps, step{Ship: &c})
			sent = append(sent, len(w.Steps)-1)
			continue
		}
		e := &event{Seq: i, PaidAt: base.Add(time.Duration(i) * time.Second), NamesOrder: true}
		e.Source = []string{"paydemo", "paydemo", "stripe", "adyen", "wechatpay", "alipay", "shopify"}[r.IntN(7)]
		if e.Source == "shopify" {
			e.Order = "S-" + strconv.Itoa(r.IntN(5)) // S-4 is no order
		} else {
			e.Order = "D-" + strconv.Itoa(r.IntN(17)) // D-16 is no order
		}
		o := find(e.code())
		h := histOf(e.code())
		switch roll := r.IntN(100); {
		case roll < 44:
			genPayment(r, e, o, h)
		case roll < 76:
			genRefund(r, e, o, h)
		case roll < 81:
			genClose(r, e)
		default:
			genDispute(r, e, o, h)
		}
		if e.Type == "payment" {
			switch roll := r.IntN(30); {
			case roll < 2:
				e.Ignored, e.Status = true, ""
			case roll < 4 && e.Source != "paydemo": // the demo source binds no merchant
				e.Foreign = true
			case roll < 5 && e.Source == "paydemo":
				e.Poison = true
			}
		}
		add(step{Pay: e, Barrier: barrier})
		barrier = false
		if !e.Foreign {
			sent = append(sent, len(w.Steps)-1)
		}
	}
	return w
}

// prelude starts a sequence with every cell of the rule table: for each
// order state, an order of its own brought to it in a first round, then in
// a second round each kind of event sent to it, so that the fixed seed
// reaches every cell whatever the random part that follows does.
func prelude(w *world, base time.Time) {
	seq := 100000
	next := func() int { seq++; return seq }
	pd := func(code string, typ string) *event {
		n := next()
		return &event{Source: "paydemo", Seq: n, Type: typ, Order: code, NamesOrder: true, PaidAt: base.Add(time.Duration(n) * time.Millisecond)}
	}
	type scenario struct {
		setup  []*event
		target *event
	}
	var first, second []step
	states := []string{"UNPAID", "FAILED", "PAID", "PARTIALLY_REFUNDED", "REFUNDED", "CLOSED"}
	for si, state := range states {
		for ti, target := range []string{"pay-same", "pay-other", "pay-mismatch", "fail-same", "fail-other", "refund", "refund-over",
			"refund-failed-new", "refund-failed-counted", "reversed-counted", "reversed-unknown", "close", "dispute-open",
			"dispute-won", "dispute-lost", "dispute-lost-after-open", "dispute-won-after-lost", "refund-other-payment",
			"dispute-other-payment", "refund-total", "refund-matched", "refund-again-other-currency", "dispute-again-other-currency",
			"refund-after-lost", "failed-after-total", "total-after-failure", "refund-of-mismatched-payment"} {
			code := fmt.Sprintf("C-%d-%d", si, ti)
			o := order{Code: code, User: int64(300 + si*100 + ti), Amount: 1000 + int64(ti), Currency: []string{"CNY", "USD", "JPY"}[ti%3]}
			w.Orders = append(w.Orders, o)
			pay := func(no, status string) *event {
				e := pd(code, "payment")
				e.PaymentNo, e.Amount, e.Currency, e.Status, e.Received = no, o.Amount, o.Currency, status, o.Amount
				return e
			}
			refund := func(no string, amount int64, status string) *event {
				e := pd(code, "refund")
				e.RefundNo, e.Amount, e.Currency, e.Status = no, amount, o.Currency, status
				return e
			}
			dispute := func(id, status string) *event {
				e := pd(code, "dispute")
				e.DisputeID, e.Amount, e.Currency, e.Status = id, o.Amount/2, o.Currency, status
				return e
			}
			var sc scenario
			switch state {
			case "FAILED":
				sc.setup = append(sc.setup, pay("P1", "FAILED"))
			case "PAID":
				sc.setup = append(sc.setup, pay("P1", "SUCCESS"))
			case "PARTIALLY_REFUNDED":
				sc.setup = append(sc.setup, pay("P1", "SUCCESS"), refund("R0", o.Amount/3, "SUCCESS"))
			case "REFUNDED":
				sc.setup = append(sc.setup, pay("P1", "SUCCESS"), refund("R0", o.Amount, "SUCCESS"))
			case "CLOSED":
				c := pd(code, "close")
				c.Reason = "expired"
				sc.setup = append(sc.setup, c)
			}
			switch target {
			case "pay-same":
				sc.target = pay("P1", "SUCCESS")
			case "pay-other":
				sc.target = pay("P2", "SUCCESS")
			case "pay-mismatch":
				sc.target = pay("P3", "SUCCESS")
				sc.target.Amount--
			case "fail-same":
				sc.target = pay("P1", "FAILED")
			case "fail-other":
				sc.target = pay("P2", "FAILED")
			case "refund":
				sc.target = refund("R1", o.Amount/4, "SUCCESS")
			case "refund-over":
				sc.target = refund("R1", o.Amount+7, "SUCCESS")
			case "refund-failed-new":
				sc.target = refund("R1", 5, "FAILED")
				sc.target.Reason = "card expired"
			case "refund-failed-counted":
				sc.target = refund("R0", o.Amount/3, "FAILED")
			case "reversed-counted":
				sc.target = refund("R0", o.Amount/3, "REVERSED")
			case "reversed-unknown":
				sc.target = refund("R9", 3, "REVERSED")
			case "close":
				sc.target = pd(code, "close")
			case "dispute-open":
				sc.target = dispute("DP1", "OPEN")
			case "dispute-won":
				sc.target = dispute("DP1", "WON")
			case "dispute-lost":
				sc.target = dispute("DP1", "LOST")
			case "dispute-lost-after-open":
				sc.setup = append(sc.setup, dispute("DP1", "OPEN"))
				sc.target = dispute("DP1", "LOST")
			case "dispute-won-after-lost":
				sc.setup = append(sc.setup, dispute("DP1", "LOST"))
				sc.target = dispute("DP1", "WON")
			case "refund-other-payment":
				sc.target = refund("R1", 10, "SUCCESS")
				sc.target.PaymentNo = "P8"
			case "dispute-other-payment":
				sc.target = dispute("DP1", "OPEN")
				sc.target.PaymentNo = "P8"
			case "refund-again-other-currency": // once, before the currency
				sc.target = refund("R0", o.Amount/3, "SUCCESS")
				sc.target.Currency = "KWD"
			case "dispute-again-other-currency":
				sc.setup = append(sc.setup, dispute("DP1", "LOST"))
				sc.target = dispute("DP1", "LOST")
				sc.target.Currency = "KWD"
			case "refund-total": // Stripe's charge.refunded: a running total
				sc.target = &event{Source: "stripe", Seq: next(), Type: "refund", Order: code, NamesOrder: true, PaymentNo: "P1",
					Total: o.Amount/2 + 1, Currency: o.Currency, Status: "SUCCESS", PaidAt: base}
			case "refund-after-lost": // what a lost dispute took is not refunded again
				sc.setup = append(sc.setup, dispute("DP1", "LOST"))
				sc.target = refund("R1", o.Amount, "SUCCESS")
			case "failed-after-total": // a total counted it; it fails, never seen one by one
				sc.setup = append(sc.setup, &event{Source: "stripe", Seq: next(), Type: "refund", Order: code, NamesOrder: true, PaymentNo: "P1",
					Total: o.Amount / 2, Currency: o.Currency, Status: "SUCCESS", PaidAt: base})
				sc.target = &event{Source: "stripe", Seq: next(), Type: "refund", Order: code, NamesOrder: true, PaymentNo: "P1",
					RefundNo: "re_f", Amount: o.Amount / 2, Currency: o.Currency, Status: "FAILED", Reason: "expired_or_canceled_card", PaidAt: base}
			case "total-after-failure": // a total sent before its refund failed comes late
				sc.setup = append(sc.setup, refund("R0", o.Amount/3, "FAILED"))
				sc.target = &event{Source: "stripe", Seq: next(), Type: "refund", Order: code, NamesOrder: true, PaymentNo: "P1",
					Total: o.Amount / 3, Currency: o.Currency, Status: "SUCCESS", PaidAt: base}
			case "refund-of-mismatched-payment": // the refund of a payment that did not pay the order
				sc.setup = append(sc.setup, pay("P7", "SUCCESS"))
				sc.setup[len(sc.setup)-1].Amount--
				sc.target = refund("R7", o.Amount-1, "SUCCESS")
				sc.target.PaymentNo = "P7"
			case "refund-matched": // a total, then the refund it counted, one by one
				sc.setup = append(sc.setup, &event{Source: "stripe", Seq: next(), Type: "refund", Order: code, NamesOrder: true, PaymentNo: "P1",
					Total: o.Amount / 2, Currency: o.Currency, Status: "SUCCESS", PaidAt: base})
				sc.target = &event{Source: "stripe", Seq: next(), Type: "refund", Order: code, NamesOrder: true, PaymentNo: "P1",
					RefundNo: "re_m", Amount: o.Amount / 2, Currency: o.Currency, Status: "SUCCESS", PaidAt: base}
			}
			for _, e := range sc.setup {
				first = append(first, step{Pay: e})
			}
			second = append(second, step{Pay: sc.target})
		}
	}
	// The setups run in rounds of their own: a refund of a setup may wait
	// no more than any event does, so its order's next event ends the
	// round (see generate).
	w.Steps = append(w.Steps, first...)
	if len(second) > 0 {
		second[0].Barrier = true
	}
	w.Steps = append(w.Steps, second...)
}

// amountOf picks an event's amount and currency: the order's, sometimes
// another amount or currency.
func amountOf(r *rand.Rand, e *event, o *order, mismatch bool) {
	if o != nil {
		e.Amount, e.Currency = o.Amount, o.Currency
	} else {
		e.Amount, e.Currency = int64(1+r.IntN(9999)), currencies[r.IntN(len(currencies))]
	}
	if !mismatch {
		return
	}
	switch roll := r.IntN(20); {
	case roll < 2:
		e.Amount += int64(1 + r.IntN(100)) // amount mismatch
	case roll < 4:
		e.Currency = currencies[(slices.Index(currencies, e.Currency)+1+r.IntN(len(currencies)-1))%len(currencies)]
	}
}

// fixAlipay keeps an Alipay event in a currency it can express: CNY, or a
// cross-border trans_currency (never KWD's 3 decimals half the time).
func fixAlipay(r *rand.Rand, e *event) {
	if e.Source == "alipay" && e.Currency == "KWD" && r.IntN(2) == 0 {
		e.Currency = "CNY"
	}
}

func genPayment(r *rand.Rand, e *event, o *order, h *history) {
	e.Type, e.Status = "payment", "SUCCESS"
	amountOf(r, e, o, true)
	fixAlipay(r, e)
	if e.Source == "paydemo" && o != nil && e.Currency == o.Currency && r.IntN(3) == 0 {
		e.Currency = "" // a configured source without a currency: its payment_currency (CNY)
	}
	if r.IntN(4) == 0 && e.Source != "shopify" && e.Source != "alipay" {
		e.Status = "FAILED"
	}
	e.Received = e.Amount
	if e.Source == "stripe" && e.Amount > 1 && r.IntN(5) == 0 {
		e.Received = 1 + r.Int64N(e.Amount-1) // a partial receipt never pays the whole order
	}
	var same []*event
	for _, p := range h.payments {
		if p.Source == e.Source {
			same = append(same, p)
		}
	}
	switch {
	case len(same) > 0 && r.IntN(3) == 0:
		e.PaymentNo = same[r.IntN(len(same))].PaymentNo // the same payment again, under a new event
	case e.Source == "adyen":
		e.PaymentNo = fmt.Sprintf("PSP-%d", e.Seq)
	case e.Source == "shopify":
		e.PaymentNo = strconv.Itoa(9000 + e.Seq)
	default:
		e.PaymentNo = fmt.Sprintf("PAY-%d", e.Seq)
	}
	if e.Source == "adyen" && e.Status == "FAILED" && e.PaymentNo != fmt.Sprintf("PSP-%d", e.Seq) {
		e.PaymentNo = fmt.Sprintf("PSP-%d", e.Seq) // AUTHORISATION false of a known psp would be a new event id of it: keep them apart
	}
	h.payments = append(h.payments, e)
}

// paymentOf picks a payment sent for the order (by source, when the event
// must name one of its platform), or a payment number never sent.
func paymentOf(r *rand.Rand, e *event, h *history) string {
	var same []*event
	for _, p := range h.payments {
		if p.Source == e.Source || e.Source == "paydemo" {
			same = append(same, p)
		}
	}
	if len(same) > 0 && r.IntN(8) != 0 {
		return same[r.IntN(len(same))].PaymentNo
	}
	switch e.Source {
	case "adyen":
		return fmt.Sprintf("PSP-X%d", e.Seq)
	case "shopify":
		return strconv.Itoa(8000 + e.Seq)
	}
	return fmt.Sprintf("PAY-X%d", e.Seq)
}

func genRefund(r *rand.Rand, e *event, o *order, h *history) {
	e.Type, e.Status = "refund", "SUCCESS"
	amountOf(r, e, o, false)
	fixAlipay(r, e)
	if o != nil && r.IntN(12) == 0 {
		e.Currency = currencies[(slices.Index(currencies, e.Currency)+1)%len(currencies)] // another currency
		if e.Source == "alipay" && e.Currency == "KWD" {
			e.Currency = "CNY"
		}
	}
	full := e.Amount
	switch roll := r.IntN(10); {
	case roll < 3: // partial
		e.Amount = 1 + r.Int64N(max(1, full/2))
	case roll < 7: // what the generator believes remains, or all of it
		e.Amount = max(1, full-h.refunded)
		if r.IntN(3) == 0 {
			e.Amount = full
		}
	case roll < 8: // over what was paid
		e.Amount = full + 1 + r.Int64N(100)
	default:
		e.Amount = 1 + r.Int64N(max(1, full))
	}
	// Failures and reversals of a refund sent before, or a repeat.
	var mine []*event
	for _, rf := range h.refunds {
		if rf.RefundNo != "" && (rf.Source == e.Source || e.Source == "paydemo") {
			mine = append(mine, rf)
		}
	}
	switch e.Source {
	case "paydemo":
		e.PaymentNo = ""
		if r.IntN(2) == 0 {
			e.PaymentNo = paymentOf(r, e, h)
		}
		e.RefundNo = fmt.Sprintf("RF-%d", e.Seq)
		if len(mine) > 0 && r.IntN(2) == 0 {
			prev := mine[r.IntN(len(mine))]
			e.RefundNo, e.Amount = prev.RefundNo, prev.Amount
			e.Status = []string{"SUCCESS", "FAILED", "FAILED", "REVERSED", "REVERSED"}[r.IntN(5)]
		} else if r.IntN(5) == 0 {
			e.Status = []string{"FAILED", "REVERSED"}[r.IntN(2)] // of a refund never seen
		}
		if e.Status == "FAILED" && r.IntN(2) == 0 {
			e.Reason = "card expired"
		}
	case "stripe":
		e.PaymentNo = paymentOf(r, e, h)
		e.NamesOrder = r.IntN(3) != 0
		if r.IntN(4) == 0 { // charge.refunded: the Charge's running total
			e.NamesOrder = true
			e.Total = h.refunded + e.Amount
			if r.IntN(4) == 0 {
				e.Total = h.total
			}
			e.Amount, e.RefundNo = 0, ""
			h.total = e.Total
			break
		}
		e.RefundNo = fmt.Sprintf("re_%d", e.Seq)
		if len(mine) > 0 && r.IntN(3) == 0 {
			prev := mine[r.IntN(len(mine))]
			e.RefundNo, e.Amount = prev.RefundNo, prev.Amount
			e.Status = []string{"SUCCESS", "FAILED"}[r.IntN(2)]
		} else if r.IntN(4) == 0 {
			// Failed, never seen one by one: a running total sent
			// before may have counted it (it takes that back).
			e.Status = "FAILED"
		}
		if e.Status == "FAILED" {
			e.Variant = r.IntN(2) // refund.failed, or refund.updated with status failed
			e.Reason = "expired_or_canceled_card"
		}
	case "adyen":
		e.NamesOrder = false
		e.PaymentNo = paymentOf(r, e, h)
		e.RefundNo = fmt.Sprintf("PSP-R%d", e.Seq)
		switch roll := r.IntN(6); {
		case roll == 0: // REFUND success false: the refund request refused
			e.Status, e.Reason = "FAILED", "adyen REFUND was refused"
		case roll <= 2 && len(mine) > 0: // REFUND_FAILED or REFUNDED_REVERSED of a refund sent before
			prev := mine[r.IntN(len(mine))]
			e.RefundNo, e.Amount, e.PaymentNo = prev.RefundNo, prev.Amount, prev.PaymentNo
			if roll == 1 {
				e.Status, e.Reason = "FAILED", "adyen REFUND_FAILED: the refund failed after it was processed"
				e.Variant = 1
			} else {
				e.Status = "REVERSED"
			}
		}
	case "wechatpay":
		e.PaymentNo = paymentOf(r, e, h)
		e.RefundNo = fmt.Sprintf("5030%d", e.Seq)
		if len(mine) > 0 && r.IntN(3) == 0 {
			prev := mine[r.IntN(len(mine))]
			e.RefundNo, e.Amount = prev.RefundNo, prev.Amount
		}
		if r.IntN(4) == 0 {
			e.Status, e.Reason = "FAILED", "wechat pay REFUND.CLOSED: the refund was closed"
		}
	case "alipay": // refund_fee: the trade's running total, with out_biz_no
		e.PaymentNo = paymentOf(r, e, h)
		e.Total = h.refunded + e.Amount
		e.RefundNo = fmt.Sprintf("OBN-%d", e.Seq)
		if len(mine) > 0 && r.IntN(4) == 0 {
			prev := mine[r.IntN(len(mine))]
			e.RefundNo, e.Total = prev.RefundNo, prev.Total // a resend under a new notify_id
		}
		e.Amount = 0
		e.Variant = r.IntN(2) // TRADE_SUCCESS or TRADE_CLOSED with refund_fee
	case "shopify":
		e.NamesOrder = false
		e.PaymentNo = paymentOf(r, e, h)
		e.RefundNo = strconv.Itoa(7000 + e.Seq)
		if r.IntN(5) == 0 {
			e.Status, e.Reason = "FAILED", "shopify refund transactions failed"
		}
	}
	if e.Status == "SUCCESS" {
		h.refunded += e.Amount
	}
	h.refunds = append(h.refunds, e)
}

func genClose(r *rand.Rand, e *event) {
	e.Type = "close"
	switch e.Source {
	case "paydemo":
		e.Reason = []string{"", "expired", "cancelled by the buyer"}[r.IntN(3)]
	case "alipay":
		e.Reason = "alipay TRADE_CLOSED: the trade closed unpaid"
	case "wechatpay":
		e.Reason = "wechat pay trade_state CLOSED"
	case "stripe":
		// A PaymentIntent canceled is a failed attempt (docs/platforms/stripe.md),
		// not the order's closure.
		e.Type, e.Status, e.Variant = "payment", "FAILED", 1
		e.PaymentNo, e.Amount, e.Currency = fmt.Sprintf("PAY-C%d", e.Seq), 100, "USD"
	case "adyen":
		e.Reason = "adyen ORDER_CLOSED: the order was not paid in full in time"
	case "shopify":
		e.Reason = "shopify orders/cancelled customer"
		e.PaymentNo = strconv.Itoa(9000 + e.Seq)
	}
}

func genDispute(r *rand.Rand, e *event, o *order, h *history) {
	e.Type = "dispute"
	amountOf(r, e, o, false)
	if o != nil && r.IntN(15) == 0 {
		e.Currency = currencies[(slices.Index(currencies, e.Currency)+1)%len(currencies)]
	}
	if r.IntN(3) == 0 {
		e.Amount = 1 + r.Int64N(max(1, e.Amount))
	}
	e.Status = []string{"OPEN", "OPEN", "WON", "LOST", "LOST"}[r.IntN(5)]
	if e.Source == "alipay" || e.Source == "wechatpay" {
		e.Source = "paydemo" // no China-side dispute notification
	}
	var mine []*event
	for _, d := range h.disputes {
		if d.Source == e.Source {
			mine = append(mine, d)
		}
	}
	switch e.Source {
	case "paydemo":
		e.DisputeID = fmt.Sprintf("DP-%d", e.Seq)
		if r.IntN(2) == 0 {
			e.PaymentNo = paymentOf(r, e, h)
		}
	case "stripe":
		e.NamesOrder = false
		e.PaymentNo = paymentOf(r, e, h)
		e.DisputeID = fmt.Sprintf("dp_%d", e.Seq)
		if e.Status == "OPEN" {
			break
		}
		if e.Status == "WON" && r.IntN(3) == 0 {
			e.Variant = 1 // warning_closed: an inquiry closed without a chargeback
		}
	case "adyen": // one dispute per payment, named by it
		e.NamesOrder = false
		e.PaymentNo = paymentOf(r, e, h)
		e.DisputeID = e.PaymentNo
	case "shopify":
		e.NamesOrder = false
		e.PaymentNo = paymentOf(r, e, h)
		e.DisputeID = strconv.Itoa(6000 + e.Seq)
		e.Variant = r.IntN(2) // needs_response or under_review for OPEN; lost or accepted for LOST
	}
	if len(mine) > 0 && e.Source != "adyen" && r.IntN(2) == 0 {
		prev := mine[r.IntN(len(mine))]
		e.DisputeID, e.PaymentNo, e.NamesOrder = prev.DisputeID, prev.PaymentNo, prev.NamesOrder
	}
	h.disputes = append(h.disputes, e)
}

// request is one HTTP request to POST /callbacks/{Source}.
type request struct {
	Source string
	Body   []byte
	Header http.Header
}

// eventID is the event id the intake will find for a step (its
// idempotency key with the source).
func (s step) eventID() string {
	if c := s.Ship; c != nil {
		if c.Source == "shipdemo" {
			return c.Waybill + ":" + strconv.FormatInt(c.Seq, 10)
		}
		return c.Waybill + ":" + strconv.FormatInt(c.Seq, 10) + ":" + strconv.Itoa(c.State)
	}
	e := s.Pay
	switch e.Source {
	case "paydemo":
		return fmt.Sprintf("msg-%d", e.Seq)
	case "stripe":
		return fmt.Sprintf("evt_%d", e.Seq)
	case "adyen":
		psp, code, success := adyenItemOf(e)
		return psp + ":" + code + ":" + success
	case "wechatpay":
		return fmt.Sprintf("EV-%d", e.Seq)
	case "alipay":
		return fmt.Sprintf("notify-%d", e.Seq)
	case "shopify": // docs/platforms/shopify.md, "Event ids": from the signed body only
		switch {
		case e.Ignored:
			return fmt.Sprintf("order:%d:%s", 9000+e.Seq, e.PaidAt.Format(time.RFC3339))
		case e.Type == "payment":
			return fmt.Sprintf("order:%s:%s:paid", e.PaymentNo, e.PaidAt.Format(time.RFC3339))
		case e.Type == "close":
			return fmt.Sprintf("order:%s:%s:cancelled", e.PaymentNo, e.PaidAt.Format(time.RFC3339))
		case e.Type == "refund":
			status := "SUCCESS"
			if e.Status == "FAILED" {
				status = "FAILED"
			}
			return fmt.Sprintf("transaction:%s:%s", e.RefundNo, status)
		default: // a dispute has no updated_at: its status stands in
			return fmt.Sprintf("dispute:%s:%s", e.DisputeID, shopifyDisputeStatus(e))
		}
	}
	panic("no source " + e.Source)
}

// adyenItemOf is the pspReference, eventCode and success of an Adyen
// item for e.
func adyenItemOf(e *event) (psp, code, success string) {
	switch {
	case e.Ignored:
		return e.PaymentNo, "CAPTURE", "true"
	case e.Type == "payment":
		return e.PaymentNo, "AUTHORISATION", strconv.FormatBool(e.Status != "FAILED")
	case e.Type == "close":
		return fmt.Sprintf("PSP-C%d", e.Seq), "ORDER_CLOSED", "false"
	case e.Type == "refund":
		switch {
		case e.Status == "REVERSED":
			return e.RefundNo, "REFUNDED_REVERSED", "true"
		case e.Status == "FAILED" && e.Variant == 1:
			return e.RefundNo, "REFUND_FAILED", "true"
		}
		return e.RefundNo, "REFUND", strconv.FormatBool(e.Status == "SUCCESS")
	}
	code = map[string]string{"OPEN": "NOTIFICATION_OF_CHARGEBACK", "LOST": "CHARGEBACK", "WON": "CHARGEBACK_REVERSED"}[e.Status]
	return fmt.Sprintf("PSP-D%d", e.Seq), code, "true"
}

// source is the step's source.
func (s step) source() string {
	if s.Ship != nil {
		return s.Ship.Source
	}
	return s.Pay.Source
}

// digits are the ISO 4217 exponents of the world's currencies, written
// here rather than taken from the code under test.
var digits = map[string]int{"CNY": 2, "USD": 2, "JPY": 0, "KWD": 3, "EUR": 2}

// decimal writes minor units of currency as the platform's decimal amount.
func decimal(minor int64, currency string) string {
	d := digits[currency]
	if d == 0 {
		return strconv.FormatInt(minor, 10)
	}
	s := fmt.Sprintf("%0*d", d+1, minor)
	return s[:len(s)-d] + "." + s[len(s)-d:]
}

var chinaTime = time.FixedZone("UTC+8", 8*3600)

// render words a step as its platform does, signed with the sources'
// keys, at now.
func render(s step, rsaKey *rsa.PrivateKey, paydemoSecret, shipdemoSecret string, now time.Time) request {
	if c := s.Ship; c != nil {
		return renderCarrier(c, shipdemoSecret)
	}
	e := s.Pay
	id := s.eventID()
	switch e.Source {
	case "paydemo":
		return renderPaydemo(e, id, paydemoSecret, now)
	case "stripe":
		body := mustJSON(map[string]any{"id": id, "object": "event", "livemode": !e.Foreign, "type": stripeType(e), "created": e.PaidAt.Unix(),
			"api_version": "2025-08-27.basil", "data": map[string]any{"object": stripeObject(e)}})
		return request{"stripe", body, http.Header{"Content-Type": {"application/json"},
			"Stripe-Signature": {signature.SignStripe(stripeSecret, now, body)}}}
	case "adyen":
		psp, code, success := adyenItemOf(e)
		account := adyenAccount
		if e.Foreign {
			account = "SomeoneElseECOM"
		}
		original := ""
		if e.Type == "refund" || e.Type == "dispute" {
			original = e.PaymentNo
		}
		value := strconv.FormatInt(e.Amount, 10)
		sig, err := signature.SignFields(adyenKey, ":", psp, original, account, e.Order, value, e.Currency, code, success)
		if err != nil {
			panic(err)
		}
		item := map[string]any{"pspReference": psp, "merchantAccountCode": account, "merchantReference": e.Order,
			"amount": map[string]any{"value": e.Amount, "currency": e.Currency}, "eventCode": code, "success": success,
			"eventDate": e.PaidAt.Format(time.RFC3339), "additionalData": map[string]any{"hmacSignature": sig}}
		if original != "" {
			item["originalReference"] = original
		}
		body := mustJSON(map[string]any{"live": "false", "notificationItems": []any{map[string]any{"NotificationRequestItem": item}}})
		return request{"adyen", body, http.Header{"Content-Type": {"application/json"}}}
	case "wechatpay":
		return renderWeChat(e, id, rsaKey, now)
	case "alipay":
		return renderAlipay(e, id, rsaKey)
	case "shopify":
		return renderShopify(e, id)
	}
	panic("no source " + e.Source)
}

func renderCarrier(c *carrier, shipdemoSecret string) request {
	if c.Source == "shipdemo" {
		ev := map[string]any{"waybillNo": c.Waybill, "seq": c.Seq, "status": c.Status, "location": c.Location,
			"occurredAt": c.OccurredAt.Format(time.RFC3339)}
		if c.Order != "" {
			ev["orderCode"] = c.Order
		}
		body := mustJSON(ev)
		return request{"shipdemo", body, http.Header{"Content-Type": {"application/json"},
			"X-Signature": {signature.SignHMAC(shipdemoSecret, body, "hex", "")}}}
	}
	data := make([]map[string]any, c.Seq)
	for i := range data {
		at := c.OccurredAt.Add(-time.Duration(i) * time.Hour).In(chinaTime).Format("2006-01-02 15:04:05")
		data[i] = map[string]any{"context": "第" + strconv.Itoa(int(c.Seq)-i) + "站", "time": at, "ftime": at, "areaName": c.Location}
	}
	param := string(mustJSON(map[string]any{"status": "polling", "message": "", "lastResult": map[string]any{
		"message": "ok", "nu": c.Waybill, "state": strconv.Itoa(c.State), "com": "yuantong", "data": data}}))
	form := url.Values{"param": {param}, "sign": {signature.SignMD5Salt(param, kuaidiSalt)}}
	return request{"kuaidi100", []byte(form.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}
}

// renderPaydemo writes the canonical shapes of docs/guarantees.md's table for
// configured JSON sources.
func renderPaydemo(e *event, id, secret string, now time.Time) request {
	ev := map[string]any{"orderCode": e.Order}
	switch {
	case e.Ignored:
		ev["ignored"] = "payment " + e.PaymentNo + " is pending"
	case e.Type == "payment":
		ev["paymentNo"], ev["amount"], ev["status"], ev["paidAt"] = e.PaymentNo, e.Amount, e.Status, e.PaidAt.Format(time.RFC3339)
		if e.Poison {
			ev["status"] = "MAYBE"
		}
	case e.Type == "refund":
		ev["type"], ev["refundNo"], ev["amount"], ev["status"] = "refund", e.RefundNo, e.Amount, e.Status
		if e.PaymentNo != "" {
			ev["paymentNo"] = e.PaymentNo
		}
		if e.Reason != "" {
			ev["reason"] = e.Reason
		}
	case e.Type == "close":
		ev["type"] = "close"
		if e.Reason != "" {
			ev["reason"] = e.Reason
		}
	case e.Type == "dispute":
		ev["type"], ev["disputeId"], ev["status"], ev["amount"] = "dispute", e.DisputeID, e.Status, e.Amount
		if e.PaymentNo != "" {
			ev["paymentNo"] = e.PaymentNo
		}
	}
	if e.Currency != "" && (e.Type == "payment" || e.Type == "refund" || e.Type == "dispute") && !e.Ignored {
		ev["currency"] = e.Currency
	}
	body := mustJSON(ev)
	sig, err := signature.SignStandardWebhooks(secret, id, now, body)
	if err != nil {
		panic(err)
	}
	return request{"paydemo", body, http.Header{"Content-Type": {"application/json"}, "webhook-id": {id},
		"webhook-timestamp": {strconv.FormatInt(now.Unix(), 10)}, "webhook-signature": {sig}}}
}

func stripeType(e *event) string {
	switch {
	case e.Ignored:
		return "payment_intent.created"
	case e.Type == "payment" && e.Status == "FAILED" && e.Variant == 1:
		return "payment_intent.canceled"
	case e.Type == "payment" && e.Status == "FAILED":
		return "payment_intent.payment_failed"
	case e.Type == "payment":
		return "payment_intent.succeeded"
	case e.Type == "refund" && e.RefundNo == "":
		return "charge.refunded"
	case e.Type == "refund" && e.Status == "FAILED" && e.Variant == 0:
		return "refund.failed"
	case e.Type == "refund":
		return "refund.updated"
	case e.Status == "OPEN":
		return "charge.dispute.created"
	}
	return "charge.dispute.closed"
}

// stripeObject is the event's data.object: a PaymentIntent, a Charge, a
// Refund or a Dispute (docs.stripe.com/api).
func stripeObject(e *event) map[string]any {
	meta := map[string]any{}
	if e.NamesOrder {
		meta["order_code"] = e.Order
	}
	cur := strings.ToLower(e.Currency)
	switch {
	case e.Type == "payment" || e.Ignored:
		received := e.Received
		if e.Status == "FAILED" {
			received = 0
		}
		obj := map[string]any{"id": e.PaymentNo, "object": "payment_intent", "amount": e.Amount, "amount_received": received,
			"currency": cur, "metadata": meta}
		if e.Variant == 1 && e.Status == "FAILED" {
			obj["status"], obj["cancellation_reason"] = "canceled", "abandoned"
		}
		return obj
	case e.Type == "refund" && e.RefundNo == "":
		return map[string]any{"id": "ch_" + e.PaymentNo, "object": "charge", "amount": e.Total, "amount_refunded": e.Total,
			"refunded": false, "payment_intent": e.PaymentNo, "currency": cur, "metadata": meta}
	case e.Type == "refund":
		status := map[string]string{"SUCCESS": "succeeded", "FAILED": "failed"}[e.Status]
		obj := map[string]any{"id": e.RefundNo, "object": "refund", "amount": e.Amount, "currency": cur, "payment_intent": e.PaymentNo,
			"charge": "ch_" + e.PaymentNo, "status": status, "metadata": meta}
		if e.Status == "FAILED" {
			obj["failure_reason"] = e.Reason
		}
		return obj
	}
	status := map[string]string{"OPEN": "needs_response", "WON": "won", "LOST": "lost"}[e.Status]
	if e.Variant == 1 && e.Status == "WON" {
		status = "warning_closed"
	}
	return map[string]any{"id": e.DisputeID, "object": "dispute", "amount": e.Amount, "currency": cur, "payment_intent": e.PaymentNo,
		"charge": "ch_" + e.PaymentNo, "status": status, "reason": "fraudulent"}
}

func renderWeChat(e *event, id string, rsaKey *rsa.PrivateKey, now time.Time) request {
	mch := wechatMch
	if e.Foreign {
		mch = "1900000999"
	}
	var plain []byte
	eventType, original := "TRANSACTION.SUCCESS", "transaction"
	if e.Type == "refund" {
		eventType, original = "REFUND.SUCCESS", "refund"
		status := "SUCCESS"
		if e.Status == "FAILED" {
			eventType, status = "REFUND.CLOSED", "CLOSED"
		}
		plain = mustJSON(map[string]any{"mchid": mch, "out_trade_no": e.Order, "transaction_id": e.PaymentNo, "out_refund_no": "M" + e.RefundNo,
			"refund_id": e.RefundNo, "refund_status": status, "user_received_account": "招商银行信用卡0403",
			"amount": map[string]any{"total": e.Amount, "refund": e.Amount, "payer_total": e.Amount, "payer_refund": e.Amount, "currency": e.Currency}})
	} else {
		state := "SUCCESS"
		switch {
		case e.Ignored:
			state = "NOTPAY"
		case e.Type == "close":
			state, eventType = "CLOSED", "TRANSACTION.CLOSED"
		case e.Status == "FAILED":
			state = "PAYERROR"
		}
		tx := map[string]any{"mchid": mch, "appid": wechatApp, "out_trade_no": e.Order, "trade_state": state,
			"success_time": e.PaidAt.In(chinaTime).Format(time.RFC3339), "amount": map[string]any{"total": e.Amount, "currency": e.Currency}}
		if e.Type != "close" {
			tx["transaction_id"] = e.PaymentNo
		} else {
			tx["amount"] = map[string]any{"total": 100, "currency": "CNY"}
		}
		plain = mustJSON(tx)
	}
	block, _ := aes.NewCipher([]byte(wechatKey))
	gcm, _ := cipher.NewGCM(block)
	nonce := fmt.Sprintf("%012d", e.Seq)
	body := mustJSON(map[string]any{"id": id, "event_type": eventType, "resource_type": "encrypt-resource",
		"resource": map[string]any{"original_type": original, "algorithm": "AEAD_AES_256_GCM", "associated_data": original,
			"nonce": nonce, "ciphertext": base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plain, []byte(original)))}})
	ts, wnonce := strconv.FormatInt(now.Unix(), 10), "n"+strconv.Itoa(e.Seq)
	return request{"wechatpay", body, http.Header{"Content-Type": {"application/json"}, "Wechatpay-Serial": {wechatKeyID},
		"Wechatpay-Timestamp": {ts}, "Wechatpay-Nonce": {wnonce},
		"Wechatpay-Signature": {testenv.SignSHA256WithRSA(rsaKey, []byte(ts+"\n"+wnonce+"\n"+string(body)+"\n"))}}}
}

func renderAlipay(e *event, id string, rsaKey *rsa.PrivateKey) request {
	trade := "TRADE_SUCCESS"
	switch {
	case e.Ignored:
		trade = "WAIT_BUYER_PAY"
	case e.Type == "close":
		trade = "TRADE_CLOSED"
	case e.Type == "refund" && e.Variant == 1:
		trade = "TRADE_CLOSED" // a full refund closes the trade; its refund_fee says how much
	}
	app := alipayApp
	if e.Foreign {
		app = "2021000000000999"
	}
	no := e.PaymentNo
	if no == "" {
		no = "T-" + strconv.Itoa(e.Seq)
	}
	currency := e.Currency
	if currency == "" {
		currency = "CNY"
	}
	params := [][2]string{{"app_id", app}, {"seller_id", alipaySeller}, {"notify_id", id}, {"out_trade_no", e.Order},
		{"trade_no", no}, {"trade_status", trade}, {"total_amount", decimal(max(e.Amount, 100), currency)},
		{"gmt_payment", e.PaidAt.In(chinaTime).Format("2006-01-02 15:04:05")}, {"charset", "utf-8"}}
	if e.Type == "refund" {
		params = append(params, [2]string{"refund_fee", decimal(e.Total, currency)}, [2]string{"out_biz_no", e.RefundNo},
			[2]string{"gmt_refund", e.PaidAt.In(chinaTime).Format("2006-01-02 15:04:05.000")})
	}
	if currency != "CNY" {
		params = append(params, [2]string{"trans_currency", currency})
	}
	var content []string
	for _, kv := range params {
		content = append(content, kv[0]+"="+kv[1])
	}
	slices.Sort(content)
	form := url.Values{"sign_type": {"RSA2"}, "sign": {testenv.SignSHA256WithRSA(rsaKey, []byte(strings.Join(content, "&")))}}
	for _, kv := range params {
		form.Set(kv[0], kv[1])
	}
	return request{"alipay", []byte(form.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded; charset=utf-8"}}}
}

func renderShopify(e *event, id string) request {
	var body []byte
	topic := "orders/paid"
	at := e.PaidAt.Format(time.RFC3339)
	orderID, _ := strconv.Atoi(e.PaymentNo)
	domain := shop
	if e.Foreign {
		domain = foreignShop
	}
	switch {
	case e.Ignored:
		topic = "orders/updated"
		body = mustJSON(map[string]any{"id": 9000 + e.Seq, "name": e.Order, "currency": e.Currency, "total_price": decimal(e.Amount, e.Currency),
			"financial_status": "pending", "updated_at": at})
	case e.Type == "payment":
		body = mustJSON(map[string]any{"id": orderID, "name": e.Order, "currency": e.Currency, "total_price": decimal(e.Amount, e.Currency),
			"financial_status": "paid", "updated_at": at, "processed_at": at, "order_status_url": "https://" + domain + "/548380009/orders/x/authenticate?key=k"})
	case e.Type == "close":
		topic = "orders/cancelled"
		body = mustJSON(map[string]any{"id": orderID, "name": e.Order, "currency": "USD", "total_price": "1.00", "financial_status": "voided",
			"cancelled_at": at, "cancel_reason": "customer", "updated_at": at})
	case e.Type == "refund":
		topic = "refunds/create"
		status := "success"
		if e.Status == "FAILED" {
			status = "failure"
		}
		refundID, _ := strconv.Atoi(e.RefundNo)
		body = mustJSON(map[string]any{"id": refundID, "order_id": orderID, "created_at": at, "note": "differential",
			// Each refund transaction is a refund of its own, by its id: the
			// refund's one transaction has the refund's number.
			"transactions": []any{map[string]any{"id": refundID, "order_id": orderID, "kind": "refund", "gateway": "bogus", "status": status,
				"amount": decimal(e.Amount, e.Currency), "currency": e.Currency}}})
	default:
		topic = "disputes/update"
		status := shopifyDisputeStatus(e)
		disputeID, _ := strconv.Atoi(e.DisputeID)
		body = mustJSON(map[string]any{"id": disputeID, "order_id": orderID, "type": "chargeback", "amount": decimal(e.Amount, e.Currency),
			"currency": e.Currency, "reason": "fraudulent", "status": status, "initiated_at": at})
	}
	return request{"shopify", body, http.Header{"Content-Type": {"application/json"},
		"X-Shopify-Hmac-Sha256": {signature.SignHMAC(shopifySecret, body, "base64", "")},
		"X-Shopify-Topic":       {topic}, "X-Shopify-Shop-Domain": {domain}, "X-Shopify-Webhook-Id": {"wh-" + strconv.Itoa(e.Seq)}}}
}

// shopifyDisputeStatus is the Shopify Payments status of a dispute event.
func shopifyDisputeStatus(e *event) string {
	if e.Variant == 1 {
		return map[string]string{"OPEN": "under_review", "WON": "won", "LOST": "accepted"}[e.Status]
	}
	return map[string]string{"OPEN": "needs_response", "WON": "won", "LOST": "lost"}[e.Status]
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
