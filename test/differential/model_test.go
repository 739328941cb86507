package differential_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The reference model: the business rules written out once more, plainly,
// from the documentation's tables (docs/guarantees.md, "A payment's life:
// the rule table", the platforms' pages under docs/platforms/, and the carrier rules), one callback after another
// in the order they were accepted. It shares no code with the handlers;
// where they disagree, one of them is wrong.

// outcome is what the model says of one accepted callback.
type outcome struct {
	Status    string   // SUCCESS or FAILED
	LastError string   // for FAILED
	Note      string   // for a SUCCESS that says something (no effect, an exception)
	Messages  []string // "routing.key {json}", in order
	// Waited: an attempt waited for an event not processed yet (its
	// payment, its refund); how many attempts it took is up to timing.
	Waited bool
}

// modelOrder is an orders row as the model keeps it.
type modelOrder struct {
	order
	Status    string
	PaymentNo string
	PaidAt    string // RFC 3339 UTC; "received" when the event had no time
	Refunded  int64
	Dispute   string // "" or OPEN, WON, LOST
	refunds   map[string]*modelRefund
	disputes  map[string]*modelDispute
	payments  map[string]*modelPayment
}

// modelRefund is a refunds row.
type modelRefund struct {
	Status                   string // SUCCEEDED, FAILED, REVERSED
	Amount, Counted, Matched int64
	Payment                  string
}

type modelDispute struct {
	Status  string
	Amount  int64
	Counted int64 // what it took from what remained, when LOST
	Payment string
}

type modelPayment struct {
	Status string // SUCCEEDED, FAILED
	Paying bool
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
	byPayment map[string][]string // payment number -> orders it was recorded for
	shipments map[string]*modelShipment
	events    map[string]string // "waybill:seq" -> "status|location|occurred_at"
	seen      map[string]bool   // source + "\x00" + event id, accepted
	accepted  []string          // keys of seen, in the order accepted
	outcomes  map[string]outcome
	// waiting are the accepted events that wait, by key, in the order
	// accepted; cells counts the rule table's cells the sequence reached.
	waiting []pending
	cells   map[string]int
}

// pending is an event that waits, and the reason its last attempt gave.
type pending struct {
	key    string
	ev     *event
	reason string
}

func newModel(orders []order) *model {
	m := &model{orders: map[string]*modelOrder{}, byPayment: map[string][]string{}, shipments: map[string]*modelShipment{},
		events: map[string]string{}, seen: map[string]bool{}, outcomes: map[string]outcome{}, cells: map[string]int{}}
	for _, o := range orders {
		m.orders[o.Code] = &modelOrder{order: o, Status: "UNPAID", refunds: map[string]*modelRefund{},
			disputes: map[string]*modelDispute{}, payments: map[string]*modelPayment{}}
	}
	return m
}

// Intake answers.
const (
	answerAccepted  = "accepted"
	answerDuplicate = "duplicate"
	answerForeign   = "forbidden"
)

// intake says how the gateway answers step s, and, if it is new, applies
// it.
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
	if s.Ship != nil {
		m.outcomes[key] = m.carrier(s.Ship)
		return answerAccepted
	}
	m.apply(key, s.Pay)
	return answerAccepted
}

// apply decides event e; one that waits is kept, and every event that
// waits for e's order is tried again after it, in the order accepted (the
// generator lets one event of an order follow an event that may wait in a
// round, so their next attempts come after it).
func (m *model) apply(key string, e *event) {
	o, reason, waits := m.decide(e)
	if waits {
		m.waiting = append(m.waiting, pending{key, e, reason})
		m.outcomes[key] = outcome{Waited: true}
	} else {
		m.outcomes[key] = o
	}
	order := m.orderOf(e)
	if order == nil {
		return
	}
	var still []pending
	for _, w := range m.waiting {
		if w.key == key || m.orderOf(w.ev) != order {
			still = append(still, w)
			continue
		}
		o, reason, waits := m.decide(w.ev)
		if waits {
			w.reason = reason
			still = append(still, w)
			continue
		}
		o.Waited = true
		m.outcomes[w.key] = o
	}
	m.waiting = still
}

