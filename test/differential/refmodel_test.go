package differential_test

// An independent reference model of callgate's payment handling, written only from
// docs/guarantees.md ("A payment's life: facts, the fold and the difference", up to
// "## Faults") and docs/downstream.md (the notification table). It does not look at
// internal/ or at the other files of this package.
//
// READINGS (the doc sentence, then the reading chosen here), checked against the revised
// docs. "Docs:" means the docs say it; "Reading:" means they are silent or ambiguous.
//
//  A1. Docs: "its payment (paymentNo: a payment fact of that number, any status), else for a
//      refund its refund number, for a dispute its dispute id". Reading: "else" = when the
//      payment number (empty or unknown) finds no order; a payment number found for several
//      orders is "Found for several orders" and FAILED.
//  A2. Docs: "(a refund or dispute fact of that number ...)". Reading: for a refund, a running
//      total that names that refund number (Alipay) is a refund fact of that number too.
//      "Found for several orders: FAILED payment recorded for several orders" covers every
//      lookup of step 2 (refund number, dispute id too).
//  A3. "Any other event that names none takes the order's." Reading: a payment failure, a
//      refund failure/reversal and a close without currency take the order's currency,
//      never the source's payment_currency.
//  A4. The docs no longer say a running total's status is unused. Reading: it is unused (its
//      identity has no status; "a refund only while SUCCEEDED" counts a running total
//      whatever its status); it ranks with "refunds and running totals that succeeded".
//  A5. Docs: a running total's identity is "payment + refund number + total + occurredAt", a
//      dispute's "dispute id + status + occurredAt"; "In an identity, occurredAt is the
//      event's own (none when the platform gives none: an undated copy sent again is the same
//      fact, whenever it is received)". So the identity takes the event's occurredAt as given
//      (never paidAt or the received time; instants compared in UTC), and an undated copy is
//      no effect whenever it comes. Reading: a dated and an undated report of the same total
//      or stage are two facts (their identities differ); an undated one is still dated by
//      "When." (received) in the fold.
//  A6. Docs: "A refund began at the earliest initiatedAt its facts give, else at the earliest
//      time of all its facts recorded; a running total that names the refund (Alipay's
//      out_biz_no, the refund that made the total) is one of its facts for this." Reading:
//      over all of its facts in the set being folded; a running total naming it gives its
//      time only (the facts table gives initiatedAt to a refund, not to a running total), and
//      counts whatever payment it names. It is one of the refund's facts only "for this", not
//      for A7 nor for the other_payment statuses.
//  A7. Docs (settled): "when its facts name different payments ..., it is about the payment
//      the first of its facts in the fold's order (over all of them) that names one names".
//      A running total is about the payment it names.
//  A8. Docs (settled): "L its latest running total taken that counts (of the paying payment
//      or naming none, in the order's currency)". Reading: "each of its refunds" subtracted
//      from / added to L: the refunds that count by the same test (a refund's currency and
//      payment as in A7).
//  A9. Docs: lost disputes take "in the order they were lost (then by dispute id)". Reading:
//      by the time of their latest fact (the LOST one: a dispute lost again is lost then),
//      then by id. Without a paying payment nothing is taken and the excess is 0.
//  A10. "FAILED when a payment failure was taken": any payment's failure.
//  A11. paid_by_another / amount_mismatch / currency_mismatch "a payment success": any
//      payment with a SUCCEEDED fact, even when its latest fact is a failure.
//  A12. currency_mismatch of "a refund, running total or dispute of the paying payment (or
//      naming none)": Reading: only with a paying payment (naming none = "whichever payment
//      paid the order"). order.dispute / order.refund_failed / dispute_status use "the
//      order's" ones, which on an unpaid order are those naming no payment.
//  A13. other_payment_refunded: "that payment's; the refund's amount (the total's)", currency
//      unsaid. Reading: the refund's (total's) currency, the currency of that amount.
//  A14. Docs (settled): "for the two other_payment kinds, one per status any of the refund's
//      or dispute's facts has"; ordered "by the payment number, refund number ... or dispute
//      id it is about, as bytes, then by status (SUCCEEDED, FAILED, REVERSED, OPEN, LOST,
//      WON)". Reading: a running total (no status) gives one per label and ranks as
//      SUCCEEDED; a refund and a running total with the same label: the refund first.
//  A15. "refund number (a running total's: total:<total>)": a running total naming a refund
//      (Alipay) is labelled and sorted by that refund number.
//  A16. order.refunded's fallback refundNo ("the refund of the paying payment whose SUCCEEDED
//      fact or running total was taken last"): no currency filter.
//  A17. order.refund_failed "for a refund of the order's that became FAILED or REVERSED":
//      FAILED/REVERSED after, and before either not the order's or of another status.
//  A18. "uncounted what refunded_amount shrank by with it (0 for a refund that had not
//      counted)": the docs no longer say how a shrink splits when several refunds become
//      FAILED/REVERSED in one callback. Reading: all of it on this callback's refund when it
//      is one of them, else on the first by refund number; 0 on the others (keeps "sum of
//      order.refunded less sum of uncounted is refunded_amount").
//  A19. "refunded total lowered": "refundNo this callback's refund (or "")". Reading: the
//      refund number of this callback's refund or running total ("" when it names none or is
//      not one); currency (unsaid) the order's; refundedTotal the new refunded_amount.
//  A20. Docs: warehouse.cancel is sent when "the state after is cancelled and the order's
//      warehouse.cancel was never published": once in the order's life; the model remembers
//      it per order (Row's WarehouseCancelled). cancelled_with_money_left: published, before
//      cancelled, after not; "the paying payment's" = the state after's; amount what is left
//      after; currency the order's; last of the exceptions.
//  A21. refund_undone_after_cancel "taken (in the fold) after the order was cancelled":
//      the failure/reversal fact is taken while Cancelled is already true and refunded_amount
//      after it is below refunded_amount before it; currency the paying payment's.
//  A22. paid_at "the paying payment's (its time)": the fact's time.
//  A23. An order with no facts: payment_status UNPAID.
//  A24. Currencies are compared exactly as given (no case folding).
//  A25. Attempt notes are not modelled.
//  A26. Docs: "facts of the same time in this order: <rank> (running totals of the same time
//      by their total, the smaller first: a total only grows); then by the number they are
//      about (payment number, refund number, dispute id, as bytes: of two payments of the same
//      time, the same one pays whatever arrived first); then by arrival". So the key is time,
//      rank, number (a payment's number, a refund's number, a running total's refund number,
//      "" when it names none, a dispute's id; a close's "": it is about no number), then
//      arrival (log id). Reading: the running-totals rule orders running totals among
//      themselves only and comes before the number; the docs are silent on how running totals
//      interleave with SUCCEEDED refunds of the same time (same rank). The model sorts by
//      (time, rank, number, arrival), then, among the facts of one time, permutes the running
//      totals within the places they hold so the smaller total comes first (equal totals by
//      number, then arrival). Only order.refunded's fallback refundNo ("taken last") can tell
//      the interleaving. Lost disputes of one time are taken by dispute id (A9 agrees).
//  A27. Docs: order.closed is sent "with the order's payment_status and refundedTotal after
//      the close". Reading: the order row after this callback (the state after the last
//      fact), not the fold's state right after the close fact (a close dated before other
//      facts); downstream.md: "say what its money is after".
//  A28. Docs: raw refunded "with no running total of it taken yet" / "else, with L its latest
//      running total taken that counts". Reading: when the only running totals of the paying
//      payment are in another currency (none counts, so there is no L), the first rule applies
//      (the sum of its SUCCEEDED refunds).

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// ---------------------------------------------------------------- interface types

// refOrder is one orders row before any callback (amount in minor units of Currency, an ISO 4217 code).
type refOrder struct {
	Code     string
	User     int64
	Amount   int64
	Currency string
}

// refEvent is one canonical payment event (see the brief / docs "A configured JSON payment source").
type refEvent struct {
	Source        string
	LogID         int64
	ReceivedAt    time.Time
	Type          string // "payment", "refund", "close", "dispute" ("" means payment)
	OrderCode     string
	PaymentNo     string
	RefundNo      string
	DisputeID     string
	Amount        int64
	RefundedTotal *int64
	Currency      string
	Status        string
	Reason        string
	PaidAt        *time.Time
	OccurredAt    *time.Time
	InitiatedAt   *time.Time
}

// refMessage is one downstream notification.
type refMessage struct {
	RoutingKey string
	Payload    map[string]any
}

// refOutcome is what the model says of one callback.
type refOutcome struct {
	Status   string
	Reason   string
	NoEffect bool
	Messages []refMessage
}

// refOrderRow is an orders row after the callbacks.
type refOrderRow struct {
	Status        string
	PaymentNo     string
	PaidAt        *time.Time
	Refunded      int64
	Chargeback    int64
	DisputeStatus string
	// WarehouseCancelled: orders.warehouse_cancelled, whether the order's warehouse.cancel was published (A20)
	WarehouseCancelled bool
}

// ---------------------------------------------------------------- facts

type refFactKind int

const (
	refKindPayment      refFactKind = iota // payment attempt
	refKindRunningTotal                    // refund with refundedTotal
	refKindRefund                          // refund without refundedTotal
	refKindDispute                         // dispute stage
	refKindClose                           // close
)

const (
	refSucceeded = "SUCCEEDED"
	refFailed    = "FAILED"
	refReversed  = "REVERSED"
	refOpen      = "OPEN"
	refWon       = "WON"
	refLost      = "LOST"
)

