package payment

// finish sets what the state after the last fact has: the paying
// payment, the order's refunds and disputes, the exceptions about
// payments, refunds and disputes that are not the order's.
func (f *folder) finish() {
	s, o := &f.s, f.o
	// An exception is what the state after the last fact has: a refund
	// undone after the cancel carries the refund's amount as it is now.
	for k, e := range s.Exceptions {
		if r := f.refunds[e.RefundNo]; e.Kind == ExceptionRefundUndoneAfterCancel && r != nil {
			e.Amount = r.item.Amount
			s.Exceptions[k] = e
		}
	}
	s.PaymentNo = f.paying
	if f.paying != "" {
		t := f.payments[f.paying].paidAt
		s.PaidAt = &t
	}
	s.Refunds, s.Disputes = map[string]Item{}, map[string]Item{}
	lastRefund := -1
	for id, r := range f.refunds {
		if r.succeeded && f.ofPaying(r.paymentNo) && (r.succPos > lastRefund || r.succPos == lastRefund && id < s.LastRefund) {
			lastRefund, s.LastRefund = r.succPos, id
		}
	}
	for _, t := range f.totals {
		if f.ofPaying(t.f.PaymentNo) && t.pos > lastRefund {
			lastRefund, s.LastRefund = t.pos, totalRef(t.f)
		}
	}
	last := -1
	for id, d := range f.disputes {
		if !f.ofPaying(d.paymentNo) {
			continue
		}
		s.Disputes[id] = d.item
		if d.last > last {
			last, s.DisputeStatus = d.last, d.item.Status
		}
		if f.paying != "" && d.item.Currency != o.Currency {
			f.except(Exception{Kind: ExceptionCurrencyMismatch, PaymentNo: f.paying, DisputeID: id, Amount: d.item.Amount, Currency: d.item.Currency,
				Detail: "dispute " + id + " in " + d.item.Currency + ", order in " + o.Currency})
		}
	}
	for id, r := range f.refunds {
		if !f.ofPaying(r.paymentNo) || r.item.Status == "" {
			continue
		}
		s.Refunds[id] = r.item
		if f.paying != "" && r.item.Currency != o.Currency {
			f.except(Exception{Kind: ExceptionCurrencyMismatch, PaymentNo: f.paying, RefundNo: id, Amount: r.item.Amount, Currency: r.item.Currency,
				Detail: "refund " + id + " in " + r.item.Currency + ", order in " + o.Currency})
		}
	}
	for _, tt := range f.totals {
		if t := tt.f; f.paying != "" && f.ofPaying(t.PaymentNo) && t.Currency != o.Currency {
			f.except(Exception{Kind: ExceptionCurrencyMismatch, PaymentNo: f.paying, RefundNo: totalRef(t), Amount: t.Amount, Currency: t.Currency,
				Detail: "refunded total in " + t.Currency + ", order in " + o.Currency})
		}
	}
	for no, p := range f.payments {
		if p.success == nil {
			continue
		}
		x := p.success
		switch {
		case no == f.paying:
			if p.status == PaymentFailed {
				f.except(Exception{Kind: ExceptionReversalOfPayingPayment, PaymentNo: no, Amount: o.Amount, Currency: o.Currency,
					Detail: "payment " + no + " failed after it paid the order"})
			}
		case x.Currency != o.Currency:
			f.except(Exception{Kind: ExceptionCurrencyMismatch, PaymentNo: no, Amount: x.Amount, Currency: x.Currency,
				Detail: "payment in " + x.Currency + ", order in " + o.Currency})
		case x.Amount != o.Amount:
			f.except(Exception{Kind: ExceptionAmountMismatch, PaymentNo: no, Amount: x.Amount, Currency: x.Currency,
				Detail: "payment " + itoa(x.Amount) + ", order " + itoa(o.Amount) + " (" + o.Currency + " minor units)"})
		default:
			f.except(Exception{Kind: ExceptionPaidByAnother, PaymentNo: no, Amount: x.Amount, Currency: x.Currency,
				Detail: "order already paid by payment " + f.paying})
		}
	}
	// The money of a payment that did not pay the order moved.
	other := func(no string) bool {
		return no != "" && no != f.paying && (f.paying != "" || f.payments[no] != nil && f.payments[no].success != nil)
	}
	// One per refund or dispute and per status any of its facts has.
	for id, r := range f.refunds {
		if !other(r.paymentNo) {
			continue
		}
		for status := range r.statuses {
			f.except(Exception{Kind: ExceptionOtherPaymentRefunded, PaymentNo: r.paymentNo, RefundNo: id, status: status,
				Amount: r.item.Amount, Currency: r.item.Currency, Detail: "refund " + id + " " + status + " of payment " + r.paymentNo + ", which did not pay the order"})
		}
	}
	for _, tt := range f.totals {
		if t := tt.f; other(t.PaymentNo) {
			f.except(Exception{Kind: ExceptionOtherPaymentRefunded, PaymentNo: t.PaymentNo, RefundNo: totalRef(t), status: RefundSucceeded, total: true, Amount: t.Amount,
				Currency: t.Currency, Detail: "refunded total " + itoa(t.Amount) + " of payment " + t.PaymentNo + ", which did not pay the order"})
		}
	}
	for id, d := range f.disputes {
		if !other(d.paymentNo) {
			continue
		}
		for status := range d.statuses {
			f.except(Exception{Kind: ExceptionOtherPaymentDisputed, PaymentNo: d.paymentNo, DisputeID: id, status: status,
				Amount: d.item.Amount, Currency: d.item.Currency, Detail: "dispute " + id + " " + status + " of payment " + d.paymentNo + ", which did not pay the order"})
		}
	}
}

// except records e once by what it is about.
func (f *folder) except(e Exception) {
	// An exception about a refund or dispute of the order's is that
	// refund's or dispute's, whichever payment pays the order.
	about := e.PaymentNo
	if (e.Kind == ExceptionCurrencyMismatch || e.Kind == ExceptionRefundUndoneAfterCancel) && (e.RefundNo != "" || e.DisputeID != "") {
		about = ""
	}
	key := e.Kind + "\x00" + about + "\x00" + e.RefundNo + "\x00" + e.DisputeID + "\x00" + e.status
	if e.total {
		key += "\x00total/" + itoa(e.Amount)
	}
	if _, ok := f.s.Exceptions[key]; !ok {
		f.s.Exceptions[key] = e
	}
}