// settle ends a round: what still waits has spent its retry budget.
func (m *model) settle() {
	for _, w := range m.waiting {
		m.outcomes[w.key] = outcome{Status: "FAILED", LastError: w.reason, Waited: true}
	}
	m.waiting = nil
}

func failed(format string, args ...any) outcome {
	return outcome{Status: "FAILED", LastError: fmt.Sprintf(format, args...)}
}

func noEffect(format string, args ...any) outcome {
	return outcome{Status: "SUCCESS", Note: fmt.Sprintf(format, args...)}
}

func message(routingKey string, payload map[string]any) string {
	b, _ := json.Marshal(payload)
	return routingKey + " " + string(b)
}

// orderOf is the order an event is about, as far as the model knows now:
// by its code, or by the payment it names; nil when there is none.
func (m *model) orderOf(e *event) *modelOrder {
	if code := e.orderCode(); code != "" {
		return m.orders[code]
	}
	if codes := m.byPayment[e.paymentNo()]; len(codes) == 1 {
		return m.orders[codes[0]]
	}
	return nil
}

// cell counts one cell of the rule table.
func (m *model) cell(event, state string) {
	switch state {
	case "UNPAID", "FAILED":
		state = "UNPAID/FAILED"
	case "PAID", "PARTIALLY_REFUNDED":
		state = "PAID/PARTIALLY_REFUNDED"
	}
	m.cells[event+" | "+state]++
}

// decide is the rule table of docs/guarantees.md. It returns the outcome, or, for an
// event that waits, its reason.
func (m *model) decide(e *event) (outcome, string, bool) {
	if e.Poison {
		return failed(`invalid payload: status "MAYBE" is not SUCCESS or FAILED`), "", false
	}
	if e.Ignored {
		return outcome{Status: "SUCCESS", Note: ignoredNote(e)}, "", false
	}
	// Before the table, 2: the order. An order the world does not hold
	// never comes: the event is FAILED once its grace has run out (after
	// how many attempts is up to timing).
	var o *modelOrder
	if code := e.orderCode(); code != "" {
		if o = m.orders[code]; o == nil {
			return failed("order not found"), "", false
		}
	} else {
		codes := m.byPayment[e.paymentNo()]
		if len(codes) != 1 {
			return failed("order not found: no payment %s recorded", e.paymentNo()), "", false
		}
		o = m.orders[codes[0]]
	}
	// 3. Another payment than the one that paid the order.
	if (e.Type == "refund" || e.Type == "dispute") && e.paymentNo() != "" && e.paymentNo() != o.PaymentNo &&
		(o.PaymentNo != "" || o.payments[e.paymentNo()] != nil) {
		m.cell(e.Type+" of another payment", o.Status)
		return m.otherPayment(o, e), "", false
	}
	switch e.Type {
	case "refund":
		return m.refund(o, e)
	case "close":
		return m.close(o, e), "", false
	case "dispute":
		return m.dispute(o, e)
	}
	if e.Status == "FAILED" {
		return m.paymentFailure(o, e), "", false
	}
	return m.paymentSuccess(o, e), "", false
}

// currencyOf is the event's currency (before the table, 5): its own, or
// the source's payment_currency (paydemo: CNY).
func currencyOf(e *event) string {
	if e.Currency == "" {
		return "CNY"
	}
	return e.Currency
}

func exception(o *modelOrder, paymentNo, kind string, amount int64, currency, detail string) outcome {
	return outcome{Status: "SUCCESS", Note: "exception " + kind + ": " + detail, Messages: []string{message("payment.exception",
		map[string]any{"orderCode": o.Code, "paymentNo": paymentNo, "kind": kind, "amount": amount, "currency": currency})}}
}

func minor(amount int64, currency string) string {
	return strconv.FormatInt(amount, 10) + " (" + currency + " minor units)"
}

func (m *model) record(o *modelOrder, no, status string, paying bool) {
	p := o.payments[no]
	if p == nil {
		p = &modelPayment{}
		o.payments[no] = p
		if !slices.Contains(m.byPayment[no], o.Code) {
			m.byPayment[no] = append(m.byPayment[no], o.Code)
		}
	}
	if p.Status != "SUCCEEDED" {
		p.Status = status
	}
	p.Paying = p.Paying || paying
}