// refFact is one row of payment_facts ("### Facts").
type refFact struct {
	Kind        refFactKind
	LogID       int64     // callback_log_id: the arrival order
	Time        time.Time // "When." (occurred_at, else paidAt for a payment, else received)
	PaymentNo   string
	RefundNo    string
	DisputeID   string
	Status      string // SUCCEEDED/FAILED/REVERSED/OPEN/WON/LOST; "" for running totals and closes
	Amount      int64  // a running total's amount is its total
	Currency    string
	Reason      string
	InitiatedAt *time.Time
	OccurredAt  *time.Time // the event's own occurredAt, nil when it gives none (its identity, A5)
}

// refFactOf: the facts table ("the event" -> "the fact"). cur is the currency step 3 settled.
func refFactOf(ev refEvent, typ, cur string) *refFact {
	f := &refFact{
		LogID:       ev.LogID,
		PaymentNo:   ev.PaymentNo,
		RefundNo:    ev.RefundNo,
		DisputeID:   ev.DisputeID,
		Amount:      ev.Amount,
		Currency:    cur,
		Reason:      ev.Reason,
		InitiatedAt: ev.InitiatedAt,
		OccurredAt:  ev.OccurredAt,
	}
	// "When. A fact's time is its occurred_at; a payment's is its paidAt when it gives no
	// occurredAt; a fact with neither is dated when callgate received its callback."
	f.Time = ev.ReceivedAt
	if ev.OccurredAt != nil {
		f.Time = *ev.OccurredAt
	} else if typ == "payment" && ev.PaidAt != nil {
		f.Time = *ev.PaidAt
	}
	switch typ {
	case "payment":
		// "payment, SUCCESS or FAILED | a payment attempt: the payment number, SUCCEEDED or FAILED"
		f.Kind = refKindPayment
		f.Status = refFailed
		if ev.Status == "SUCCESS" {
			f.Status = refSucceeded
		}
	case "refund":
		if ev.RefundedTotal != nil {
			// "refund with refundedTotal | a running total: everything refunded of the payment
			// so far (amount is the total)"; its status is not used (A4)
			f.Kind = refKindRunningTotal
			f.Amount = *ev.RefundedTotal
		} else {
			// "refund without refundedTotal | a refund: ... SUCCEEDED, FAILED or REVERSED"
			f.Kind = refKindRefund
			switch ev.Status {
			case "SUCCESS":
				f.Status = refSucceeded
			case "REVERSED":
				f.Status = refReversed
			default:
				f.Status = refFailed
			}
		}
	case "dispute":
		f.Kind = refKindDispute
		f.Status = ev.Status
	case "close":
		f.Kind = refKindClose
	}
	return f
}

// refIdentity: "its identity (recorded once per order)" column of the facts table.
func refIdentity(f *refFact) string {
	// "In an identity, occurredAt is the event's own (none when the platform gives none: an
	// undated copy sent again is the same fact, whenever it is received)." (A5)
	occurred := "none"
	if f.OccurredAt != nil {
		occurred = f.OccurredAt.UTC().Format(time.RFC3339Nano)
	}
	switch f.Kind {
	case refKindPayment: // payment number + status
		return "payment|" + f.PaymentNo + "|" + f.Status
	case refKindRunningTotal: // "payment + refund number + total + occurredAt" (A5)
		return fmt.Sprintf("total|%s|%s|%d|%s", f.PaymentNo, f.RefundNo, f.Amount, occurred)
	case refKindRefund: // refund number + status
		return "refund|" + f.RefundNo + "|" + f.Status
	case refKindDispute:
		// "dispute id + status + occurredAt (a dispute may pass a status twice: lost,
		// reversed, lost again in pre-arbitration)" (A5)
		return "dispute|" + f.DisputeID + "|" + f.Status + "|" + occurred
	default: // close: one per order
		return "close"
	}
}

// refTieRank: "facts of the same time in this order: payment failures, payment successes,
// refunds and running totals that succeeded, refund failures and reversals, disputes
// opened, lost, won, closes".
func refTieRank(f *refFact) int {
	switch f.Kind {
	case refKindPayment:
		if f.Status == refFailed {
			return 0
		}
		return 1
	case refKindRunningTotal:
		return 2
	case refKindRefund:
		if f.Status == refSucceeded {
			return 2
		}
		return 3
	case refKindDispute:
		switch f.Status {
		case refOpen:
			return 4
		case refLost:
			return 5
		default:
			return 6
		}
	default:
		return 7
	}
}

// refTieNumber: "by the number they are about (payment number, refund number, dispute id,
// as bytes ...)". A running total's is its refund number ("" when it names none); a close
// is about no number: "" (A26).
func refTieNumber(f *refFact) string {
	switch f.Kind {
	case refKindPayment:
		return f.PaymentNo
	case refKindRefund, refKindRunningTotal:
		return f.RefundNo
	case refKindDispute:
		return f.DisputeID
	default:
		return ""
	}
}

// refStatusRank orders the exceptions about one refund or dispute: "then by status
// (SUCCEEDED, FAILED, REVERSED, OPEN, LOST, WON)". A running total has none: it ranks as
// SUCCEEDED (A4, A14).
func refStatusRank(kind refFactKind, status string) int {
	for i, st := range []string{refSucceeded, refFailed, refReversed, refOpen, refLost, refWon} {
		if st == status {
			return i
		}
	}
	return 0
}

// refRefundLabel: a refund's number; a running total's refund number, else "total:<total>".
func refRefundLabel(f *refFact) string {
	if f.RefundNo != "" {
		return f.RefundNo
	}
	if f.Kind == refKindRunningTotal {
		return fmt.Sprintf("total:%d", f.Amount)
	}
	return ""
}

// ---------------------------------------------------------------- the fold

type refRefund struct {
	No        string
	PaymentNo string   // the payment it is about (A7)
	Status    string   // "A refund's status is the status of its latest fact"
	Succeeded *refFact // its SUCCEEDED fact, if taken
	Latest    *refFact
	LatestPos int
	Began     time.Time
	Statuses  map[string]bool
}

// main: "its amount and currency are its SUCCEEDED fact's, else its latest fact's".
func (r *refRefund) main() *refFact {
	if r.Succeeded != nil {
		return r.Succeeded
	}
	return r.Latest
}

type refDispute struct {
	ID        string
	PaymentNo string   // the payment it is about (A7)
	Latest    *refFact // "A dispute's amount and currency are its latest fact's"
	LatestPos int
	Statuses  map[string]bool
}

type refTakenTotal struct {
	f   *refFact
	pos int
}

// refState is what an order's facts say: the fold's state after its last fact.
type refState struct {
	order  refOrder
	sorted []*refFact // the facts in fold order

	paying     *refFact // the paying payment's success fact
	payingPos  int
	payStatus  map[string]string   // payment number -> status of its latest fact
	paySuccess map[string]*refFact // payment number -> its SUCCEEDED fact
	refunds    map[string]*refRefund
	totals     []refTakenTotal // running totals in fold order
	disputes   map[string]*refDispute
	closeFact  *refFact
	closePos   int
	failure    bool // a payment failure was taken
	shipped    bool
	cancelled  bool
	closed     bool
	undone     map[string]bool  // refunds with refund_undone_after_cancel
	takenBy    map[string]int64 // what each lost dispute took (for the examples)

	raw        int64
	refunded   int64
	chargeback int64
	left       int64
	excess     int64
	status     string
	dispStatus string
}

// ofPaying: "of the paying payment (or names no payment)"; false without a paying payment.
func (s *refState) ofPaying(paymentNo string) bool {
	return s.paying != nil && (paymentNo == "" || paymentNo == s.paying.PaymentNo)
}

// isOrders: "The order's refunds and disputes are those of its paying payment and those
// that name no payment (while the order is unpaid: those that name no payment)."
func (s *refState) isOrders(paymentNo string) bool {
	return paymentNo == "" || (s.paying != nil && paymentNo == s.paying.PaymentNo)
}

// factPayment: the payment a refund fact is about is its refund's (A7); a running total's is its own.
func (s *refState) factPayment(f *refFact) string {
	if f.Kind == refKindRefund {
		if r := s.refunds[f.RefundNo]; r != nil {
			return r.PaymentNo
		}
	}
	return f.PaymentNo
}

func (s *refState) refundNos() []string {
	var nos []string
	for no := range s.refunds {
		nos = append(nos, no)
	}
	sort.Strings(nos)
	return nos
}

