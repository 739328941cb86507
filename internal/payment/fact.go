package payment

import (
	"sort"
	"strconv"
	"time"

	"callgate/internal/callback"
)

// Facts: what a platform reported about an order's money, one row of
// payment_facts each, recorded once by its identity (docs/guarantees.md,
// "Facts"). They are never changed: the order's money is derived from
// them (fold.go).

// Kinds of facts.
const (
	KindPayment = "payment"
	KindRefund  = "refund"
	// KindTotal is a running total: everything refunded of a payment so
	// far (Alipay refund_fee, Stripe amount_refunded).
	KindTotal   = "total"
	KindDispute = "dispute"
	KindClose   = "close"
)

// Statuses of payment and refund facts (a dispute's are the event's:
// OPEN, WON, LOST).
const (
	PaymentSucceeded = "SUCCEEDED"
	PaymentFailed    = "FAILED"
	RefundSucceeded  = "SUCCEEDED"
	RefundFailed     = "FAILED"
	RefundReversed   = "REVERSED"
)

// Fact is one payment_facts row.
type Fact struct {
	OrderCode string `gorm:"column:order_code;primaryKey"`
	Key       string `gorm:"column:fact_key;primaryKey"`
	Kind      string `gorm:"column:kind"`
	// Ref is the platform's number of what the fact is about: the payment
	// number, the refund number, the dispute id; "" for a close and for a
	// running total that names no refund.
	Ref string `gorm:"column:ref"`
	// PaymentNo is the payment a refund, total or dispute is about ("":
	// whichever paid the order); a payment's own number.
	PaymentNo string `gorm:"column:payment_no"`
	Status    string `gorm:"column:status"`
	// Amount in minor units: a running total's is the total.
	Amount      int64      `gorm:"column:amount"`
	Currency    string     `gorm:"column:currency"`
	Reason      *string    `gorm:"column:reason"`
	OccurredAt  *time.Time `gorm:"column:occurred_at"`
	InitiatedAt *time.Time `gorm:"column:initiated_at"`
	Source      string     `gorm:"column:source"`
	// CallbackLogID is the callback that reported it: the arrival order.
	CallbackLogID int64     `gorm:"column:callback_log_id"`
	ReceivedAt    time.Time `gorm:"column:received_at"`
	CreatedAt     time.Time `gorm:"column:created_at"`
}

// TableName tells gorm the table.
func (Fact) TableName() string { return "payment_facts" }

// At is when the fact happened: the platform's time, else when callgate
// received it.
func (f *Fact) At() time.Time {
	if f.OccurredAt != nil {
		return *f.OccurredAt
	}
	return f.ReceivedAt
}

// reason is the fact's reason, or "".
func (f *Fact) reason() string {
	if f.Reason == nil {
		return ""
	}
	return *f.Reason
}

// rank orders the facts of the same time: payment failures, payment
// successes, refunds and totals that succeeded, refund failures and
// reversals, disputes opened, lost, won, closes.
func (f *Fact) rank() int {
	switch f.Kind {
	case KindPayment:
		if f.Status == PaymentFailed {
			return 0
		}
		return 1
	case KindRefund, KindTotal:
		if f.Status == RefundSucceeded {
			return 2
		}
		return 3
	case KindDispute:
		switch f.Status {
		case callback.DisputeOpen:
			return 4
		case callback.DisputeLost:
			return 5
		}
		return 6
	}
	return 7
}

// inFoldOrder sorts facts as the fold takes them: by time, then rank
// (running totals of one time by their total), then the number they are
// about, then arrival (the callback, then the key, for the facts of one
// callback).
func inFoldOrder(facts []Fact) {
	sort.SliceStable(facts, func(i, j int) bool {
		a, b := &facts[i], &facts[j]
		if ta, tb := a.At(), b.At(); !ta.Equal(tb) {
			return ta.Before(tb)
		}
		if ra, rb := a.rank(), b.rank(); ra != rb {
			return ra < rb
		}
		// Running totals only grow: of one time, the smaller came first.
		if a.Kind == KindTotal && b.Kind == KindTotal && a.Amount != b.Amount {
			return a.Amount < b.Amount
		}
		// Then by the number they are about (two payments of one time:
		// the same one pays whatever arrived first).
		if a.Ref != b.Ref {
			return a.Ref < b.Ref
		}
		if a.CallbackLogID != b.CallbackLogID {
			return a.CallbackLogID < b.CallbackLogID
		}
		return a.Key < b.Key
	})
}

// FactOf is the fact event p of callback cb reports for order code, in
// currency (the event's, its source's, or the order's: see Handler).
func FactOf(p *Payload, code, currency string, cb *callback.Log) Fact {
	f := Fact{OrderCode: code, PaymentNo: p.PaymentNo, Amount: p.Amount, Currency: currency, OccurredAt: utc(p.OccurredAt),
		InitiatedAt: utc(p.InitiatedAt), Source: cb.Source, CallbackLogID: cb.ID, ReceivedAt: cb.ReceivedAt.UTC().Truncate(time.Microsecond)}
	reason := p.Reason
	if reason == "" && p.Type == callback.TypeRefund && p.Status == callback.RefundReversed {
		reason = "refund reversed"
	}
	if reason != "" {
		r := callback.Truncate(reason, 255)
		f.Reason = &r
	}
	switch p.Type {
	case callback.TypePayment, "":
		f.Kind, f.Ref = KindPayment, p.PaymentNo
		f.Status = PaymentSucceeded
		if p.Status == callback.PaymentFailed {
			f.Status = PaymentFailed
		}
		if f.OccurredAt == nil {
			f.OccurredAt = utc(p.PaidAt)
		}
		f.Key = "payment/" + f.Ref + "/" + f.Status
	case callback.TypeRefund:
		f.Ref = p.RefundNo
		f.Status = RefundSucceeded
		switch p.Status {
		case callback.RefundFailed:
			f.Status = RefundFailed
		case callback.RefundReversed:
			f.Status = RefundReversed
		}
		if p.RefundedTotal != nil {
			f.Kind, f.Amount = KindTotal, *p.RefundedTotal
			f.Key = "total/" + f.PaymentNo + "/" + f.Ref + "/" + strconv.FormatInt(f.Amount, 10) + "/" + stampOf(f.OccurredAt)
		} else {
			f.Kind = KindRefund
			f.Key = "refund/" + f.Ref + "/" + f.Status
		}
	case callback.TypeDispute:
		f.Kind, f.Ref, f.Status = KindDispute, p.DisputeID, p.Status
		// A dispute may pass a status twice (Adyen: a chargeback LOST,
		// reversed, then lost again in pre-arbitration): each stage is
		// its own fact by its time.
		f.Key = "dispute/" + f.Ref + "/" + f.Status + "/" + stampOf(f.OccurredAt)
	case callback.TypeClose:
		f.Kind, f.Key, f.Amount, f.Currency = KindClose, KindClose, 0, ""
	}
	return f
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC().Truncate(time.Microsecond)
	return &u
}

func stampOf(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("20060102T150405.000000Z")
}