// paymentSuccess: the table's first row, with "once" (4) and the
// currency (5) before it.
func (m *model) paymentSuccess(o *modelOrder, e *event) outcome {
	no, amount, currency := e.paymentNo(), e.paidAmount(), currencyOf(e)
	m.cell("payment success", o.Status)
	if o.PaymentNo == no {
		switch {
		case currency != o.Currency:
			return exception(o, no, "currency_mismatch", amount, currency, fmt.Sprintf("payment in %s, order in %s", currency, o.Currency))
		case amount != o.Amount:
			return exception(o, no, "amount_mismatch", amount, currency, fmt.Sprintf("payment %d, order %s", amount, minor(o.Amount, o.Currency)))
		}
		return noEffect("payment %s already applied", no)
	}
	if p := o.payments[no]; p != nil && p.Status == "SUCCEEDED" && !p.Paying {
		return noEffect("payment %s was reported before: it did not pay the order", no)
	}
	var out outcome
	switch {
	case currency != o.Currency:
		out = exception(o, no, "currency_mismatch", amount, currency, fmt.Sprintf("payment in %s, order in %s", currency, o.Currency))
	case o.Status == "CLOSED":
		out = exception(o, no, "paid_after_close", amount, currency, "the order is CLOSED")
	case o.Status == "PAID" || o.Status == "PARTIALLY_REFUNDED" || o.Status == "REFUNDED":
		out = exception(o, no, "paid_by_another", amount, currency, "order already paid by payment "+o.PaymentNo)
	case amount != o.Amount:
		out = exception(o, no, "amount_mismatch", amount, currency, fmt.Sprintf("payment %d, order %s", amount, minor(o.Amount, o.Currency)))
	default:
		o.Status, o.PaymentNo, o.PaidAt = "PAID", no, e.PaidAt.UTC().Format(time.RFC3339)
		if e.Source == "shopify" {
			o.PaidAt = "received" // Shopify's order says no payment time
		}
		m.record(o, no, "SUCCEEDED", true)
		return outcome{Status: "SUCCESS", Messages: []string{
			message("warehouse.ship", map[string]any{"orderCode": o.Code}),
			message("points.add", map[string]any{"orderCode": o.Code, "userId": o.User, "amount": o.Amount, "currency": o.Currency}),
		}}
	}
	m.record(o, no, "SUCCEEDED", false)
	return out
}

// paymentFailure: the table's second row.
func (m *model) paymentFailure(o *modelOrder, e *event) outcome {
	no := e.paymentNo()
	m.cell("payment failure", o.Status)
	switch {
	case o.Status == "UNPAID":
		o.Status = "FAILED"
		m.record(o, no, "FAILED", false)
		return outcome{Status: "SUCCESS"}
	case o.Status == "FAILED":
		return noEffect("order already marked FAILED")
	case o.Status == "CLOSED":
		return noEffect("the order is CLOSED")
	case o.PaymentNo == no:
		return exception(o, no, "reversal_of_paying_payment", o.Amount, o.Currency, fmt.Sprintf("payment %s, which paid the order, is reported failed", no))
	}
	return noEffect("failed attempt of payment %s, which did not pay the order", no)
}

// otherPayment: before the table, 3.
func (m *model) otherPayment(o *modelOrder, e *event) outcome {
	no, pay := e.id(), e.paymentNo()
	if e.Type == "refund" {
		if o.refunds[no] != nil {
			return noEffect("refund %s already recorded (payment %s, which did not pay the order)", no, pay)
		}
		status := map[string]string{"SUCCESS": "SUCCEEDED", "FAILED": "FAILED", "REVERSED": "REVERSED"}[e.Status]
		o.refunds[no] = &modelRefund{Status: status, Amount: e.Amount, Payment: pay}
		return noEffect("refund %s is of payment %s, which did not pay the order: the order is unchanged", no, pay)
	}
	if o.disputes[no] != nil {
		return noEffect("dispute %s already recorded (payment %s, which did not pay the order)", no, pay)
	}
	o.disputes[no] = &modelDispute{Status: e.Status, Amount: e.Amount, Payment: pay}
	return noEffect("dispute %s is of payment %s, which did not pay the order: the order is unchanged", no, pay)
}

func paid(o *modelOrder) bool {
	return o.Status == "PAID" || o.Status == "PARTIALLY_REFUNDED" || o.Status == "REFUNDED"
}