func (s *refState) disputeIDs() []string {
	var ids []string
	for id := range s.disputes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// refFold derives the order's money from its facts ("### The fold").
func refFold(order refOrder, facts []*refFact) *refState {
	sorted := append([]*refFact(nil), facts...)
	// "The fold takes an order's facts by time; facts of the same time in this order: ...;
	// then by arrival (the callback's log id, then the fact's place in it)."
	// "then by the number they are about (payment number, refund number, dispute id, as
	// bytes ...); then by arrival (the callback's log id, then the fact's place in it)" (A26)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		if ra, rb := refTieRank(a), refTieRank(b); ra != rb {
			return ra < rb
		}
		if na, nb := refTieNumber(a), refTieNumber(b); na != nb {
			return na < nb
		}
		return a.LogID < b.LogID
	})
	// "(running totals of the same time by their total, the smaller first: a total only
	// grows)", which comes before the number: among the facts of one time, the running
	// totals are put in the places they hold by (rank, number, arrival), smaller totals
	// first (equal totals by number, then arrival) (A26).
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j].Time.Equal(sorted[i].Time) {
			j++
		}
		var places []int
		var totals []*refFact
		for k := i; k < j; k++ {
			if sorted[k].Kind == refKindRunningTotal {
				places = append(places, k)
				totals = append(totals, sorted[k])
			}
		}
		// totals is in (number, arrival) order already: a stable sort by total keeps it for equal totals
		sort.SliceStable(totals, func(a, b int) bool { return totals[a].Amount < totals[b].Amount })
		for n, k := range places {
			sorted[k] = totals[n]
		}
		i = j
	}

	// "A refund began at the earliest initiatedAt its facts give, else at the earliest
	// time of all its facts recorded; a running total that names the refund (Alipay's
	// out_biz_no, the refund that made the total) is one of its facts for this." (A6)
	began := map[string]time.Time{}
	hasInit := map[string]bool{}
	for _, f := range sorted {
		if f.Kind != refKindRefund { // a running total gives no initiatedAt (A6)
			continue
		}
		if f.InitiatedAt != nil {
			if !hasInit[f.RefundNo] || f.InitiatedAt.Before(began[f.RefundNo]) {
				began[f.RefundNo] = *f.InitiatedAt
			}
			hasInit[f.RefundNo] = true
		}
	}
	for _, f := range sorted { // sorted by time: the first seen is the earliest
		isRefunds := f.Kind == refKindRefund || (f.Kind == refKindRunningTotal && f.RefundNo != "")
		if !isRefunds || hasInit[f.RefundNo] {
			continue
		}
		if _, ok := began[f.RefundNo]; !ok {
			began[f.RefundNo] = f.Time
		}
	}

	// "A refund or dispute that names no payment (paymentNo empty) is about whichever payment
	// paid the order; when its facts name different payments ..., it is about the payment the
	// first of its facts in the fold's order (over all of them) that names one names." (A7)
	refundPay, disputePay := map[string]string{}, map[string]string{}
	for _, f := range sorted {
		if f.PaymentNo == "" {
			continue
		}
		switch f.Kind {
		case refKindRefund:
			if _, ok := refundPay[f.RefundNo]; !ok {
				refundPay[f.RefundNo] = f.PaymentNo
			}
		case refKindDispute:
			if _, ok := disputePay[f.DisputeID]; !ok {
				disputePay[f.DisputeID] = f.PaymentNo
			}
		}
	}

	s := &refState{
		order:      order,
		sorted:     sorted,
		payStatus:  map[string]string{},
		paySuccess: map[string]*refFact{},
		refunds:    map[string]*refRefund{},
		disputes:   map[string]*refDispute{},
		undone:     map[string]bool{},
	}
	s.money()
	for pos, f := range sorted {
		prevRefunded := s.refunded
		wasCancelled := s.cancelled
		switch f.Kind {
		case refKindPayment:
			// "A payment's status is the status of its latest fact."
			s.payStatus[f.PaymentNo] = f.Status
			if f.Status == refSucceeded {
				if s.paySuccess[f.PaymentNo] == nil {
					s.paySuccess[f.PaymentNo] = f
				}
				// "The paying payment is the first payment success taken that is in the
				// order's currency and of its amount; it stays the paying payment whatever follows."
				if s.paying == nil && f.Currency == order.Currency && f.Amount == order.Amount {
					s.paying, s.payingPos = f, pos
				}
			} else {
				s.failure = true
			}
		case refKindRunningTotal:
			s.totals = append(s.totals, refTakenTotal{f, pos})
		case refKindRefund:
			r := s.refunds[f.RefundNo]
			if r == nil {
				r = &refRefund{No: f.RefundNo, PaymentNo: refundPay[f.RefundNo], Began: began[f.RefundNo], Statuses: map[string]bool{}}
				s.refunds[f.RefundNo] = r
			}
			r.Status, r.Latest, r.LatestPos = f.Status, f, pos
			r.Statuses[f.Status] = true
			if f.Status == refSucceeded && r.Succeeded == nil {
				r.Succeeded = f
			}
		case refKindDispute:
			d := s.disputes[f.DisputeID]
			if d == nil {
				d = &refDispute{ID: f.DisputeID, PaymentNo: disputePay[f.DisputeID], Statuses: map[string]bool{}}
				s.disputes[f.DisputeID] = d
			}
			d.Latest, d.LatestPos = f, pos
			d.Statuses[f.Status] = true
		case refKindClose:
			// "Closed: a close was taken."
			if s.closeFact == nil {
				s.closeFact, s.closePos = f, pos
			}
			s.closed = true
		}
		s.money()
		// refund_undone_after_cancel: "a refund's failure or reversal, taken (in the fold)
		// after the order was cancelled, lowered refunded_amount" (A21)
		if f.Kind == refKindRefund && f.Status != refSucceeded && wasCancelled && s.refunded < prevRefunded {
			s.undone[f.RefundNo] = true
		}
		// "Shipped: a paying payment was taken. Cancelled: at some point of the fold, the
		// order was paid and nothing was left. Both stay once true."
		if s.paying != nil {
			s.shipped = true
			if s.left == 0 {
				s.cancelled = true
			}
		}
	}

	// "dispute_status: the status of the dispute of the order's (its paying payment's, or
	// naming none) whose latest fact was taken last."
	lastPos := -1
	for _, d := range s.disputes {
		if s.isOrders(d.PaymentNo) && d.LatestPos > lastPos {
			lastPos, s.dispStatus = d.LatestPos, d.Latest.Status
		}
	}
	return s
}

// money computes the order's money from the facts taken so far.
func (s *refState) money() {
	amount, cur := s.order.Amount, s.order.Currency
	// "A refund or running total counts only if it is of the paying payment (or names no
	// payment) and in the order's currency, and a refund only while SUCCEEDED."
	refundIsOrders := func(r *refRefund) bool { return s.ofPaying(r.PaymentNo) && r.main().Currency == cur }
	counts := func(r *refRefund) bool { return refundIsOrders(r) && r.Status == refSucceeded }

	// "What was refunded of the paying payment (the raw refunded)"
	var raw int64
	if s.paying != nil {
		var last *refTakenTotal
		for i := range s.totals {
			t := &s.totals[i]
			if s.ofPaying(t.f.PaymentNo) && t.f.Currency == cur { // A8
				last = t
			}
		}
		if last == nil {
			// "with no running total of it taken yet: the sum of its refunds that are SUCCEEDED"
			for _, r := range s.refunds {
				if counts(r) {
					raw += r.main().Amount
				}
			}
		} else {
			// "else, with L its latest running total taken that counts (of the paying payment
			// or naming none, in the order's currency): L's total, less the amount of each
			// of its refunds that is now FAILED or REVERSED by a fact taken after L and had
			// begun by L's time ..., but at least 0; plus the amount of each of its SUCCEEDED
			// refunds that began after L's time"
			raw = last.f.Amount
			for _, r := range s.refunds {
				if refundIsOrders(r) && (r.Status == refFailed || r.Status == refReversed) &&
					r.LatestPos > last.pos && !r.Began.After(last.f.Time) {
					raw -= r.main().Amount
				}
			}
			if raw < 0 {
				raw = 0
			}
			for _, r := range s.refunds {
				if counts(r) && r.Began.After(last.f.Time) {
					raw += r.main().Amount
				}
			}
		}
	}
	s.raw = raw
	// "refunded_amount is the raw refunded, at most the order's amount (refunds count first)"
	s.refunded = min(raw, amount)

	// "What the disputes took: each dispute of the paying payment (or naming no payment), in
	// the order's currency, whose status is LOST, takes, in the order they were lost (then by
	// dispute id), the smallest of its amount and what refunds and the disputes before it
	// left." (A9: by the time of their latest fact, the LOST one, then by id)
	var lost []*refDispute
	for _, d := range s.disputes {
		if s.ofPaying(d.PaymentNo) && d.Latest.Currency == cur && d.Latest.Status == refLost {
			lost = append(lost, d)
		}
	}
	sort.Slice(lost, func(i, j int) bool {
		if ti, tj := lost[i].Latest.Time, lost[j].Latest.Time; !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return lost[i].ID < lost[j].ID
	})
	var took, lostSum int64
	s.takenBy = map[string]int64{}
	for _, d := range lost {
		lostSum += d.Latest.Amount
		t := max(0, min(d.Latest.Amount, amount-s.refunded-took))
		s.takenBy[d.ID] = t
		took += t
	}
	s.chargeback = took
	// "what is left is the amount less both"
	s.left = amount - s.refunded - s.chargeback
	// "The excess is what left beyond the order's amount: raw refunded plus the amounts of
	// the lost disputes, less the order's amount (when above 0)."
	s.excess = max(0, raw+lostSum-amount)

	// "payment_status: with a paying payment, PAID when nothing was refunded, REFUNDED when
	// something was and nothing is left, PARTIALLY_REFUNDED otherwise ...; without one,
	// CLOSED when the order was closed, else FAILED when a payment failure was taken, else UNPAID."
	switch {
	case s.paying != nil && s.refunded == 0:
		s.status = "PAID"
	case s.paying != nil && s.left == 0:
		s.status = "REFUNDED"
	case s.paying != nil:
		s.status = "PARTIALLY_REFUNDED"
	case s.closed:
		s.status = "CLOSED"
	case s.failure:
		s.status = "FAILED"
	default:
		s.status = "UNPAID"
	}
}

// points: "The points are the order's amount once it is shipped, less refunded_amount and chargeback_amount."
func (s *refState) points() int64 {
	if !s.shipped {
		return 0
	}
	return s.order.Amount - s.refunded - s.chargeback
}

// ---------------------------------------------------------------- exceptions

// the exceptions table, in its order
var refExceptionKinds = []string{
	"paid_by_another",
	"amount_mismatch",
	"currency_mismatch",
	"paid_after_close",
	"reversal_of_paying_payment",
	"over_refund",
	"other_payment_refunded",
	"other_payment_disputed",
	"refund_undone_after_cancel",
	"cancelled_with_money_left", // a difference's, appended last by refDifference
}

type refException struct {
	kind    string
	about   string // payment number, refund number (total:<total>) or dispute id: the sort key
	tie     int    // "then by status (SUCCEEDED, FAILED, REVERSED, OPEN, LOST, WON)" (A14)
	key     string // "each at most once per what it is about"
	payload map[string]any
}

