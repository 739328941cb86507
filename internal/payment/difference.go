package payment

import (
	"sort"
	"strings"

	"callgate/internal/callback"
)

// The difference: what downstream hears when a fact is added to an
// order's facts (docs/guarantees.md, "The difference"). Before and after
// are the folds without and with fact x; told says whether the order's
// warehouse.cancel was published already (orders.warehouse_cancelled).
// It returns the notifications, in the documented order, and told after
// them.
func Difference(o *Order, before, after *State, x *Fact, told bool) ([]callback.Message, bool) {
	var msgs []callback.Message
	add := func(m callback.Message) { msgs = append(msgs, m) }
	if after.Shipped && !before.Shipped {
		add(shipMsg(o))
	}
	if grew := after.Refunded - before.Refunded; grew > 0 {
		// This callback's refund or running total when it is the order's
		// (of the paying payment, or naming none), else the refund of the
		// paying payment taken last.
		no := after.LastRefund
		if _, ours := after.Refunds[x.Ref]; x.Kind == KindRefund && ours {
			no = x.Ref
		} else if x.Kind == KindTotal && (x.PaymentNo == "" || x.PaymentNo == after.PaymentNo) {
			no = totalRef(x)
		}
		add(refundedMsg(o, no, grew, after.Refunded, after.Left == 0))
	}
	shrank := max(0, before.Refunded-after.Refunded)
	told1 := false
	for _, id := range sortedKeys(after.Refunds) {
		r := after.Refunds[id]
		if r.Status == RefundSucceeded || before.Refunds[id].Status == r.Status {
			continue
		}
		add(refundFailedMsg(o, id, r.Amount, r.Currency, r.Reason, shrank, after.Refunded))
		shrank, told1 = 0, true
	}
	if shrank > 0 && !told1 {
		no := ""
		if x.Kind == KindRefund || x.Kind == KindTotal {
			no = x.Ref
		}
		add(refundFailedMsg(o, no, shrank, o.Currency, "refunded total lowered", shrank, after.Refunded))
	}
	for _, id := range sortedKeys(after.Disputes) {
		d := after.Disputes[id]
		if b, ok := before.Disputes[id]; !ok || b.Status != d.Status {
			add(disputeMsg(o, id, d.Status, d.Amount, d.Currency))
		}
	}
	if pb, pa := before.Points(o.Amount), after.Points(o.Amount); pa > pb {
		add(pointsMsg(RoutingPointsAdd, o, pa-pb))
	} else if pa < pb {
		add(pointsMsg(RoutingPointsDeduct, o, pb-pa))
	}
	if after.Cancelled && !told {
		add(cancelMsg(o))
		told = true
	}
	if after.Closed && !before.Closed {
		add(closedMsg(o, x.reason(), after.Status, after.Refunded))
	}
	var news []Exception
	for k, e := range after.Exceptions {
		if _, ok := before.Exceptions[k]; !ok {
			news = append(news, e)
		}
	}
	if grew := after.Excess - before.Excess; grew > 0 {
		news = append(news, Exception{Kind: ExceptionOverRefund, PaymentNo: after.PaymentNo, Amount: grew, Currency: o.Currency})
	}
	if told && before.Cancelled && !after.Cancelled {
		news = append(news, Exception{Kind: ExceptionCancelledWithMoneyLeft, PaymentNo: after.PaymentNo, Amount: after.Left, Currency: o.Currency})
	}
	sort.Slice(news, func(i, j int) bool {
		a, b := news[i], news[j]
		if exceptionRank[a.Kind] != exceptionRank[b.Kind] {
			return exceptionRank[a.Kind] < exceptionRank[b.Kind]
		}
		if ka, kb := strings.Join([]string{a.PaymentNo, a.RefundNo, a.DisputeID}, "\x00"), strings.Join([]string{b.PaymentNo, b.RefundNo, b.DisputeID}, "\x00"); ka != kb {
			return ka < kb
		}
		if statusRank[a.status] != statusRank[b.status] {
			return statusRank[a.status] < statusRank[b.status]
		}
		// A refund before a running total of the same number, totals by
		// their total.
		if a.total != b.total {
			return b.total
		}
		return a.Amount < b.Amount
	})
	for _, e := range news {
		add(exceptionMsg(o, e))
	}
	return msgs, told
}

// statusRank orders the statuses of one refund or dispute as the fold's
// ties do.
var statusRank = map[string]int{RefundSucceeded: 0, RefundFailed: 1, RefundReversed: 2, callback.DisputeOpen: 3, callback.DisputeLost: 4,
	callback.DisputeWon: 5}

func sortedKeys(m map[string]Item) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