// pool is what running totals without a refund number counted that no
// refund counted one by one has been matched against yet.
func pool(o *modelOrder) int64 {
	var u int64
	for no, r := range o.refunds {
		if strings.HasPrefix(no, "total:") {
			u += r.Counted
		} else {
			u -= r.Matched
		}
	}
	return max(0, u)
}

// refund: the refund rows of the table, and "once".
func (m *model) refund(o *modelOrder, e *event) (outcome, string, bool) {
	no := e.id()
	r := o.refunds[no]
	switch e.Status {
	case "SUCCESS":
		m.cell("refund succeeded", o.Status)
		if r != nil {
			if r.Status == "SUCCEEDED" && e.Amount == 0 {
				// A running total again: it counts what it adds.
				return m.count(o, e, no), "", false
			}
			if r.Status == "SUCCEEDED" {
				return noEffect("refund %s already counted", no), "", false
			}
			return noEffect("refund %s already %s", no, r.Status), "", false
		}
		if c := currencyOf(e); c != o.Currency {
			pay := payingOr(o, e)
			return exception(o, pay, "currency_mismatch", e.Amount, c, fmt.Sprintf("refund in %s, order in %s", c, o.Currency)), "", false
		}
		if !paid(o) {
			return outcome{}, fmt.Sprintf("refund before its payment: order %s is %s", o.Code, o.Status), true
		}
		return m.count(o, e, no), "", false
	case "FAILED", "REVERSED":
		if e.Status == "FAILED" {
			m.cell("refund failed", o.Status)
		} else {
			m.cell("refund reversed", o.Status)
		}
		if r == nil {
			if e.Status == "REVERSED" {
				return outcome{}, fmt.Sprintf("refund reversal before its refund: refund %s is not recorded", no), true
			}
			// Never seen: it takes back what running totals counted and
			// no refund was matched against.
			back := min(e.Amount, pool(o), o.Refunded)
			o.refunds[no] = &modelRefund{Status: "FAILED", Amount: e.Amount, Matched: back, Payment: e.paymentNo()}
			out := outcome{Status: "SUCCESS", Messages: []string{refundFailedMsg(o, no, e.Amount, e.Reason)}}
			if back > 0 {
				uncount(o, back)
				out.Messages = append(out.Messages, message("points.add", map[string]any{"orderCode": o.Code, "userId": o.User, "amount": back, "currency": o.Currency}))
			}
			return out, "", false
		}
		if r.Status != "SUCCEEDED" {
			return noEffect("refund %s already %s", no, r.Status), "", false
		}
		reason := e.Reason
		if reason == "" && e.Status == "REVERSED" {
			reason = "refund reversed"
		}
		back := min(r.Counted+r.Matched, o.Refunded)
		uncount(o, back)
		r.Status = map[string]string{"FAILED": "FAILED", "REVERSED": "REVERSED"}[e.Status]
		out := outcome{Status: "SUCCESS", Messages: []string{refundFailedMsg(o, no, r.Amount, reason)}}
		if back > 0 {
			out.Messages = append(out.Messages, message("points.add", map[string]any{"orderCode": o.Code, "userId": o.User, "amount": back, "currency": o.Currency}))
		}
		return out, "", false
	}
	panic("refund status " + e.Status)
}

// payingOr is the payment an exception names: the event's, else the one
// that paid the order.
func payingOr(o *modelOrder, e *event) string {
	if p := e.paymentNo(); p != "" {
		return p
	}
	return o.PaymentNo
}

// uncount: "counted before: uncounted" of the refund failed row.
func uncount(o *modelOrder, back int64) {
	if back <= 0 {
		return
	}
	o.Refunded -= back
	if o.Status == "PARTIALLY_REFUNDED" || o.Status == "REFUNDED" {
		o.Status = "PARTIALLY_REFUNDED"
		if o.Refunded == 0 {
			o.Status = "PAID"
		}
	}
}

// ofPaying: a row of the paying payment, or of none named.
func ofPaying(o *modelOrder, payment string) bool {
	return payment == "" || o.PaymentNo == "" || payment == o.PaymentNo
}

// lostTook is what the order's LOST disputes other than except took.
func lostTook(o *modelOrder, except string) (took int64, n int) {
	for id, d := range o.disputes {
		if id != except && d.Status == "LOST" && ofPaying(o, d.Payment) {
			took += d.Counted
			n++
		}
	}
	return took, n
}