func (s *refState) exception(kind, about string, tie int, key, paymentNo string, amount int64, currency, field, value string) refException {
	p := map[string]any{
		"orderCode": s.order.Code,
		"paymentNo": paymentNo,
		"kind":      kind,
		"amount":    amount,
		"currency":  currency,
	}
	if field != "" {
		p[field] = value
	}
	return refException{kind: kind, about: about, tie: tie, key: kind + "|" + key, payload: p}
}

// exceptions: "Exceptions (money for a person) are, like the rest, what the state after the
// last fact has" (over_refund, a difference, is added by refDifference).
func (s *refState) exceptions() map[string]refException {
	out := map[string]refException{}
	add := func(e refException) { out[e.key] = e }
	cur := s.order.Currency

	// payment successes (A11)
	for no, f := range s.paySuccess {
		if f == s.paying {
			continue
		}
		switch {
		case f.Currency != cur:
			// currency_mismatch: "a payment success in another currency"
			add(s.exception("currency_mismatch", no, 0, "payment|"+no, no, f.Amount, f.Currency, "", ""))
		case f.Amount != s.order.Amount:
			// amount_mismatch: "a payment success in the order's currency of another amount"
			add(s.exception("amount_mismatch", no, 0, no, no, f.Amount, f.Currency, "", ""))
		default:
			// paid_by_another: "a payment success in the order's currency and of its amount
			// that is not the paying payment"
			add(s.exception("paid_by_another", no, 0, no, no, f.Amount, f.Currency, "", ""))
		}
	}

	if s.paying != nil {
		pno, pcur := s.paying.PaymentNo, s.paying.Currency
		// currency_mismatch: "a refund, running total or dispute of the paying payment (or
		// naming none) in another currency" (A12)
		for _, no := range s.refundNos() {
			r := s.refunds[no]
			if s.ofPaying(r.PaymentNo) && r.main().Currency != cur {
				add(s.exception("currency_mismatch", no, 0, "refund|"+no, pno, r.main().Amount, r.main().Currency, "refundNo", no))
			}
		}
		for _, t := range s.totals {
			if s.ofPaying(t.f.PaymentNo) && t.f.Currency != cur {
				l := refRefundLabel(t.f)
				add(s.exception("currency_mismatch", l, 0, "total|"+l, pno, t.f.Amount, t.f.Currency, "refundNo", l))
			}
		}
		for _, id := range s.disputeIDs() {
			d := s.disputes[id]
			if s.ofPaying(d.PaymentNo) && d.Latest.Currency != cur {
				add(s.exception("currency_mismatch", id, 0, "dispute|"+id, pno, d.Latest.Amount, d.Latest.Currency, "disputeId", id))
			}
		}
		// paid_after_close: "the paying payment's success came after a close"
		if s.closeFact != nil && s.closePos < s.payingPos {
			add(s.exception("paid_after_close", pno, 0, pno, pno, s.paying.Amount, pcur, "", ""))
		}
		// reversal_of_paying_payment: "the paying payment's latest fact is a failure, after
		// its success" | "the paying payment's, the order's amount"
		if s.payStatus[pno] == refFailed {
			add(s.exception("reversal_of_paying_payment", pno, 0, pno, pno, s.order.Amount, pcur, "", ""))
		}
		// refund_undone_after_cancel | "the paying payment's; the refund's amount" (A21)
		for no := range s.undone {
			m := s.refunds[no].main()
			add(s.exception("refund_undone_after_cancel", no, 0, no, pno, m.Amount, m.Currency, "refundNo", no))
		}
	}

	// other_payment_refunded: "a refund or running total of a payment that did not pay the
	// order, when the order is paid by another or that payment's success is recorded ...
	// (one per refund and status) | that payment's; the refund's amount (the total's)";
	// "one per status any of the refund's or dispute's facts has" (A13, A14)
	other := func(paymentNo string) bool {
		if paymentNo == "" || (s.paying != nil && paymentNo == s.paying.PaymentNo) {
			return false
		}
		return s.paying != nil || s.paySuccess[paymentNo] != nil
	}
	for _, no := range s.refundNos() {
		r := s.refunds[no]
		if !other(r.PaymentNo) {
			continue
		}
		for st := range r.Statuses {
			add(s.exception("other_payment_refunded", no, refStatusRank(refKindRefund, st), no+"|"+st,
				r.PaymentNo, r.main().Amount, r.main().Currency, "refundNo", no))
		}
	}
	for _, t := range s.totals {
		if !other(t.f.PaymentNo) {
			continue
		}
		l := refRefundLabel(t.f)
		add(s.exception("other_payment_refunded", l, 0, "total|"+l, t.f.PaymentNo, t.f.Amount, t.f.Currency, "refundNo", l))
	}
	// other_payment_disputed: "likewise a dispute stage of such a payment (one per dispute
	// and status)" | "that payment's; the dispute's amount and currency"
	for _, id := range s.disputeIDs() {
		d := s.disputes[id]
		if !other(d.PaymentNo) {
			continue
		}
		for st := range d.Statuses {
			add(s.exception("other_payment_disputed", id, refStatusRank(refKindDispute, st), id+"|"+st,
				d.PaymentNo, d.Latest.Amount, d.Latest.Currency, "disputeId", id))
		}
	}
	return out
}

// ---------------------------------------------------------------- the difference

func refKindIndex(kind string) int {
	for i, k := range refExceptionKinds {
		if k == kind {
			return i
		}
	}
	return len(refExceptionKinds)
}

// refDifference: "### The difference: what downstream hears", items 1-8 in order.
// cancelPublished: whether the order's warehouse.cancel was published before this callback.
func refDifference(before, after *refState, nf *refFact, cancelPublished bool) []refMessage {
	o := after.order
	var msgs []refMessage
	pub := func(key string, p map[string]any) { msgs = append(msgs, refMessage{RoutingKey: key, Payload: p}) }

	// 1. "warehouse.ship: it became shipped." {"orderCode"}
	if after.shipped && !before.shipped {
		pub("warehouse.ship", map[string]any{"orderCode": o.Code})
	}

	// 2. "order.refunded: refunded_amount grew"
	if after.refunded > before.refunded {
		refundNo := ""
		if (nf.Kind == refKindRefund || nf.Kind == refKindRunningTotal) && after.ofPaying(after.factPayment(nf)) {
			// "refundNo is this callback's refund (total:<total> for a running total that names none)"
			refundNo = refRefundLabel(nf)
		} else {
			// "or, when this callback is not a refund or running total of the paying payment
			// ..., the refund of the paying payment whose SUCCEEDED fact or running total was
			// taken last" (A16)
			for i := len(after.sorted) - 1; i >= 0; i-- {
				f := after.sorted[i]
				if ((f.Kind == refKindRefund && f.Status == refSucceeded) || f.Kind == refKindRunningTotal) && after.ofPaying(after.factPayment(f)) {
					refundNo = refRefundLabel(f)
					break
				}
			}
		}
		pub("order.refunded", map[string]any{
			"orderCode":     o.Code,
			"refundNo":      refundNo,
			"amount":        after.refunded - before.refunded,
			"currency":      o.Currency,
			"refundedTotal": after.refunded,
			"full":          after.left == 0,
		})
	}

	// 3. order.refund_failed
	shrink := max(0, before.refunded-after.refunded)
	var became []*refRefund
	for _, no := range after.refundNos() {
		r := after.refunds[no]
		if r.Status != refFailed && r.Status != refReversed {
			continue
		}
		if !after.isOrders(r.PaymentNo) {
			continue
		}
		b := before.refunds[no]
		if b != nil && before.isOrders(b.PaymentNo) && b.Status == r.Status {
			continue // A17
		}
		became = append(became, r)
	}
	// "uncounted what refunded_amount shrank by with it (0 for a refund that had not
	// counted)": all of the shrink on this callback's refund when it is one of them, else on
	// the first by refund number; 0 on the others (A18)
	owner := -1
	for i, r := range became {
		if nf.Kind == refKindRefund && r.No == nf.RefundNo {
			owner = i
		}
	}
	if owner < 0 && len(became) > 0 {
		owner = 0
	}
	for i, r := range became {
		// "reason the platform's (refund reversed for a reversal that gives none)"
		reason := r.Latest.Reason
		if reason == "" && r.Status == refReversed {
			reason = "refund reversed"
		}
		var uncounted int64
		if i == owner {
			uncounted = shrink
		}
		pub("order.refund_failed", map[string]any{
			"orderCode":     o.Code,
			"refundNo":      r.No,
			"amount":        r.main().Amount,
			"currency":      r.main().Currency,
			"reason":        reason,
			"refundedTotal": after.refunded,
			"uncounted":     uncounted,
		})
	}
	// "When refunded_amount shrank and no refund became FAILED or REVERSED (a running total
	// the platform lowered), one order.refund_failed says so: refundNo this callback's refund
	// (or ""), amount and uncounted what it shrank by, reason refunded total lowered" (A19)
	if len(became) == 0 && shrink > 0 {
		refundNo := ""
		if nf.Kind == refKindRefund || nf.Kind == refKindRunningTotal {
			refundNo = nf.RefundNo
		}
		pub("order.refund_failed", map[string]any{
			"orderCode":     o.Code,
			"refundNo":      refundNo,
			"amount":        shrink,
			"currency":      o.Currency,
			"reason":        "refunded total lowered",
			"refundedTotal": after.refunded,
			"uncounted":     shrink,
		})
	}

	// 4. "order.dispute: for each dispute of the order's that is new or whose status
	// changed, by dispute id: its id, status, amount and currency."
	for _, id := range after.disputeIDs() {
		d := after.disputes[id]
		if !after.isOrders(d.PaymentNo) {
			continue
		}
		b := before.disputes[id]
		if b != nil && before.isOrders(b.PaymentNo) && b.Latest.Status == d.Latest.Status {
			continue
		}
		pub("order.dispute", map[string]any{
			"orderCode": o.Code,
			"disputeId": id,
			"status":    d.Latest.Status,
			"amount":    d.Latest.Amount,
			"currency":  d.Latest.Currency,
		})
	}

	// 5. "points.add or points.deduct: when the order's points changed, once, by the change."
	if dp := after.points() - before.points(); dp != 0 {
		key := "points.add"
		if dp < 0 {
			key, dp = "points.deduct", -dp
		}
		pub(key, map[string]any{"orderCode": o.Code, "userId": o.User, "amount": dp, "currency": o.Currency})
	}

	// 6. "warehouse.cancel: the state after is cancelled and the order's warehouse.cancel was
	// never published (orders.warehouse_cancelled): once in the order's life, whatever order
	// its facts came in." (A20)
	if after.cancelled && !cancelPublished {
		pub("warehouse.cancel", map[string]any{"orderCode": o.Code})
	}

	// 7. "order.closed: it became closed; with the order's payment_status and refundedTotal after the close."
	if after.closed && !before.closed {
		pub("order.closed", map[string]any{
			"orderCode":     o.Code,
			"reason":        after.closeFact.Reason,
			"paymentStatus": after.status,
			"refundedTotal": after.refunded,
		})
	}

	// 8. "payment.exception: each exception that is new, in the order of the table above, then
	// by the payment number, refund number ... or dispute id it is about, as bytes, then by
	// status (SUCCEEDED, FAILED, REVERSED, OPEN, LOST, WON); over_refund when the excess grew,
	// by what it grew." Left equal (a refund and a running total naming it): by key (A14).
	had := before.exceptions()
	var news []refException
	for k, e := range after.exceptions() {
		if _, ok := had[k]; !ok {
			news = append(news, e)
		}
	}
	if after.excess > before.excess && after.paying != nil {
		news = append(news, after.exception("over_refund", after.paying.PaymentNo, 0, "", after.paying.PaymentNo,
			after.excess-before.excess, after.paying.Currency, "", ""))
	}
	sort.Slice(news, func(i, j int) bool {
		a, b := news[i], news[j]
		if ka, kb := refKindIndex(a.kind), refKindIndex(b.kind); ka != kb {
			return ka < kb
		}
		if a.about != b.about {
			return a.about < b.about
		}
		if a.tie != b.tie {
			return a.tie < b.tie
		}
		return a.key < b.key
	})
	// cancelled_with_money_left: "not a state's but a difference's: the order's
	// warehouse.cancel was published, the state before this callback was cancelled and the
	// state after it is not ...; published each time that happens | the paying payment's;
	// what is left"; "cancelled_with_money_left last." (A20)
	if cancelPublished && before.cancelled && !after.cancelled && after.paying != nil {
		news = append(news, refException{kind: "cancelled_with_money_left", payload: map[string]any{
			"orderCode": o.Code,
			"paymentNo": after.paying.PaymentNo,
			"kind":      "cancelled_with_money_left",
			"amount":    after.left,
			"currency":  o.Currency,
		}})
	}
	for _, e := range news {
		pub("payment.exception", e.payload)
	}
	return msgs
}

