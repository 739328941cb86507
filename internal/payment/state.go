package payment

import "time"

// Payment statuses of orders.payment_status.
const (
	OrderUnpaid = "UNPAID"
	// OrderPaymentFailed: a payment failure and no payment that paid.
	OrderPaymentFailed     = "FAILED"
	OrderPaid              = "PAID"
	OrderPartiallyRefunded = "PARTIALLY_REFUNDED"
	OrderRefunded          = "REFUNDED"
	// OrderClosed: closed by the platform without a payment.
	OrderClosed = "CLOSED"
)

// State is an order's money as its facts say.
type State struct {
	Status    string
	PaymentNo string // the paying payment ("" none)
	PaidAt    *time.Time
	// Refunded is refunded_amount: what refunds gave back of the paying
	// payment, at most the order's amount.
	Refunded int64
	// Chargeback is what lost disputes took of what refunds left.
	Chargeback int64
	// Left is the order's amount less Refunded and Chargeback (0 unpaid).
	Left int64
	// Excess is what left beyond the order's amount.
	Excess        int64
	DisputeStatus string
	Shipped       bool
	// Cancelled: at some point of the fold the order was paid and nothing
	// was left.
	Cancelled bool
	Closed    bool
	// Refunds and Disputes are the order's own (of its paying payment or
	// naming none), by number.
	Refunds  map[string]Item
	Disputes map[string]Item
	// LastRefund is the refund of the paying payment whose success or
	// running total was taken last ("total:<n>" for a total naming none).
	LastRefund string
	// Exceptions are what needs a person, each once by its key.
	Exceptions map[string]Exception
}

// Points is what the order's points are: its amount once shipped, less
// what was refunded and charged back.
func (s *State) Points(amount int64) int64 {
	if !s.Shipped {
		return 0
	}
	return amount - s.Refunded - s.Chargeback
}

// Item is a refund's or dispute's state.
type Item struct {
	Status   string
	Amount   int64
	Currency string
	Reason   string
}

// Exception is one payment.exception.
type Exception struct {
	Kind      string
	PaymentNo string
	RefundNo  string
	DisputeID string
	Amount    int64
	Currency  string
	// Detail is the note for the attempt.
	Detail string
	// status is, for the other_payment kinds, the refund's or dispute's
	// status: one exception per status; total marks one about a running
	// total (apart from a refund of the same number).
	status string
	total  bool
}

// order of kinds in docs/guarantees.md's table.
var exceptionRank = map[string]int{ExceptionPaidByAnother: 0, ExceptionAmountMismatch: 1, ExceptionCurrencyMismatch: 2,
	ExceptionPaidAfterClose: 3, ExceptionReversalOfPayingPayment: 4, ExceptionOverRefund: 5, ExceptionOtherPaymentRefunded: 6,
	ExceptionOtherPaymentDisputed: 7, ExceptionRefundUndoneAfterCancel: 8, ExceptionCancelledWithMoneyLeft: 9}
