package payment

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"callgate/internal/callback"
)

// The one place that decides what an event does to its order: decide,
// called for every event of a batch in id order, and so for a callback
// alone (a batch of one). It implements docs/guarantees.md's rule table
// ("A payment's life: the rule table"); test/differential's reference model
// is written from that table.

// Payment statuses of orders.payment_status.
const (
	OrderUnpaid = "UNPAID"
	// OrderPaymentFailed: the platform reported a failed payment for an
	// unpaid order; a later successful payment still pays it.
	OrderPaymentFailed     = "FAILED"
	OrderPaid              = "PAID"
	OrderPartiallyRefunded = "PARTIALLY_REFUNDED"
	OrderRefunded          = "REFUNDED"
	// OrderClosed: closed by the platform without a payment.
	OrderClosed = "CLOSED"
)

// Errors operators see in last_error; each is counted by its code in
// callgate_callback_failed_reasons_total when the callback ends FAILED.
var (
	ErrOrderNotFound = callback.NewReason("order_not_found", "order not found")
	ErrNoCurrency    = callback.NewReason("no_currency", "no currency")
	ErrAmbiguous     = callback.NewReason("ambiguous_payment", "payment recorded for several orders")
	// The events that came before what they are about: they wait (see
	// callback.NotYet) and end FAILED with this reason only when their
	// budget is spent.
	ErrRefundBeforePayment  = callback.NewReason("refund_before_payment", "refund before its payment")
	ErrDisputeBeforePayment = callback.NewReason("dispute_before_payment", "dispute before its payment")
	ErrReversalBeforeRefund = callback.NewReason("reversal_before_refund", "refund reversal before its refund")
)

// outcome is what one event did: the notifications it writes, and a note
// for its attempt (why nothing changed, or the exception it reported).
type outcome struct {
	msgs    []callback.Message
	note    string
	changed bool // a row was written
}

// result is the handler's answer for an outcome: nil, a NoEffect when
// nothing was written, or a Noted success.
func (o outcome) result() error {
	switch {
	case o.note == "":
		return nil
	case !o.changed && len(o.msgs) == 0:
		return callback.NoEffect(o.note)
	}
	return callback.Noted(o.note)
}

// noEffect is an outcome that changes nothing.
func noEffect(format string, args ...any) outcome { return outcome{note: fmt.Sprintf(format, args...)} }

// exception is an outcome that reports money for a person: payment.exception
// of kind, with a note.
func exception(o *Order, paymentNo, kind string, amount int64, currency, detail string) outcome {
	return outcome{msgs: []callback.Message{exceptionMsg(o, paymentNo, kind, amount, currency)},
		note: "exception " + kind + ": " + detail}
}

// decide applies event p of callback cb to the book and says what it did,
// or why it cannot be applied (a permanent failure, or a callback.NotYet
// that waits).
func (h Handler) decide(b *book, p *Payload, cb *callback.Log) (outcome, error) {
	o, err := h.orderOf(b, p, cb)
	if err != nil {
		return outcome{}, err
	}
	currency := ""
	if movesMoney(p) || p.Currency != "" {
		if currency, err = h.currencyOf(p, cb); err != nil {
			return outcome{}, err
		}
	}
	switch p.Type {
	case callback.TypePayment:
		if p.Status == callback.PaymentSuccess {
			return h.paymentSuccess(b, o, p, cb, currency), nil
		}
		return h.paymentFailure(b, o, p, cb, currency), nil
	case callback.TypeRefund:
		return h.refund(b, o, p, cb, currency)
	case callback.TypeClose:
		return closeOrder(b, o, p), nil
	case callback.TypeDispute:
		return h.dispute(b, o, p, cb, currency)
	}
	return outcome{}, callback.Permanentf("invalid payload: type %q", p.Type)
}