// given: "the most the platform's total can have shown": the highest
// total recorded, or the refunds recorded one by one (succeeded: their
// figure; failed or reversed: what they had counted or matched).
func given(o *modelOrder) int64 {
	var highest, sum int64
	for no, r := range o.refunds {
		if t, ok := strings.CutPrefix(no, "total:"); ok {
			v, _ := strconv.ParseInt(t, 10, 64)
			highest = max(highest, v)
			continue
		}
		if !ofPaying(o, r.Payment) {
			continue
		}
		if r.Status == "SUCCEEDED" {
			sum += r.Amount
		} else {
			sum += r.Counted + r.Matched
		}
	}
	return max(highest, sum)
}

func refundFailedMsg(o *modelOrder, no string, amount int64, reason string) string {
	return message("order.refund_failed", map[string]any{"orderCode": o.Code, "refundNo": no, "amount": amount, "currency": o.Currency, "reason": reason})
}

// count: "refund succeeded" on a paid order.
func (m *model) count(o *modelOrder, e *event, no string) outcome {
	var figure, matched int64
	if e.Amount > 0 {
		figure = e.Amount
		if e.RefundNo != "" {
			matched = min(figure, pool(o))
		}
	} else {
		figure = e.Total - max(o.Refunded, given(o))
		if figure <= 0 {
			return noEffect("refund %s: the running total %d is already counted", no, e.Total)
		}
	}
	figure -= matched
	took, _ := lostTook(o, "")
	available := max(0, o.Amount-o.Refunded-took)
	counted := min(figure, available)
	excess := figure - counted
	if row := o.refunds[no]; row != nil {
		row.Amount += figure
		row.Counted += counted
	} else {
		o.refunds[no] = &modelRefund{Status: "SUCCEEDED", Amount: figure + matched, Matched: matched, Counted: counted, Payment: e.paymentNo()}
	}
	out := outcome{Status: "SUCCESS"}
	if counted > 0 {
		was := o.Status
		o.Refunded += counted
		o.Status = "PARTIALLY_REFUNDED"
		if o.Refunded >= o.Amount {
			o.Status = "REFUNDED"
		}
		out.Messages = append(out.Messages,
			message("order.refunded", map[string]any{"orderCode": o.Code, "refundNo": no, "amount": counted, "currency": o.Currency,
				"refundedTotal": o.Refunded, "full": o.Refunded >= o.Amount}),
			message("points.deduct", map[string]any{"orderCode": o.Code, "userId": o.User, "amount": counted, "currency": o.Currency}))
		if o.Status == "REFUNDED" && was != "REFUNDED" {
			out.Messages = append(out.Messages, message("warehouse.cancel", map[string]any{"orderCode": o.Code}))
		}
	}
	if excess > 0 {
		pay := payingOr(o, e)
		ex := exception(o, pay, "over_refund", excess, o.Currency, fmt.Sprintf("refund %s exceeds what remained by %s", no, minor(excess, o.Currency)))
		out.Messages = append(out.Messages, ex.Messages...)
		out.Note = ex.Note
	}
	if counted == 0 && excess == 0 {
		out.Note = fmt.Sprintf("refund %s already counted by a running total", no)
	}
	return out
}

// close: the table's close row.
func (m *model) close(o *modelOrder, e *event) outcome {
	m.cell("close", o.Status)
	closed := message("order.closed", map[string]any{"orderCode": o.Code, "reason": closeReason(e)})
	switch o.Status {
	case "UNPAID", "FAILED":
		o.Status = "CLOSED"
		return outcome{Status: "SUCCESS", Messages: []string{closed}}
	case "CLOSED":
		return noEffect("order already CLOSED")
	}
	return outcome{Status: "SUCCESS", Note: fmt.Sprintf("order is %s: a closure moves no money (refunds do)", o.Status), Messages: []string{closed}}
}

