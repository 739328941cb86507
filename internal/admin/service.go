package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/store"
)

// Service holds the operator's read operations, shared by the API, the
// console and (through the API) the CLI: finding callbacks, reading one,
// the audit trail, the dashboard's figures. Replays are internal/replay.
type Service struct {
	Store *store.Store
	// Masks are the JSON fields masked on display, by source.
	Masks map[string][]string
	// Unrouted reports how many notifications wait in
	// <prefix>.downstream.unrouted; nil or failing shows them as unknown.
	Unrouted func() (int, error)
	// UnroutedLimit is amqp.unrouted_max_length, the unrouted queue's
	// bound (0: not known): past half of it the dashboard warns, as the
	// alert CallgateDownstreamUnroutedNearLimit does.
	UnroutedLimit int
	// Replica reports, with mysql.durability: replica, whether a replica
	// acknowledges the primary's commits; nil when durability is primary.
	Replica func(ctx context.Context) error
	Log     *slog.Logger
}

// ListFilter selects callbacks for the list.
type ListFilter struct {
	Status  string
	Source  string
	Kind    string
	Key     string
	EventID string
	Since   *time.Time
	Until   *time.Time
	Cursor  int64 // ids below this; 0 = from the newest
	Limit   int
	// Origin is callback.OriginNotify or callback.OriginReconcile ("":
	// both).
	Origin string
}

// Page is one page of a keyset-paginated list.
type Page struct {
	Items      []callback.Summary `json:"items"`
	NextCursor *int64             `json:"next_cursor"`
}

// List returns callbacks newest first. Pagination is by id (keyset): the
// next page is the ids below the last one shown, never an OFFSET scan.
func (s *Service) List(ctx context.Context, f ListFilter) (Page, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	rows, err := s.Store.ListCallbacks(ctx, store.CallbackFilter{Status: f.Status, Source: f.Source, Kind: f.Kind, Key: f.Key,
		EventID: f.EventID, Since: f.Since, Until: f.Until, Origin: f.Origin}, f.Cursor, f.Limit+1)
	if err != nil {
		return Page{}, err
	}
	p := Page{Items: make([]callback.Summary, 0, len(rows))}
	for i := range rows {
		if i == f.Limit {
			next := rows[i-1].ID
			p.NextCursor = &next
			break
		}
		p.Items = append(p.Items, callback.Summarize(&rows[i]))
	}
	return p, nil
}

// Detail is everything about one callback.
type Detail struct {
	callback.Summary
	// Payload is the raw body as received (a string; PayloadJSON holds it
	// parsed when it is JSON).
	Payload     string          `json:"payload"`
	PayloadJSON json.RawMessage `json:"payload_json,omitempty"`
	// Normalized is the canonical event a platform preset made of the
	// payload (absent for sources without a preset).
	Normalized json.RawMessage    `json:"normalized,omitempty"`
	Headers    map[string]string  `json:"headers"`
	Attempts   []callback.Attempt `json:"attempt_history"`
	Lineage    []store.OutboxRow  `json:"lineage"`
	// Replays are the single replays of this callback, newest first: who
	// and why (from the audit trail).
	Replays []store.AuditEntry `json:"replays"`
	// Money is the money history of the order a payment callback is
	// about (absent for other kinds, and when no such order exists).
	Money *MoneyHistory `json:"money_history,omitempty"`
}

// MoneyHistory is an order's money: the order, what its facts derive,
// every fact recorded for it in the order the fold takes them (by the
// platform's time, with each one's place by arrival), and per payment,
// refund and dispute its latest status with the callbacks that reported
// it first and last.
type MoneyHistory struct {
	Order    MoneyOrder     `json:"order"`
	State    MoneyState     `json:"state"`
	Facts    []MoneyFact    `json:"facts"`
	Payments []MoneyPayment `json:"payments"`
	Refunds  []MoneyRefund  `json:"refunds"`
	Disputes []MoneyDispute `json:"disputes"`
}

// MoneyOrder is the order's money columns.
type MoneyOrder struct {
	OrderCode          string     `json:"order_code"`
	Amount             int64      `json:"amount"`
	Currency           string     `json:"currency"`
	PaymentStatus      string     `json:"payment_status"`
	PaymentNo          *string    `json:"payment_no"`
	PaidAt             *time.Time `json:"paid_at"`
	RefundedAmount     int64      `json:"refunded_amount"`
	ChargebackAmount   int64      `json:"chargeback_amount"`
	DisputeStatus      *string    `json:"dispute_status"`
	WarehouseCancelled bool       `json:"warehouse_cancelled"`
}