// ---------------------------------------------------------------- the model

type refOrderFacts struct {
	order           refOrder
	facts           []*refFact
	cancelPublished bool // orders.warehouse_cancelled (A20)
}

type refModel struct {
	orders         map[string]*refOrderFacts
	sourceCurrency map[string]string
}

// newRefModel starts the model with the orders that exist and the sources' payment_currency.
func newRefModel(orders []refOrder, sourceCurrency map[string]string) *refModel {
	m := &refModel{orders: map[string]*refOrderFacts{}, sourceCurrency: map[string]string{}}
	for _, o := range orders {
		m.orders[o.Code] = &refOrderFacts{order: o}
	}
	for k, v := range sourceCurrency {
		m.sourceCurrency[k] = v
	}
	return m
}

// refFindOrder: "Before the fold" step 2. Returns the order code, or a FAILED reason.
func (m *refModel) refFindOrder(ev refEvent, typ string) (string, string) {
	// "An event names its order by orderCode."
	if ev.OrderCode != "" {
		if m.orders[ev.OrderCode] == nil {
			return "", "order not found" // (worker.order_grace ~0 in the tests)
		}
		return ev.OrderCode, ""
	}
	// "One that does not is found by what it names, among the facts already recorded"
	find := func(match func(f *refFact) bool) []string {
		var codes []string
		for code, of := range m.orders {
			for _, f := range of.facts {
				if match(f) {
					codes = append(codes, code)
					break
				}
			}
		}
		return codes
	}
	var codes []string
	// "its payment (paymentNo: a payment fact of that number, any status)"
	if ev.PaymentNo != "" {
		codes = find(func(f *refFact) bool { return f.Kind == refKindPayment && f.PaymentNo == ev.PaymentNo })
	}
	// "else for a refund its refund number, for a dispute its dispute id (a refund or dispute
	// fact of that number ...)" (A1, A2: a running total naming that refund number counts)
	if len(codes) == 0 && typ == "refund" && ev.RefundNo != "" {
		codes = find(func(f *refFact) bool {
			return (f.Kind == refKindRefund || f.Kind == refKindRunningTotal) && f.RefundNo == ev.RefundNo
		})
	}
	if len(codes) == 0 && typ == "dispute" && ev.DisputeID != "" {
		codes = find(func(f *refFact) bool { return f.Kind == refKindDispute && f.DisputeID == ev.DisputeID })
	}
	switch len(codes) {
	case 0:
		return "", "order not found"
	case 1:
		return codes[0], ""
	default:
		return "", "payment recorded for several orders"
	}
}

// Apply processes one callback, in the order the worker settles them, and returns its outcome.
func (m *refModel) Apply(ev refEvent) refOutcome {
	typ := ev.Type
	if typ == "" {
		typ = "payment"
	}
	// 2. The order.
	code, reason := m.refFindOrder(ev, typ)
	if reason != "" {
		return refOutcome{Status: "FAILED", Reason: reason}
	}
	of := m.orders[code]

	// 3. "The currency of a payment success, a refund that succeeded, a running total and a
	// dispute: the event's, else the source's payment_currency; neither: FAILED no currency.
	// Any other event that names none takes the order's." (A3)
	cur := ev.Currency
	if cur == "" {
		needs := (typ == "payment" && ev.Status == "SUCCESS") ||
			(typ == "refund" && (ev.RefundedTotal != nil || ev.Status == "SUCCESS")) ||
			typ == "dispute"
		if needs {
			cur = m.sourceCurrency[ev.Source]
			if cur == "" {
				return refOutcome{Status: "FAILED", Reason: "no currency"}
			}
		} else {
			cur = of.order.Currency
		}
	}

	// 4. "The fact the event reports is recorded for the order, once. A fact already
	// recorded for the order ... is no effect: a SUCCESS that records nothing and publishes nothing."
	f := refFactOf(ev, typ, cur)
	id := refIdentity(f)
	for _, g := range of.facts {
		if refIdentity(g) == id {
			return refOutcome{Status: "SUCCESS", NoEffect: true}
		}
	}

	// 5. "the order's money is derived from its facts with the new one (the fold), the order
	// row becomes that state, and the difference from the state its facts gave without the
	// new one is published."
	before := refFold(of.order, of.facts)
	of.facts = append(of.facts, f)
	after := refFold(of.order, of.facts)
	msgs := refDifference(before, after, f, of.cancelPublished)
	for _, msg := range msgs {
		if msg.RoutingKey == "warehouse.cancel" {
			of.cancelPublished = true
		}
	}
	return refOutcome{Status: "SUCCESS", Messages: msgs}
}

// Row is the order's row now.
func (m *refModel) Row(code string) refOrderRow {
	of := m.orders[code]
	if of == nil {
		return refOrderRow{Status: "UNPAID"} // A23
	}
	s := refFold(of.order, of.facts)
	row := refOrderRow{
		Status:        s.status,
		Refunded:      s.refunded,
		Chargeback:    s.chargeback,
		DisputeStatus: s.dispStatus,
		// "warehouse_cancelled says whether the order's warehouse.cancel was published"
		WarehouseCancelled: of.cancelPublished,
	}
	// "payment_no and paid_at are the paying payment's (its time)" (A22)
	if s.paying != nil {
		row.PaymentNo = s.paying.PaymentNo
		t := s.paying.Time
		row.PaidAt = &t
	}
	return row
}

// ---------------------------------------------------------------- hand-derived examples

func refAt(minutes int) *time.Time {
	t := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC).Add(time.Duration(minutes) * time.Minute)
	return &t
}

func refI64(v int64) *int64 { return &v }

// refMsg builds a message from key/value pairs (ints become int64).
func refMsg(key string, kv ...any) refMessage {
	p := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		v := kv[i+1]
		if n, ok := v.(int); ok {
			v = int64(n)
		}
		p[kv[i].(string)] = v
	}
	return refMessage{RoutingKey: key, Payload: p}
}

type refStep struct {
	ev   refEvent
	want refOutcome
}

type refScenario struct {
	name   string
	orders []refOrder
	steps  []refStep
	rows   map[string]refOrderRow
	check  func(t *testing.T, m *refModel) // optional: what the interface cannot show
}

func refFormatMsgs(ms []refMessage) string {
	var b strings.Builder
	for _, m := range ms {
		keys := make([]string, 0, len(m.Payload))
		for k := range m.Payload {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, "\n    %s {", m.RoutingKey)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s:%v", k, m.Payload[k])
		}
		b.WriteString(" }")
	}
	return b.String()
}