// dispute: the dispute rows of the table, and "once".
func (m *model) dispute(o *modelOrder, e *event) (outcome, string, bool) {
	id := e.id()
	m.cell("dispute "+e.Status, o.Status)
	d := o.disputes[id]
	if d != nil {
		if d.Status == e.Status {
			return noEffect("dispute %s already %s", id, d.Status), "", false
		}
		if e.Status == "OPEN" {
			return noEffect("dispute %s is already %s: it does not open again", id, d.Status), "", false
		}
	}
	if c := currencyOf(e); c != o.Currency {
		pay := payingOr(o, e)
		return exception(o, pay, "currency_mismatch", e.Amount, c, fmt.Sprintf("dispute in %s, order in %s", c, o.Currency)), "", false
	}
	if !paid(o) {
		return outcome{}, fmt.Sprintf("dispute before its payment: order %s is %s", o.Code, o.Status), true
	}
	was, took := "", int64(0)
	if d == nil {
		d = &modelDispute{Payment: e.paymentNo()}
		o.disputes[id] = d
	} else {
		was, took = d.Status, d.Counted
	}
	d.Status, d.Amount, d.Counted = e.Status, e.Amount, 0
	o.Dispute = e.Status
	out := outcome{Status: "SUCCESS", Messages: []string{message("order.dispute",
		map[string]any{"orderCode": o.Code, "disputeId": id, "status": e.Status, "amount": e.Amount, "currency": o.Currency})}}
	switch {
	case e.Status == "LOST":
		others, otherLost := lostTook(o, id)
		d.Counted = min(e.Amount, max(0, o.Amount-o.Refunded-others))
		if d.Counted > 0 {
			out.Messages = append(out.Messages,
				message("points.deduct", map[string]any{"orderCode": o.Code, "userId": o.User, "amount": d.Counted, "currency": o.Currency}))
		}
		if o.Status != "REFUNDED" && otherLost == 0 {
			out.Messages = append(out.Messages, message("warehouse.cancel", map[string]any{"orderCode": o.Code}))
		}
		if excess := e.Amount - d.Counted; excess > 0 {
			pay := payingOr(o, e)
			ex := exception(o, pay, "over_refund", excess, o.Currency,
				fmt.Sprintf("dispute %s lost for %s more than remained to refund", id, minor(excess, o.Currency)))
			out.Messages = append(out.Messages, ex.Messages...)
			out.Note = ex.Note
		}
	case e.Status == "WON" && was == "LOST" && took > 0:
		out.Messages = append(out.Messages, message("points.add", map[string]any{"orderCode": o.Code, "userId": o.User, "amount": took, "currency": o.Currency}))
	}
	return out, "", false
}

// kuaidiStatus is Kuaidi100's state as a carrier status.
func kuaidiStatus(state int) string {
	switch state {
	case 1:
		return "PICKED_UP"
	case 0, 8:
		return "IN_TRANSIT"
	case 5:
		return "OUT_FOR_DELIVERY"
	case 3:
		return "DELIVERED"
	}
	return "EXCEPTION"
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
	if status == "DELIVERED" && code != "" {
		out.Messages = append(out.Messages, message("order.delivered", map[string]any{"orderCode": code, "waybillNo": c.Waybill}))
	}
	return out
}

// tableCells are the cells of the rule table (event x order state) and
// the "before the table" rules, as the model names them: the default
// sequence must reach every one.
func tableCells() []string {
	var out []string
	for _, ev := range []string{"payment success", "payment failure", "refund succeeded", "refund failed", "refund reversed", "close",
		"dispute OPEN", "dispute WON", "dispute LOST"} {
		for _, st := range []string{"UNPAID/FAILED", "PAID/PARTIALLY_REFUNDED", "REFUNDED", "CLOSED"} {
			out = append(out, ev+" | "+st)
		}
	}
	return append(out, "refund of another payment | PAID/PARTIALLY_REFUNDED", "dispute of another payment | PAID/PARTIALLY_REFUNDED")
}

// missingCells lists the table's cells the sequence did not reach.
func (m *model) missingCells() []string {
	var out []string
	for _, c := range tableCells() {
		if m.cells[c] == 0 {
			out = append(out, c)
		}
	}
	return out
}

// cellCounts is the count of each cell reached, for the log.
func (m *model) cellCounts() string {
	var b strings.Builder
	for _, c := range slices.Sorted(maps.Keys(m.cells)) {
		fmt.Fprintf(&b, "%s: %d\n", c, m.cells[c])
	}
	return b.String()
}