// orderOf finds p's order: by its code, or by the payment it names. None
// waits until worker.order_grace after the callback was received.
func (h Handler) orderOf(b *book, p *Payload, cb *callback.Log) (*Order, error) {
	code := p.OrderCode
	if code == "" {
		switch codes := b.byPayment[p.PaymentNo]; len(codes) {
		case 0:
			return nil, h.notFound(cb, fmt.Errorf("%w: no payment %s recorded", ErrOrderNotFound, p.PaymentNo))
		case 1:
			code = codes[0]
		default:
			return nil, callback.Permanent(fmt.Errorf("%w: %s for %s", ErrAmbiguous, p.PaymentNo, strings.Join(codes, ", ")))
		}
	}
	o := b.orders[code]
	if o == nil {
		return nil, h.notFound(cb, ErrOrderNotFound)
	}
	return o, nil
}

// notFound is err while the order may still come (the notification raced
// the shop's own commit), and FAILED for good after the grace.
func (h Handler) notFound(cb *callback.Log, err error) error {
	if h.now().Sub(cb.ReceivedAt) < h.OrderGrace {
		return callback.NotYet(err)
	}
	return callback.Permanent(err)
}

// currencyOf is p's currency: its own, else its source's payment_currency.
func (h Handler) currencyOf(p *Payload, cb *callback.Log) (string, error) {
	c := p.Currency
	if c == "" {
		c = h.Currencies[cb.Source]
	}
	if c == "" {
		return "", callback.Permanent(fmt.Errorf("%w: the event names none and source %s sets no payment_currency", ErrNoCurrency, cb.Source))
	}
	code, err := callback.Currency(c)
	if err != nil {
		return "", callback.Permanent(fmt.Errorf("invalid payload: %w", err))
	}
	return code, nil
}

