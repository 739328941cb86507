package payment

import (
	"sort"
	"strconv"
	"time"

	"callgate/internal/callback"
)

// The fold: an order's money derived from all of its facts, taken by the
// platform's time (docs/guarantees.md, "The fold"). It is the one place
// that says what an order's money is: this file takes the facts one by
// one, finish.go sets what the state after the last one has, and
// state.go is what it gives. The notifications are the difference
// between two folds (difference.go).

// payState is a payment's facts so far.
type payState struct {
	status  string // latest
	success *Fact  // the first success taken
	paidAt  time.Time
}

// refState is a refund's facts so far.
type refState struct {
	item      Item
	paymentNo string
	succeeded bool // a SUCCEEDED fact gave its amount
	succPos   int  // fold position of its latest SUCCEEDED fact
	statuses  map[string]bool
	firstAt   time.Time
	initiated time.Time
	last      int // fold position of its latest fact
}

// disState is a dispute's facts so far.
type disState struct {
	item      Item
	paymentNo string
	lostAt    int // fold position it became LOST
	last      int
	statuses  map[string]bool
}

// takenTotal is a running total and its fold position.
type takenTotal struct {
	f   *Fact
	pos int
}

// folder is the fold in progress.
type folder struct {
	o        *Order
	payments map[string]*payState
	refunds  map[string]*refState
	disputes map[string]*disState
	totals   []takenTotal // the running totals taken, in fold order
	// payOf is the payment each refund and dispute is about: the first
	// of its facts in fold order (over all of them) that names one.
	payOf map[string]string
	// began holds, by refund number, when each refund began (beganAt).
	began    map[string]*refState
	closedAt int // fold position of the close, -1 none
	failed   bool
	paying   string
	payPos   int
	lastDis  string
	s        State
}

// Derive folds the facts of order o (in any order: it sorts a copy) into
// its money.
func Derive(o *Order, facts []Fact) State {
	sorted := append([]Fact(nil), facts...)
	inFoldOrder(sorted)
	f := &folder{o: o, payments: map[string]*payState{}, refunds: map[string]*refState{}, disputes: map[string]*disState{},
		payOf: map[string]string{}, closedAt: -1}
	f.began = map[string]*refState{}
	for i := range sorted {
		x := &sorted[i]
		if k := x.Kind + "\x00" + x.Ref; (x.Kind == KindRefund || x.Kind == KindDispute) && x.PaymentNo != "" && f.payOf[k] == "" {
			f.payOf[k] = x.PaymentNo
		}
		// When a refund began is read from all of its facts recorded (a
		// running total that names it among them), not only those taken.
		if (x.Kind == KindRefund || x.Kind == KindTotal) && x.Ref != "" {
			b := f.began[x.Ref]
			if b == nil {
				b = &refState{}
				f.began[x.Ref] = b
			}
			if x.Kind == KindTotal {
				b.begin(&Fact{OccurredAt: x.OccurredAt, ReceivedAt: x.ReceivedAt})
			} else {
				b.begin(x)
			}
		}
	}
	f.s.Exceptions = map[string]Exception{}
	f.s.Status = OrderUnpaid
	for i := range sorted {
		f.take(i, &sorted[i])
	}
	f.finish()
	return f.s
}

// begin notes fact x of the refund: it began at its earliest
// initiatedAt, else at the earliest time of its facts (beganAt).
func (r *refState) begin(x *Fact) {
	if t := x.At(); r.firstAt.IsZero() || t.Before(r.firstAt) {
		r.firstAt = t
	}
	if x.InitiatedAt != nil && (r.initiated.IsZero() || x.InitiatedAt.Before(r.initiated)) {
		r.initiated = *x.InitiatedAt
	}
}

// beganAt is when the refund began.
func (r *refState) beganAt() time.Time {
	if !r.initiated.IsZero() {
		return r.initiated
	}
	return r.firstAt
}