// MoneyState is what the order's facts derive beyond its columns.
type MoneyState struct {
	Left      int64 `json:"left"`
	Excess    int64 `json:"excess"`
	Shipped   bool  `json:"shipped"`
	Cancelled bool  `json:"cancelled"`
	Closed    bool  `json:"closed"`
}

// MoneyFact is one fact a platform reported, as the fold takes it.
type MoneyFact struct {
	Kind        string     `json:"kind"`
	Ref         string     `json:"ref"`
	PaymentNo   string     `json:"payment_no"`
	Status      string     `json:"status"`
	Amount      int64      `json:"amount"`
	Currency    string     `json:"currency"`
	Reason      *string    `json:"reason"`
	OccurredAt  *time.Time `json:"occurred_at"`
	InitiatedAt *time.Time `json:"initiated_at,omitempty"`
	ReceivedAt  time.Time  `json:"received_at"`
	// Arrival is its place by arrival (1 first).
	Arrival       int   `json:"arrival"`
	CallbackLogID int64 `json:"callback_log_id"`
}

// MoneyPayment is one payment reported for the order.
type MoneyPayment struct {
	PaymentNo     string `json:"payment_no"`
	Status        string `json:"status"`
	Paying        bool   `json:"paying"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	CallbackLogID int64  `json:"callback_log_id"`
	LastLogID     int64  `json:"last_log_id"`
}

// MoneyRefund is one refund.
type MoneyRefund struct {
	RefundNo      string  `json:"refund_no"`
	PaymentNo     *string `json:"payment_no"`
	Status        string  `json:"status"`
	Amount        int64   `json:"amount"`
	Currency      string  `json:"currency"`
	Reason        *string `json:"reason"`
	CallbackLogID int64   `json:"callback_log_id"`
	LastLogID     int64   `json:"last_log_id"`
}

// MoneyDispute is one dispute.
type MoneyDispute struct {
	DisputeID     string  `json:"dispute_id"`
	PaymentNo     *string `json:"payment_no"`
	Status        string  `json:"status"`
	Amount        int64   `json:"amount"`
	Currency      string  `json:"currency"`
	CallbackLogID int64   `json:"callback_log_id"`
	LastLogID     int64   `json:"last_log_id"`
}

// moneyOf reads the money history of the order l is about; a failure to
// read it is logged and leaves it out, never the page.
func (s *Service) moneyOf(ctx context.Context, l *callback.Log) *MoneyHistory {
	var h *payment.History
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		h, err = payment.HistoryOf(ctx, tx.Gorm(), l)
		return err
	})
	if err != nil {
		if s.Log != nil {
			s.Log.WarnContext(ctx, "admin: could not read an order's money history", "log_id", l.ID, "error", err)
		}
		return nil
	}
	if h == nil {
		return nil
	}
	o, st := h.Order, h.State
	m := &MoneyHistory{Order: MoneyOrder{OrderCode: o.OrderCode, Amount: o.Amount, Currency: o.Currency, PaymentStatus: o.PaymentStatus,
		PaymentNo: o.PaymentNo, PaidAt: o.PaidAt, RefundedAmount: o.RefundedAmount, ChargebackAmount: o.ChargebackAmount,
		DisputeStatus: o.DisputeStatus, WarehouseCancelled: o.WarehouseCancelled},
		State:    MoneyState{Left: st.Left, Excess: st.Excess, Shipped: st.Shipped, Cancelled: st.Cancelled, Closed: st.Closed},
		Facts:    []MoneyFact{},
		Payments: []MoneyPayment{}, Refunds: []MoneyRefund{}, Disputes: []MoneyDispute{}}
	// The latest status of each payment, refund and dispute: its fact
	// taken last by the fold.
	at := map[string]int{}
	for i, f := range h.Facts {
		m.Facts = append(m.Facts, MoneyFact{Kind: f.Kind, Ref: f.Ref, PaymentNo: f.PaymentNo, Status: f.Status, Amount: f.Amount,
			Currency: f.Currency, Reason: f.Reason, OccurredAt: f.OccurredAt, InitiatedAt: f.InitiatedAt, ReceivedAt: f.ReceivedAt,
			Arrival: h.Arrival[i], CallbackLogID: f.CallbackLogID})
		var paymentNo *string
		if f.PaymentNo != "" {
			no := f.PaymentNo
			paymentNo = &no
		}
		k := f.Kind + "\x00" + f.Ref
		j, seen := at[k]
		switch f.Kind {
		case payment.KindPayment:
			if !seen {
				at[k] = len(m.Payments)
				m.Payments = append(m.Payments, MoneyPayment{PaymentNo: f.Ref, Paying: f.Ref == st.PaymentNo, CallbackLogID: f.CallbackLogID})
				j = at[k]
			}
			p := &m.Payments[j]
			p.Status, p.LastLogID = f.Status, max(p.LastLogID, f.CallbackLogID)
			p.CallbackLogID = min(p.CallbackLogID, f.CallbackLogID)
			if f.Status == payment.PaymentSucceeded || p.Amount == 0 {
				p.Amount, p.Currency = f.Amount, f.Currency
			}
		case payment.KindRefund:
			if !seen {
				at[k] = len(m.Refunds)
				m.Refunds = append(m.Refunds, MoneyRefund{RefundNo: f.Ref, PaymentNo: paymentNo, CallbackLogID: f.CallbackLogID})
				j = at[k]
			}
			r := &m.Refunds[j]
			r.Status, r.Reason, r.LastLogID = f.Status, f.Reason, max(r.LastLogID, f.CallbackLogID)
			r.CallbackLogID = min(r.CallbackLogID, f.CallbackLogID)
			if f.Status == payment.RefundSucceeded || r.Amount == 0 {
				r.Amount, r.Currency = f.Amount, f.Currency
			}
		case payment.KindDispute:
			if !seen {
				at[k] = len(m.Disputes)
				m.Disputes = append(m.Disputes, MoneyDispute{DisputeID: f.Ref, PaymentNo: paymentNo, CallbackLogID: f.CallbackLogID})
				j = at[k]
			}
			d := &m.Disputes[j]
			d.Status, d.Amount, d.Currency, d.LastLogID = f.Status, f.Amount, f.Currency, max(d.LastLogID, f.CallbackLogID)
			d.CallbackLogID = min(d.CallbackLogID, f.CallbackLogID)
		}
	}
	return m
}

// maxReplaysShown bounds the replays a callback's detail lists.
const maxReplaysShown = 50

// Get returns one callback with its payload, headers, attempts and the
// outbox messages it produced (store.ErrNotFound when there is none).
func (s *Service) Get(ctx context.Context, id int64) (*Detail, error) {
	l, err := s.Store.GetCallback(ctx, id)
	if err != nil {
		return nil, err
	}
	shown := maskPayload(l.Payload, s.Masks[l.Source])
	d := &Detail{Summary: callback.Summarize(l), Payload: string(shown), Headers: map[string]string{}}
	if json.Valid(shown) {
		d.PayloadJSON = json.RawMessage(shown)
	}
	if json.Valid(l.Normalized) {
		d.Normalized = l.Normalized
	}
	if len(l.Headers) > 0 {
		_ = json.Unmarshal(l.Headers, &d.Headers)
	}
	if d.Attempts, err = s.Store.Attempts(ctx, id); err != nil {
		return nil, err
	}
	if d.Lineage, err = s.Store.OutboxOf(ctx, id); err != nil {
		return nil, err
	}
	if d.Replays, err = s.Store.AuditOf(ctx, strconv.FormatInt(id, 10), []string{"replay"}, maxReplaysShown); err != nil {
		return nil, err
	}
	d.Money = s.moneyOf(ctx, l)
	return d, nil
}

// Record puts an action without its own transaction (a login) into the
// audit trail; a failure to write it is logged, not fatal.
// reason may be empty.
func (s *Service) Record(ctx context.Context, actor, action, target, reason string) {
	e := store.AuditEntry{Actor: actor, Action: action, Target: target}
	if reason != "" {
		e.Reason = &reason
	}
	if err := s.Store.InsertAuditTx(ctx, nil, e, nil); err != nil {
		s.Log.WarnContext(ctx, "admin: could not write the audit trail", "action", action, "actor", actor, "error", err)
	}
}

// Audit returns the newest entries.
func (s *Service) Audit(ctx context.Context, limit int) ([]store.AuditEntry, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	return s.Store.Audit(ctx, limit)
}