func TestRefModelExamples(t *testing.T) {
	const o1 = "ORD-1"
	order := refOrder{Code: o1, User: 42, Amount: 10000, Currency: "CNY"}
	ok := func(msgs ...refMessage) refOutcome { return refOutcome{Status: "SUCCESS", Messages: msgs} }
	ship := refMsg("warehouse.ship", "orderCode", o1)
	cancel := refMsg("warehouse.cancel", "orderCode", o1)
	pointsAdd := func(n int) refMessage {
		return refMsg("points.add", "orderCode", o1, "userId", 42, "amount", n, "currency", "CNY")
	}
	pointsDeduct := func(n int) refMessage {
		return refMsg("points.deduct", "orderCode", o1, "userId", 42, "amount", n, "currency", "CNY")
	}
	refunded := func(no string, n, total int, full bool) refMessage {
		return refMsg("order.refunded", "orderCode", o1, "refundNo", no, "amount", n, "currency", "CNY", "refundedTotal", total, "full", full)
	}
	dispute := func(id, status string, n int) refMessage {
		return refMsg("order.dispute", "orderCode", o1, "disputeId", id, "status", status, "amount", n, "currency", "CNY")
	}
	exception := func(kind, pno string, n int, extra ...any) refMessage {
		kv := append([]any{"orderCode", o1, "paymentNo", pno, "kind", kind, "amount", n, "currency", "CNY"}, extra...)
		return refMsg("payment.exception", kv...)
	}
	pay := func(log int64, pno, status string, at *time.Time) refEvent {
		return refEvent{Source: "paydemo", LogID: log, ReceivedAt: *refAt(int(100 + log)), OrderCode: o1,
			PaymentNo: pno, Amount: 10000, Currency: "CNY", Status: status, OccurredAt: at}
	}
	refund := func(log int64, rno, status string, n int64, at *time.Time) refEvent {
		return refEvent{Source: "paydemo", LogID: log, ReceivedAt: *refAt(int(100 + log)), Type: "refund", OrderCode: o1,
			PaymentNo: "P1", RefundNo: rno, Amount: n, Status: status, OccurredAt: at}
	}
	total := func(log int64, rno string, n int64, at *time.Time) refEvent {
		return refEvent{Source: "paydemo", LogID: log, ReceivedAt: *refAt(int(100 + log)), Type: "refund", OrderCode: o1,
			PaymentNo: "P1", RefundNo: rno, RefundedTotal: refI64(n), Status: "SUCCESS", OccurredAt: at}
	}
	disp := func(log int64, id, status string, n int64, at *time.Time) refEvent {
		return refEvent{Source: "paydemo", LogID: log, ReceivedAt: *refAt(int(100 + log)), Type: "dispute", OrderCode: o1,
			PaymentNo: "P1", DisputeID: id, Amount: n, Status: status, OccurredAt: at}
	}
	row := func(status string, paidAt int, refundedAmt, cb int64, ds string) refOrderRow {
		return refOrderRow{Status: status, PaymentNo: "P1", PaidAt: refAt(paidAt), Refunded: refundedAmt, Chargeback: cb, DisputeStatus: ds}
	}
	wc := func(r refOrderRow) refOrderRow { r.WarehouseCancelled = true; return r } // warehouse.cancel was published

	scenarios := []refScenario{
		{
			// payment, then a partial refund of 3000: refunded 3000, points 7000.
			name:   "payment then partial refund",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{refund(2, "R1", "SUCCESS", 3000, refAt(5)), ok(refunded("R1", 3000, 3000, false), pointsDeduct(3000))},
			},
			rows: map[string]refOrderRow{o1: row("PARTIALLY_REFUNDED", 0, 3000, 0, "")},
		},
		{
			// Stripe: refund R1 of 300 created at t1, running total 300 at t2 (counts it while
			// pending), R1 failed at t3. The failure arrives first: R1 is FAILED and never
			// counted (no running total yet): refund_failed with uncounted 0. The running
			// total then comes: fold P1, L(300, t2), R1 FAILED (t3, taken after L, began t1 <= t2):
			// raw = 300 - 300 = 0: nothing changed, nothing published.
			name:   "stripe refund failure before older running total",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{func() refEvent {
					e := refund(2, "R1", "FAILED", 300, refAt(3))
					e.Currency, e.InitiatedAt, e.Reason = "", refAt(1), "expired_or_canceled_card"
					return e
				}(), ok(refMsg("order.refund_failed", "orderCode", o1, "refundNo", "R1", "amount", 300, "currency", "CNY",
					"reason", "expired_or_canceled_card", "refundedTotal", 0, "uncounted", 0))},
				{total(3, "", 300, refAt(2)), ok()},
			},
			rows: map[string]refOrderRow{o1: row("PAID", 0, 0, 0, "")},
		},
		{
			// Dispute D1 lost for the whole amount: chargeback 10000, nothing left -> cancelled,
			// still PAID. Refund R1 of 10000: refunds count first: refunded 10000, D1 takes 0;
			// excess = 10000 + 10000 - 10000 = 10000 (over_refund); points stay 0.
			// D1 won: it takes nothing; excess back to 0; only order.dispute.
			name:   "lost dispute, full refund, dispute won",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{disp(2, "D1", "LOST", 10000, refAt(1)), ok(dispute("D1", "LOST", 10000), pointsDeduct(10000), cancel)},
				{refund(3, "R1", "SUCCESS", 10000, refAt(2)), ok(refunded("R1", 10000, 10000, true), exception("over_refund", "P1", 10000))},
				{disp(4, "D1", "WON", 10000, refAt(3)), ok(dispute("D1", "WON", 10000))},
			},
			rows: map[string]refOrderRow{o1: wc(row("REFUNDED", 0, 10000, 0, "WON"))},
		},
		{
			// P1 succeeded (paidAt t2, no occurredAt) and failed at t1 (before): the failure is
			// taken first, the success last: P1's status SUCCEEDED, no reversal; nothing changes.
			name:   "payment failure dated before its success, arriving after",
			orders: []refOrder{order},
			steps: []refStep{
				{func() refEvent { e := pay(1, "P1", "SUCCESS", nil); e.PaidAt = refAt(2); return e }(), ok(ship, pointsAdd(10000))},
				{func() refEvent { e := pay(2, "P1", "FAILED", refAt(1)); e.Currency = ""; return e }(), ok()},
			},
			rows: map[string]refOrderRow{o1: row("PAID", 2, 0, 0, "")},
		},
		{
			// Alipay: running totals with refund numbers, newest (R2: 5000 at t2) first, then R1
			// (2000 at t1): L stays R2's total: nothing changes.
			name:   "alipay running totals newest first",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{total(2, "R2", 5000, refAt(2)), ok(refunded("R2", 5000, 5000, false), pointsDeduct(5000))},
				{total(3, "R1", 2000, refAt(1)), ok()},
			},
			rows: map[string]refOrderRow{o1: row("PARTIALLY_REFUNDED", 0, 5000, 0, "")},
		},
		{
			// "running totals of the same time by their total, the smaller first: a total only
			// grows". Two undated-by-refund totals, both at t1: 5000 arrives first, 2000 after.
			// By arrival L would be 2000 (refunded lowered); by total the fold takes 2000 then
			// 5000: L stays 5000, nothing changes. A third of 5000 at t1 is the same fact.
			name:   "running totals of the same time: the smaller first",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{total(2, "", 5000, refAt(1)), ok(refunded("total:5000", 5000, 5000, false), pointsDeduct(5000))},
				{total(3, "", 2000, refAt(1)), ok()},
				{total(4, "", 5000, refAt(1)), refOutcome{Status: "SUCCESS", NoEffect: true}},
			},
			rows: map[string]refOrderRow{o1: row("PARTIALLY_REFUNDED", 0, 5000, 0, "")},
			check: func(t *testing.T, m *refModel) {
				s := refFold(m.orders[o1].order, m.orders[o1].facts)
				if n := len(s.totals); n != 2 || s.totals[0].f.Amount != 2000 || s.totals[1].f.Amount != 5000 {
					t.Errorf("running totals in fold order: got %v, want 2000 then 5000", s.totals)
				}
			},
		},
		{
			// "a running total that names the refund (Alipay's out_biz_no, the refund that made
			// the total) is one of its facts for this". Alipay: the total of 3000 made by R1
			// at t1 (L); R1's own success, dated t2, arrives after: R1 began at t1 (the total
			// naming it), by L's time: L counted it, raw stays 3000 (not 3000 + 3000): nothing
			// changes. R1 reversed at t3 (taken after L, began by L's time): raw = 3000 - 3000
			// = 0: refund_failed (reason "refund reversed", uncounted 3000), points back.
			name:   "alipay running total naming its refund dates the refund's beginning",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{total(2, "R1", 3000, refAt(1)), ok(refunded("R1", 3000, 3000, false), pointsDeduct(3000))},
				{refund(3, "R1", "SUCCESS", 3000, refAt(2)), ok()},
				{refund(4, "R1", "REVERSED", 3000, refAt(3)),
					ok(refMsg("order.refund_failed", "orderCode", o1, "refundNo", "R1", "amount", 3000, "currency", "CNY",
						"reason", "refund reversed", "refundedTotal", 0, "uncounted", 3000), pointsAdd(3000))},
			},
			rows: map[string]refOrderRow{o1: row("PAID", 0, 0, 0, "")},
			check: func(t *testing.T, m *refModel) {
				s := refFold(m.orders[o1].order, m.orders[o1].facts)
				if r := s.refunds["R1"]; r == nil || !r.Began.Equal(*refAt(1)) {
					t.Errorf("R1 began: got %+v, want %v", r, refAt(1))
				}
			},
		},
		{
			// Partial chargeback 500, then a refund of 9500: refunded 9500, D1 takes
			// min(500, 10000-9500) = 500, nothing left: REFUNDED, cancelled; excess 0.
			name:   "partial chargeback then refund of the rest",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{disp(2, "D1", "LOST", 500, refAt(1)), ok(dispute("D1", "LOST", 500), pointsDeduct(500))},
				{refund(3, "R1", "SUCCESS", 9500, refAt(2)), ok(refunded("R1", 9500, 9500, true), pointsDeduct(9500), cancel)},
			},
			rows: map[string]refOrderRow{o1: wc(row("REFUNDED", 0, 9500, 500, "LOST"))},
		},
		{
			// A refund of P1 recorded before P1: only recorded (not the order's: it names P1,
			// the order is unpaid). P1 then pays: R1 counts; order.refunded names R1 (the
			// refund of the paying payment whose SUCCEEDED fact was taken last); points 0 -> 7000.
			name:   "refund before its payment",
			orders: []refOrder{order},
			steps: []refStep{
				{refund(1, "R1", "SUCCESS", 3000, refAt(5)), ok()},
				{pay(2, "P1", "SUCCESS", refAt(0)), ok(ship, refunded("R1", 3000, 3000, false), pointsAdd(7000))},
			},
			rows: map[string]refOrderRow{o1: row("PARTIALLY_REFUNDED", 0, 3000, 0, "")},
		},
		{
			// Step 2-4: lookups, currency, duplicates.
			name:   "lookups, currency and duplicates",
			orders: []refOrder{order, {Code: "ORD-2", User: 7, Amount: 5000, Currency: "CNY"}},
			steps: []refStep{
				{func() refEvent { e := pay(1, "P1", "SUCCESS", refAt(0)); e.OrderCode = "NOPE"; return e }(),
					refOutcome{Status: "FAILED", Reason: "order not found"}},
				{pay(2, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				// found by its payment, but "stripe" has no payment_currency and the event none
				{func() refEvent {
					e := refund(3, "R1", "SUCCESS", 1000, refAt(2))
					e.OrderCode, e.Source = "", "stripe"
					return e
				}(), refOutcome{Status: "FAILED", Reason: "no currency"}},
				// found by its payment, paydemo's CNY
				{func() refEvent { e := refund(4, "R1", "SUCCESS", 1000, refAt(2)); e.OrderCode = ""; return e }(),
					ok(refunded("R1", 1000, 1000, false), pointsDeduct(1000))},
				// the same fact again
				{func() refEvent { e := refund(5, "R1", "SUCCESS", 1000, refAt(2)); e.OrderCode = ""; return e }(),
					refOutcome{Status: "SUCCESS", NoEffect: true}},
				// a dispute naming only an unknown dispute id
				{func() refEvent {
					e := disp(6, "D9", "OPEN", 1000, refAt(3))
					e.OrderCode, e.PaymentNo = "", ""
					return e
				}(), refOutcome{Status: "FAILED", Reason: "order not found"}},
				// found by its refund number: R1 fails at t3: refunded 1000 -> 0
				{func() refEvent {
					e := refund(7, "R1", "FAILED", 1000, refAt(3))
					e.OrderCode, e.PaymentNo, e.Currency = "", "", ""
					return e
				}(), ok(refMsg("order.refund_failed", "orderCode", o1, "refundNo", "R1", "amount", 1000, "currency", "CNY",
					"reason", "", "refundedTotal", 0, "uncounted", 1000), pointsAdd(1000))},
				// payment X failed, recorded for both orders
				{func() refEvent { e := pay(8, "X", "FAILED", refAt(4)); e.OrderCode = "ORD-2"; return e }(), ok()},
				{pay(9, "X", "FAILED", refAt(4)), ok()},
				{func() refEvent {
					e := refund(10, "R5", "SUCCESS", 100, refAt(5))
					e.OrderCode, e.PaymentNo = "", "X"
					return e
				}(),
					refOutcome{Status: "FAILED", Reason: "payment recorded for several orders"}},
			},
			rows: map[string]refOrderRow{
				o1:      row("PAID", 0, 0, 0, ""),
				"ORD-2": {Status: "FAILED"},
			},
		},
		{
			// Close at t1 of an unpaid order: CLOSED. P1 pays at t2: paid after a close.
			// P1 fails at t3: reversal of the paying payment (still PAID: nothing refunded).
			// Q2 succeeds for the order's amount and currency at t4: paid by another.
			name:   "close, paid after close, reversal, paid by another",
			orders: []refOrder{order},
			steps: []refStep{
				{refEvent{Source: "paydemo", LogID: 1, ReceivedAt: *refAt(101), Type: "close", OrderCode: o1, Reason: "timeout", OccurredAt: refAt(1)},
					ok(refMsg("order.closed", "orderCode", o1, "reason", "timeout", "paymentStatus", "CLOSED", "refundedTotal", 0))},
				{pay(2, "P1", "SUCCESS", refAt(2)), ok(ship, pointsAdd(10000), exception("paid_after_close", "P1", 10000))},
				{pay(3, "P1", "FAILED", refAt(3)), ok(exception("reversal_of_paying_payment", "P1", 10000))},
				{pay(4, "Q2", "SUCCESS", refAt(4)), ok(exception("paid_by_another", "Q2", 10000))},
			},
			rows: map[string]refOrderRow{o1: row("PAID", 2, 0, 0, "")},
		},
		{
			// A full refund cancels the order; its failure afterwards lowers refunded_amount:
			// refund_failed with uncounted 10000, points back, refund_undone_after_cancel; no
			// new ship. The fold was cancelled at t2 and stays so ("Both stay once true within
			// the fold"): no cancelled_with_money_left. A second full refund R2 at t4: no second
			// warehouse.cancel (the fold was cancelled before it too, and it was published).
			name:   "refund undone after cancel, then refunded in full again",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{refund(2, "R1", "SUCCESS", 10000, refAt(2)), ok(refunded("R1", 10000, 10000, true), pointsDeduct(10000), cancel)},
				{func() refEvent {
					e := refund(3, "R1", "FAILED", 10000, refAt(3))
					e.Reason = "insufficient funds"
					return e
				}(),
					ok(refMsg("order.refund_failed", "orderCode", o1, "refundNo", "R1", "amount", 10000, "currency", "CNY",
						"reason", "insufficient funds", "refundedTotal", 0, "uncounted", 10000),
						pointsAdd(10000),
						exception("refund_undone_after_cancel", "P1", 10000, "refundNo", "R1"))},
				{refund(4, "R2", "SUCCESS", 10000, refAt(4)), ok(refunded("R2", 10000, 10000, true), pointsDeduct(10000))},
			},
			rows: map[string]refOrderRow{o1: wc(row("REFUNDED", 0, 10000, 0, ""))},
		},
		{
			// A running total's identity is "payment + refund number + total + occurredAt", the
			// event's own occurredAt: none for an undated one, whenever it is received (A5).
			// R1 (3000, t1) counts: refunded 3000. An undated running total of 3000 (received
			// at t103, dated so in the fold) becomes L: raw = 3000 (R1 began at t1, by L's
			// time): nothing changes. R1 fails at t104 (taken after L, began by L's time): raw =
			// 3000 - 3000 = 0: refund_failed uncounted 3000, points back. The same undated total
			// again, received at t105, is the same fact: no effect (it does not become a later
			// L: refunded stays 0). Sent a third time, received at t106: no effect again.
			// The same total dated t2 is another fact (its identity has a time): it is taken
			// before R1's failure and before the undated L (t103), so L stays: nothing changes.
			name:   "undated running total sent twice around a refund failure",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{refund(2, "R1", "SUCCESS", 3000, refAt(1)), ok(refunded("R1", 3000, 3000, false), pointsDeduct(3000))},
				{total(3, "", 3000, nil), ok()},
				{refund(4, "R1", "FAILED", 3000, refAt(104)),
					ok(refMsg("order.refund_failed", "orderCode", o1, "refundNo", "R1", "amount", 3000, "currency", "CNY",
						"reason", "", "refundedTotal", 0, "uncounted", 3000), pointsAdd(3000))},
				{total(5, "", 3000, nil), refOutcome{Status: "SUCCESS", NoEffect: true}},
				{func() refEvent { e := total(6, "", 3000, nil); e.ReceivedAt = *refAt(300); return e }(),
					refOutcome{Status: "SUCCESS", NoEffect: true}},
				{total(7, "", 3000, refAt(2)), ok()},
			},
			rows: map[string]refOrderRow{o1: row("PAID", 0, 0, 0, "")},
			check: func(t *testing.T, m *refModel) {
				if n := len(m.orders[o1].facts); n != 5 { // P1, R1 x2, the undated total, the dated one
					t.Errorf("facts recorded: got %d, want 5", n)
				}
			},
		},
		{
			// Likewise a dispute stage: "dispute id + status + occurredAt", none when undated.
			// D1 lost, undated (received t102): takes 2000. D1 won, undated (received t103):
			// gives it back. The undated LOST sent again (received t104) is the same fact as
			// the first: no effect; D1 stays WON (a lost-again the platform dates would be a
			// new fact: "dispute lost, won, lost again").
			name:   "undated dispute stage sent twice",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{disp(2, "D1", "LOST", 2000, nil), ok(dispute("D1", "LOST", 2000), pointsDeduct(2000))},
				{disp(3, "D1", "WON", 2000, nil), ok(dispute("D1", "WON", 2000), pointsAdd(2000))},
				{disp(4, "D1", "LOST", 2000, nil), refOutcome{Status: "SUCCESS", NoEffect: true}},
				{func() refEvent { e := disp(5, "D1", "WON", 2000, nil); e.ReceivedAt = *refAt(400); return e }(),
					refOutcome{Status: "SUCCESS", NoEffect: true}},
			},
			rows: map[string]refOrderRow{o1: row("PAID", 0, 0, 0, "WON")},
		},
		{
			// Lost disputes take "in the order they were lost (by the time of the LOST fact that
			// is their latest, then by dispute id)". R1 refunds 7000: 3000 left. D2 lost 2000
			// at t5: takes 2000; 1000 left. D1 lost 2000 at t5 too, arriving after: by dispute
			// id D1 takes min(2000, 3000) = 2000 and D2 min(2000, 1000) = 1000; chargeback 3000,
			// nothing left: cancelled (REFUNDED: something was refunded). Excess = 7000 + 2000 +
			// 2000 - 10000 = 1000: over_refund 1000. dispute_status: D2's (LOST), taken last (same
			// time and rank: by dispute id, D1 then D2, whatever arrived first).
			name:   "two disputes lost at the same time",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{refund(2, "R1", "SUCCESS", 7000, refAt(1)), ok(refunded("R1", 7000, 7000, false), pointsDeduct(7000))},
				{disp(3, "D2", "LOST", 2000, refAt(5)), ok(dispute("D2", "LOST", 2000), pointsDeduct(2000))},
				{disp(4, "D1", "LOST", 2000, refAt(5)),
					ok(dispute("D1", "LOST", 2000), pointsDeduct(1000), cancel, exception("over_refund", "P1", 1000))},
			},
			rows: map[string]refOrderRow{o1: wc(row("REFUNDED", 0, 7000, 3000, "LOST"))},
			check: func(t *testing.T, m *refModel) {
				// the split between the two is not in the row: it is the rule itself
				s := refFold(m.orders[o1].order, m.orders[o1].facts)
				if want := map[string]int64{"D1": 2000, "D2": 1000}; !reflect.DeepEqual(s.takenBy, want) {
					t.Errorf("taken by each dispute: got %v, want %v", s.takenBy, want)
				}
			},
		},
		{
			// "then by the number they are about (payment number, ... as bytes: of two payments
			// of the same time, the same one pays whatever arrived first)". Two successes of
			// the order's amount and currency, both at t0. ORD-1: P2 arrives first and pays
			// (ship, points); P1 arrives: the fold takes P1 then P2: P1 pays, P2 is
			// paid_by_another; shipped and points unchanged. ORD-2: P1 arrives first and pays;
			// P2 arrives: taken after P1: paid_by_another. Both rows: paid by P1 at t0.
			name:   "two payments of the same time: the smaller number pays",
			orders: []refOrder{order, {Code: "ORD-2", User: 7, Amount: 10000, Currency: "CNY"}},
			steps: []refStep{
				{pay(1, "P2", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{pay(2, "P1", "SUCCESS", refAt(0)), ok(exception("paid_by_another", "P2", 10000))},
				{func() refEvent { e := pay(3, "P1", "SUCCESS", refAt(0)); e.OrderCode = "ORD-2"; return e }(),
					ok(refMsg("warehouse.ship", "orderCode", "ORD-2"),
						refMsg("points.add", "orderCode", "ORD-2", "userId", 7, "amount", 10000, "currency", "CNY"))},
				{func() refEvent { e := pay(4, "P2", "SUCCESS", refAt(0)); e.OrderCode = "ORD-2"; return e }(),
					ok(refMsg("payment.exception", "orderCode", "ORD-2", "paymentNo", "P2", "kind", "paid_by_another",
						"amount", 10000, "currency", "CNY"))},
			},
			rows: map[string]refOrderRow{
				o1:      row("PAID", 0, 0, 0, ""),
				"ORD-2": row("PAID", 0, 0, 0, ""),
			},
		},
		{
			// warehouse.cancel once in the order's life. P1 pays at t5, R1 refunds it in full at
			// t6: cancel. P0 (same amount and currency) dated t1 arrives: it is the first payment
			// success taken, so it pays; P1 is paid_by_another, R1 (of P1) moves P1's money:
			// other_payment_refunded; refunded_amount 10000 -> 0 with no refund failed:
			// "refunded total lowered" (refundNo "": a payment); points back; the fold was
			// never cancelled: cancelled_with_money_left (P0, all 10000 left), last.
			// R2 refunds P0 in full at t7: cancelled again, but warehouse.cancel was published:
			// none this time.
			name:   "cancel once: an earlier payment takes over, then a full refund",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(5)), ok(ship, pointsAdd(10000))},
				{refund(2, "R1", "SUCCESS", 10000, refAt(6)), ok(refunded("R1", 10000, 10000, true), pointsDeduct(10000), cancel)},
				{pay(3, "P0", "SUCCESS", refAt(1)),
					ok(refMsg("order.refund_failed", "orderCode", o1, "refundNo", "", "amount", 10000, "currency", "CNY",
						"reason", "refunded total lowered", "refundedTotal", 0, "uncounted", 10000),
						pointsAdd(10000),
						exception("paid_by_another", "P1", 10000),
						exception("other_payment_refunded", "P1", 10000, "refundNo", "R1"),
						exception("cancelled_with_money_left", "P0", 10000))},
				{func() refEvent { e := refund(4, "R2", "SUCCESS", 10000, refAt(7)); e.PaymentNo = "P0"; return e }(),
					ok(refunded("R2", 10000, 10000, true), pointsDeduct(10000))},
			},
			rows: map[string]refOrderRow{o1: {Status: "REFUNDED", PaymentNo: "P0", PaidAt: refAt(1), Refunded: 10000, WarehouseCancelled: true}},
		},
		{
			// cancelled_with_money_left, each time. R1 refunds 9000 at t2; D1 lost 1000 at t4
			// takes the last 1000: cancel. R1's failure dated t3 arrives: in the fold R1 failed
			// before D1 was lost, so nothing was ever left at 0: not cancelled: refund_failed
			// (uncounted 9000), points +9000, cancelled_with_money_left (9000 left); no
			// refund_undone_after_cancel (the failure is taken before the cancellation).
			// R2 refunds 9000 at t10: nothing left again: no second warehouse.cancel.
			// D1 won, dated t6 (before R2): at t10 1000 is left: never cancelled again:
			// cancelled_with_money_left (1000 left) a second time.
			name:   "cancelled with money left, twice",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{refund(2, "R1", "SUCCESS", 9000, refAt(2)), ok(refunded("R1", 9000, 9000, false), pointsDeduct(9000))},
				{disp(3, "D1", "LOST", 1000, refAt(4)), ok(dispute("D1", "LOST", 1000), pointsDeduct(1000), cancel)},
				{refund(4, "R1", "FAILED", 9000, refAt(3)),
					ok(refMsg("order.refund_failed", "orderCode", o1, "refundNo", "R1", "amount", 9000, "currency", "CNY",
						"reason", "", "refundedTotal", 0, "uncounted", 9000),
						pointsAdd(9000),
						exception("cancelled_with_money_left", "P1", 9000))},
				{refund(5, "R2", "SUCCESS", 9000, refAt(10)), ok(refunded("R2", 9000, 9000, true), pointsDeduct(9000))},
				{disp(6, "D1", "WON", 1000, refAt(6)),
					ok(dispute("D1", "WON", 1000), pointsAdd(1000), exception("cancelled_with_money_left", "P1", 1000))},
			},
			rows: map[string]refOrderRow{o1: wc(row("PARTIALLY_REFUNDED", 0, 9000, 0, "WON"))},
		},
		{
			// A dispute's identity is "dispute id + status + occurredAt": D1 lost (t1), won (t2), lost
			// again in pre-arbitration (t3) are three facts. Lost for the whole amount: cancel;
			// won back at t2: the fold was cancelled at t1 and stays so (no
			// cancelled_with_money_left); lost again: no second cancel. The LOST of t3 resent
			// is the same fact: no effect.
			name:   "dispute lost, won, lost again",
			orders: []refOrder{order},
			steps: []refStep{
				{pay(1, "P1", "SUCCESS", refAt(0)), ok(ship, pointsAdd(10000))},
				{disp(2, "D1", "LOST", 10000, refAt(1)), ok(dispute("D1", "LOST", 10000), pointsDeduct(10000), cancel)},
				{disp(3, "D1", "WON", 10000, refAt(2)), ok(dispute("D1", "WON", 10000), pointsAdd(10000))},
				{disp(4, "D1", "LOST", 10000, refAt(3)), ok(dispute("D1", "LOST", 10000), pointsDeduct(10000))},
				{disp(5, "D1", "LOST", 10000, refAt(3)), refOutcome{Status: "SUCCESS", NoEffect: true}},
			},
			rows: map[string]refOrderRow{o1: wc(row("PAID", 0, 0, 10000, "LOST"))},
		},
	}

	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			m := newRefModel(sc.orders, map[string]string{"paydemo": "CNY"})
			for i, st := range sc.steps {
				got := m.Apply(st.ev)
				sameMessages := len(got.Messages) == 0 && len(st.want.Messages) == 0 || reflect.DeepEqual(got.Messages, st.want.Messages)
				if got.Status != st.want.Status || got.Reason != st.want.Reason || got.NoEffect != st.want.NoEffect || !sameMessages {
					t.Errorf("step %d (log %d): got %s %q noEffect=%v:%s\nwant %s %q noEffect=%v:%s", i+1, st.ev.LogID,
						got.Status, got.Reason, got.NoEffect, refFormatMsgs(got.Messages),
						st.want.Status, st.want.Reason, st.want.NoEffect, refFormatMsgs(st.want.Messages))
				}
			}
			if sc.check != nil {
				sc.check(t, m)
			}
			for code, want := range sc.rows {
				got := m.Row(code)
				same := got.Status == want.Status && got.PaymentNo == want.PaymentNo && got.Refunded == want.Refunded &&
					got.Chargeback == want.Chargeback && got.DisputeStatus == want.DisputeStatus &&
					got.WarehouseCancelled == want.WarehouseCancelled &&
					((got.PaidAt == nil) == (want.PaidAt == nil)) && (got.PaidAt == nil || got.PaidAt.Equal(*want.PaidAt))
				if !same {
					t.Errorf("row %s: got %+v (paidAt %v), want %+v (paidAt %v)", code, got, got.PaidAt, want, want.PaidAt)
				}
			}
		})
	}
}