func (h Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// stamp is the time rows are written with.
func stamp() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// recordPayment records payment p of o as the platform reported it.
func recordPayment(b *book, o *Order, p *Payload, cb *callback.Log, status string, paying bool, currency string) {
	if currency == "" {
		currency = o.Currency
	}
	now := stamp()
	b.putPayment(&Payment{OrderCode: o.OrderCode, PaymentNo: p.PaymentNo, Source: cb.Source, Status: status, Paying: paying,
		Amount: p.Amount, Currency: currency, CallbackLogID: cb.ID, LastLogID: cb.ID, CreatedAt: now, UpdatedAt: now})
}

func minor(amount int64, currency string) string {
	return strconv.FormatInt(amount, 10) + " (" + currency + " minor units)"
}

// paymentSuccess: the table's first two rows.
func (h Handler) paymentSuccess(b *book, o *Order, p *Payload, cb *callback.Log, currency string) outcome {
	no := p.PaymentNo
	if o.paidBy(no) {
		if currency == o.Currency && p.Amount == o.Amount {
			return noEffect("payment %s already applied", no)
		}
		if currency != o.Currency {
			return exception(o, no, ExceptionCurrencyMismatch, p.Amount, currency, fmt.Sprintf("payment in %s, order in %s", currency, o.Currency))
		}
		return exception(o, no, ExceptionAmountMismatch, p.Amount, currency,
			fmt.Sprintf("payment %d, order %s", p.Amount, minor(o.Amount, o.Currency)))
	}
	if rec := b.payment(o.OrderCode, no); rec != nil && rec.Status == PaymentSucceeded && !rec.Paying {
		return noEffect("payment %s was reported before: it did not pay the order", no)
	}
	var out outcome
	switch {
	case currency != o.Currency:
		out = exception(o, no, ExceptionCurrencyMismatch, p.Amount, currency, fmt.Sprintf("payment in %s, order in %s", currency, o.Currency))
	case o.PaymentStatus == OrderClosed:
		out = exception(o, no, ExceptionPaidAfterClose, p.Amount, currency, "the order is CLOSED")
	case o.paid():
		out = exception(o, no, ExceptionPaidByAnother, p.Amount, currency, "order already paid by payment "+*o.PaymentNo)
	case p.Amount != o.Amount:
		out = exception(o, no, ExceptionAmountMismatch, p.Amount, currency,
			fmt.Sprintf("payment %d, order %s", p.Amount, minor(o.Amount, o.Currency)))
	default:
		paidAt := cb.ReceivedAt
		if p.PaidAt != nil && !p.PaidAt.IsZero() {
			paidAt = *p.PaidAt
		}
		paidAt = paidAt.UTC()
		o.PaymentStatus, o.PaymentNo, o.PaidAt = OrderPaid, &no, &paidAt
		b.orderChanged(o)
		recordPayment(b, o, p, cb, PaymentSucceeded, true, currency)
		return outcome{changed: true, msgs: []callback.Message{shipMsg(o), pointsMsg(RoutingPointsAdd, o, o.Amount)}}
	}
	recordPayment(b, o, p, cb, PaymentSucceeded, false, currency)
	out.changed = true
	return out
}

// paymentFailure: the table's third row.
func (h Handler) paymentFailure(b *book, o *Order, p *Payload, cb *callback.Log, currency string) outcome {
	no := p.PaymentNo
	switch {
	case o.PaymentStatus == OrderUnpaid:
		o.PaymentStatus = OrderPaymentFailed
		b.orderChanged(o)
		recordPayment(b, o, p, cb, PaymentFailed, false, currency)
		return outcome{changed: true}
	case o.PaymentStatus == OrderPaymentFailed:
		return noEffect("order already marked FAILED")
	case o.PaymentStatus == OrderClosed:
		return noEffect("the order is CLOSED")
	case o.paidBy(no):
		return exception(o, no, ExceptionReversalOfPayingPayment, o.Amount, o.Currency,
			fmt.Sprintf("payment %s, which paid the order, is reported failed", no))
	}
	return noEffect("failed attempt of payment %s, which did not pay the order", no)
}

// otherPayment reports a refund or dispute about another payment than the
// one that paid o: the refund of a double payment, or of a payment
// recorded that did not pay it (its amount or currency was wrong).
func otherPayment(b *book, o *Order, p *Payload) bool {
	if p.PaymentNo == "" || o.paidBy(p.PaymentNo) {
		return false
	}
	return o.PaymentNo != nil || b.payment(o.OrderCode, p.PaymentNo) != nil
}

// ofPaying reports whether a refunds or disputes row is about the payment
// that paid o (or names none).
func ofPaying(o *Order, paymentNo *string) bool {
	return paymentNo == nil || o.PaymentNo == nil || *paymentNo == *o.PaymentNo
}

// lostCounted is what o's LOST disputes other than except took.
func lostCounted(b *book, o *Order, except string) (took int64, lost int) {
	for id, d := range b.disputes[o.OrderCode] {
		if id != except && d.Status == callback.DisputeLost && ofPaying(o, d.PaymentNo) {
			took += d.Counted
			lost++
		}
	}
	return took, lost
}

// available is what a refund may still count: what remains, less what
// lost disputes took.
func available(b *book, o *Order) int64 {
	took, _ := lostCounted(b, o, "")
	return max(0, o.remaining()-took)
}

// given is the most the platform's own running total can have been
// shown: the highest total recorded, or what the refunds recorded one by
// one came to (a succeeded one's figure, a failed or reversed one's what
// it had counted), so that a stale total, sent before a refund failed,
// does not count again what the failure took back.
func given(b *book, o *Order) int64 {
	var highest, sum int64
	for no, r := range b.refunds[o.OrderCode] {
		if t, ok := strings.CutPrefix(no, totalPrefix); ok {
			if v, err := strconv.ParseInt(t, 10, 64); err == nil {
				highest = max(highest, v)
			}
			continue
		}
		if !ofPaying(o, r.PaymentNo) {
			continue
		}
		if r.Status == RefundSucceeded {
			sum += r.Amount
		} else {
			sum += r.Counted + r.Matched
		}
	}
	return max(highest, sum)
}

// uncount gives back what a failed or reversed refund had counted.
func uncount(b *book, o *Order, back int64) {
	if back <= 0 {
		return
	}
	o.RefundedAmount -= back
	if o.PaymentStatus == OrderPartiallyRefunded || o.PaymentStatus == OrderRefunded {
		o.PaymentStatus = OrderPartiallyRefunded
		if o.RefundedAmount == 0 {
			o.PaymentStatus = OrderPaid
		}
	}
	b.orderChanged(o)
}

// pool is what running totals without a refund number counted that no
// refund counted one by one has been matched against yet.
func pool(b *book, o *Order) int64 {
	var u int64
	for no, r := range b.refunds[o.OrderCode] {
		if strings.HasPrefix(no, totalPrefix) {
			u += r.Counted
		} else {
			u -= r.Matched
		}
	}
	return max(0, u)
}

// totalPrefix names the refund row of a running total without a refund
// number: "total:<figure>".
const totalPrefix = "total:"

// refund: the refund rows of the table.
func (h Handler) refund(b *book, o *Order, p *Payload, cb *callback.Log, currency string) (outcome, error) {
	no := p.RefundNo
	if no == "" {
		no = totalPrefix + strconv.FormatInt(*p.RefundedTotal, 10)
	}
	if currency == "" {
		currency = o.Currency
	}
	now := stamp()
	newRow := func(status string, amount int64) *Refund {
		r := &Refund{OrderCode: o.OrderCode, RefundNo: no, Source: cb.Source, Status: status, Amount: amount, Currency: currency,
			CallbackLogID: cb.ID, LastLogID: cb.ID, CreatedAt: now, UpdatedAt: now}
		if p.PaymentNo != "" {
			pn := p.PaymentNo
			r.PaymentNo = &pn
		}
		if p.Reason != "" {
			reason := callback.Truncate(p.Reason, 255)
			r.Reason = &reason
		}
		return r
	}
	r := b.refund(o.OrderCode, no)
	if otherPayment(b, o, p) {
		if r != nil {
			return noEffect("refund %s already recorded (payment %s, which did not pay the order)", no, p.PaymentNo), nil
		}
		b.putRefund(newRow(refundRowStatus(p.Status), p.Amount))
		return outcome{changed: true, note: fmt.Sprintf("refund %s is of payment %s, which did not pay the order: the order is unchanged", no, p.PaymentNo)}, nil
	}
	switch p.Status {
	case callback.RefundSuccess:
		if r != nil {
			if r.Status == RefundSucceeded && p.Amount == 0 && p.RefundedTotal != nil {
				// A running total again under a refund already counted:
				// what it adds is more money given back.
				return h.countRefund(b, o, p, no, r, cb.ID, newRow), nil
			}
			if r.Status == RefundSucceeded {
				return noEffect("refund %s already counted", no), nil
			}
			return noEffect("refund %s already %s", no, r.Status), nil
		}
		if currency != o.Currency {
			return exception(o, payingOr(o, p), ExceptionCurrencyMismatch, p.Amount, currency, fmt.Sprintf("refund in %s, order in %s", currency, o.Currency)), nil
		}
		if !o.paid() {
			return outcome{}, callback.NotYet(fmt.Errorf("%w: order %s is %s", ErrRefundBeforePayment, o.OrderCode, o.PaymentStatus))
		}
		return h.countRefund(b, o, p, no, nil, cb.ID, newRow), nil
	default: // FAILED, REVERSED
		if r == nil {
			if p.Status == callback.RefundReversed {
				return outcome{}, callback.NotYet(fmt.Errorf("%w: refund %s is not recorded", ErrReversalBeforeRefund, no))
			}
			// Never seen one by one: a running total may have counted it
			// (Stripe's amount_refunded includes a pending refund); the
			// failure takes back what such totals counted unmatched.
			back := min(p.Amount, pool(b, o), o.RefundedAmount)
			row := newRow(RefundFailed, p.Amount)
			row.Matched = max(0, back)
			b.putRefund(row)
			uncount(b, o, back)
			out := outcome{changed: true, msgs: []callback.Message{refundFailedMsg(o, no, p.Amount, p.Reason)}}
			if back > 0 {
				out.msgs = append(out.msgs, pointsMsg(RoutingPointsAdd, o, back))
			}
			return out, nil
		}
		if r.Status != RefundSucceeded {
			return noEffect("refund %s already %s", no, r.Status), nil
		}
		reason := p.Reason
		if reason == "" && p.Status == callback.RefundReversed {
			reason = "refund reversed"
		}
		back := min(r.Counted+r.Matched, o.RefundedAmount)
		uncount(b, o, back)
		r.Status, r.LastLogID, r.UpdatedAt = refundRowStatus(p.Status), cb.ID, now
		if reason != "" {
			rr := callback.Truncate(reason, 255)
			r.Reason = &rr
		}
		b.putRefund(r)
		out := outcome{changed: true, msgs: []callback.Message{refundFailedMsg(o, no, r.Amount, reason)}}
		if back > 0 {
			out.msgs = append(out.msgs, pointsMsg(RoutingPointsAdd, o, back))
		}
		return out, nil
	}
}

// countRefund counts a refund that succeeded on a paid order: its own
// amount (less what running totals counted already) or what its running
// total adds, up to what remains. r is the refund's row when a running
// total comes again under a refund already counted (nil: a new refund).
func (h Handler) countRefund(b *book, o *Order, p *Payload, no string, r *Refund, logID int64, newRow func(string, int64) *Refund) outcome {
	var figure, matched int64
	switch {
	case p.Amount > 0:
		figure = p.Amount
		if p.RefundNo != "" {
			matched = min(figure, pool(b, o))
		}
	default: // a running total
		figure = *p.RefundedTotal - max(o.RefundedAmount, given(b, o))
		if figure <= 0 {
			return noEffect("refund %s: the running total %d is already counted", no, *p.RefundedTotal)
		}
	}
	figure -= matched
	counted := min(figure, available(b, o))
	excess := figure - counted
	if r == nil {
		r = newRow(RefundSucceeded, figure+matched)
		r.Counted, r.Matched = counted, matched
	} else {
		r.Amount, r.Counted = r.Amount+figure, r.Counted+counted
		r.LastLogID, r.UpdatedAt = logID, stamp()
	}
	b.putRefund(r)
	out := outcome{changed: true}
	if counted > 0 {
		wasRefunded := o.PaymentStatus == OrderRefunded
		o.RefundedAmount += counted
		o.PaymentStatus = OrderPartiallyRefunded
		if o.remaining() == 0 {
			o.PaymentStatus = OrderRefunded
		}
		b.orderChanged(o)
		out.msgs = append(out.msgs, refundedMsg(o, no, counted), pointsMsg(RoutingPointsDeduct, o, counted))
		if o.PaymentStatus == OrderRefunded && !wasRefunded {
			out.msgs = append(out.msgs, cancelMsg(o))
		}
	}
	if excess > 0 {
		ex := exception(o, payingOr(o, p), ExceptionOverRefund, excess, o.Currency,
			fmt.Sprintf("refund %s exceeds what remained by %s", no, minor(excess, o.Currency)))
		out.msgs, out.note = append(out.msgs, ex.msgs...), ex.note
	}
	if counted == 0 && excess == 0 {
		out.note = fmt.Sprintf("refund %s already counted by a running total", no)
	}
	return out
}

// payingOr is the payment p names, else the one that paid o.
func payingOr(o *Order, p *Payload) string {
	if p.PaymentNo != "" || o.PaymentNo == nil {
		return p.PaymentNo
	}
	return *o.PaymentNo
}

// refundRowStatus is a refund event's status as a refunds row's.
func refundRowStatus(status string) string {
	switch status {
	case callback.RefundFailed:
		return RefundFailed
	case callback.RefundReversed:
		return RefundReversed
	}
	return RefundSucceeded
}

// closeOrder: the table's close row.
func closeOrder(b *book, o *Order, p *Payload) outcome {
	switch o.PaymentStatus {
	case OrderUnpaid, OrderPaymentFailed:
		o.PaymentStatus = OrderClosed
		b.orderChanged(o)
		return outcome{changed: true, msgs: []callback.Message{closedMsg(o, p.Reason)}}
	case OrderClosed:
		return noEffect("order already CLOSED")
	}
	return outcome{msgs: []callback.Message{closedMsg(o, p.Reason)},
		note: fmt.Sprintf("order is %s: a closure moves no money (refunds do)", o.PaymentStatus)}
}

// dispute: the dispute rows of the table.
func (h Handler) dispute(b *book, o *Order, p *Payload, cb *callback.Log, currency string) (outcome, error) {
	now := stamp()
	d := b.dispute(o.OrderCode, p.DisputeID)
	if otherPayment(b, o, p) {
		if d != nil {
			return noEffect("dispute %s already recorded (payment %s, which did not pay the order)", p.DisputeID, p.PaymentNo), nil
		}
		pn := p.PaymentNo
		b.putDispute(&Dispute{OrderCode: o.OrderCode, DisputeID: p.DisputeID, PaymentNo: &pn, Source: cb.Source, Status: p.Status,
			Amount: p.Amount, Currency: currency, CallbackLogID: cb.ID, LastLogID: cb.ID, CreatedAt: now, UpdatedAt: now})
		return outcome{changed: true, note: fmt.Sprintf("dispute %s is of payment %s, which did not pay the order: the order is unchanged", p.DisputeID, p.PaymentNo)}, nil
	}
	switch {
	case d == nil:
	case d.Status == p.Status:
		return noEffect("dispute %s already %s", d.DisputeID, d.Status), nil
	case p.Status == callback.DisputeOpen:
		return noEffect("dispute %s is already %s: it does not open again", d.DisputeID, d.Status), nil
	}
	if currency != o.Currency {
		return exception(o, payingOr(o, p), ExceptionCurrencyMismatch, p.Amount, currency, fmt.Sprintf("dispute in %s, order in %s", currency, o.Currency)), nil
	}
	if !o.paid() {
		return outcome{}, callback.NotYet(fmt.Errorf("%w: order %s is %s", ErrDisputeBeforePayment, o.OrderCode, o.PaymentStatus))
	}
	was := ""
	var took int64 // what the dispute took when it was LOST before
	if d == nil {
		d = &Dispute{OrderCode: o.OrderCode, DisputeID: p.DisputeID, Source: cb.Source, CallbackLogID: cb.ID, Currency: currency, CreatedAt: now}
		if p.PaymentNo != "" {
			pn := p.PaymentNo
			d.PaymentNo = &pn
		}
	} else {
		was, took = d.Status, d.Counted
	}
	d.Status, d.Amount, d.Counted, d.LastLogID, d.UpdatedAt = p.Status, p.Amount, 0, cb.ID, now
	status := p.Status
	o.DisputeStatus = &status
	b.orderChanged(o)
	out := outcome{changed: true, msgs: []callback.Message{disputeMsg(o, d.DisputeID, status, p.Amount)}}
	switch {
	case status == callback.DisputeLost:
		// It takes what remains, less what refunds gave back and other
		// lost disputes took; beyond that the money left twice.
		others, otherLost := lostCounted(b, o, d.DisputeID)
		d.Counted = min(p.Amount, max(0, o.remaining()-others))
		if d.Counted > 0 {
			out.msgs = append(out.msgs, pointsMsg(RoutingPointsDeduct, o, d.Counted))
		}
		if o.PaymentStatus != OrderRefunded && otherLost == 0 {
			out.msgs = append(out.msgs, cancelMsg(o))
		}
		if excess := p.Amount - d.Counted; excess > 0 {
			ex := exception(o, payingOr(o, p), ExceptionOverRefund, excess, o.Currency,
				fmt.Sprintf("dispute %s lost for %s more than remained to refund", d.DisputeID, minor(excess, o.Currency)))
			out.msgs, out.note = append(out.msgs, ex.msgs...), ex.note
		}
	case status == callback.DisputeWon && was == callback.DisputeLost && took > 0:
		out.msgs = append(out.msgs, pointsMsg(RoutingPointsAdd, o, took))
	}
	b.putDispute(d)
	return out, nil
}