func (f *folder) take(i int, x *Fact) {
	switch x.Kind {
	case KindPayment:
		p := f.payments[x.Ref]
		if p == nil {
			p = &payState{}
			f.payments[x.Ref] = p
		}
		p.status = x.Status
		if x.Status == PaymentFailed {
			f.failed = true
			break
		}
		if p.success == nil {
			p.success, p.paidAt = x, x.At()
		}
		if f.paying == "" && x.Currency == f.o.Currency && x.Amount == f.o.Amount {
			f.paying, f.payPos = x.Ref, i
			if f.closedAt >= 0 {
				f.except(Exception{Kind: ExceptionPaidAfterClose, PaymentNo: x.Ref, Amount: x.Amount, Currency: x.Currency,
					Detail: "the order was closed before payment " + x.Ref})
			}
		}
	case KindRefund:
		r := f.refunds[x.Ref]
		if r == nil {
			r = &refState{statuses: map[string]bool{}}
			f.refunds[x.Ref] = r
		}
		if r.statuses == nil {
			r.statuses = map[string]bool{}
		}
		r.paymentNo = f.payOf[KindRefund+"\x00"+x.Ref]
		r.statuses[x.Status] = true
		r.item.Status, r.last = x.Status, i
		if x.Status == RefundSucceeded {
			r.succeeded, r.succPos = true, i
			r.item.Amount, r.item.Currency = x.Amount, x.Currency
		} else if !r.succeeded {
			r.item.Amount, r.item.Currency = x.Amount, x.Currency
		}
		r.item.Reason = x.reason()
	case KindTotal:
		f.totals = append(f.totals, takenTotal{x, i})
	case KindDispute:
		d := f.disputes[x.Ref]
		if d == nil {
			d = &disState{paymentNo: f.payOf[KindDispute+"\x00"+x.Ref], statuses: map[string]bool{}}
			f.disputes[x.Ref] = d
		}
		d.statuses[x.Status] = true
		if x.Status == callback.DisputeLost && d.item.Status != callback.DisputeLost {
			d.lostAt = i
		}
		d.item = Item{Status: x.Status, Amount: x.Amount, Currency: x.Currency}
		d.last = i
		f.lastDis = x.Ref
	case KindClose:
		if f.closedAt < 0 {
			f.closedAt = i
		}
		f.s.Closed = true
	}
	before := f.s.Refunded
	wasCancelled := f.s.Cancelled
	f.derive(i)
	if x.Kind == KindRefund && x.Status != RefundSucceeded && wasCancelled && f.s.Refunded < before {
		f.except(Exception{Kind: ExceptionRefundUndoneAfterCancel, PaymentNo: f.paying, RefundNo: x.Ref, Amount: f.refunds[x.Ref].item.Amount,
			Currency: f.o.Currency, Detail: "refund " + x.Ref + " undone after the order was cancelled at the warehouse"})
	}
}

// ofPaying reports whether a refund or dispute naming payment no is the
// order's: of its paying payment, or naming none.
func (f *folder) ofPaying(no string) bool { return no == "" || no == f.paying }

func totalRef(x *Fact) string {
	if x.Ref != "" {
		return x.Ref
	}
	return "total:" + itoa(x.Amount)
}

// derive sets the money after fact i.
func (f *folder) derive(i int) {
	s, o := &f.s, f.o
	if f.paying == "" {
		s.Refunded, s.Chargeback, s.Left, s.Excess = 0, 0, 0, 0
		switch {
		case s.Closed:
			s.Status = OrderClosed
		case f.failed:
			s.Status = OrderPaymentFailed
		default:
			s.Status = OrderUnpaid
		}
		return
	}
	raw := f.rawRefunded()
	s.Refunded = min(raw, o.Amount)
	// Lost disputes, in the order they were lost, take what refunds and
	// the disputes before them left.
	type lost struct {
		id     string
		amount int64
		at     int
	}
	var lostOnes []lost
	var lostSum int64
	for id, d := range f.disputes {
		if d.item.Status == callback.DisputeLost && f.ofPaying(d.paymentNo) && d.item.Currency == o.Currency {
			lostOnes = append(lostOnes, lost{id, d.item.Amount, d.lostAt})
			lostSum += d.item.Amount
		}
	}
	sort.Slice(lostOnes, func(a, b int) bool {
		if lostOnes[a].at != lostOnes[b].at {
			return lostOnes[a].at < lostOnes[b].at
		}
		return lostOnes[a].id < lostOnes[b].id
	})
	left := o.Amount - s.Refunded
	s.Chargeback = 0
	for _, l := range lostOnes {
		took := min(l.amount, left)
		s.Chargeback += took
		left -= took
	}
	s.Left = left
	s.Excess = max(0, raw+lostSum-o.Amount)
	switch {
	case s.Refunded == 0:
		s.Status = OrderPaid
	case s.Left == 0:
		s.Status = OrderRefunded
	default:
		s.Status = OrderPartiallyRefunded
	}
	s.Shipped = true
	if s.Left == 0 {
		s.Cancelled = true
	}
}

// rawRefunded is what was refunded of the paying payment, not capped.
func (f *folder) rawRefunded() int64 {
	c := f.o.Currency
	counts := func(r *refState) bool { return f.ofPaying(r.paymentNo) && r.item.Currency == c }
	var sum int64
	// L: the latest running total taken that counts.
	var L *Fact
	pos := -1
	for _, t := range f.totals {
		if f.ofPaying(t.f.PaymentNo) && t.f.Currency == c && t.pos > pos {
			L, pos = t.f, t.pos
		}
	}
	if L == nil {
		for _, r := range f.refunds {
			if r.item.Status == RefundSucceeded && counts(r) {
				sum += r.item.Amount
			}
		}
		return sum
	}
	// L's total less what failed since of what it counted, at least 0;
	// plus what began after it, which it could not count.
	at := L.At()
	sum, later := L.Amount, int64(0)
	for id, r := range f.refunds {
		if !counts(r) {
			continue
		}
		began := f.began[id].beganAt()
		switch {
		case (r.item.Status == RefundFailed || r.item.Status == RefundReversed) && r.last > pos && !began.After(at):
			sum -= r.item.Amount
		case r.item.Status == RefundSucceeded && began.After(at):
			later += r.item.Amount
		}
	}
	return max(sum, 0) + later
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
