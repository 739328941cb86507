package platform_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/reconcile"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// The differential of the two ways a payment's state reaches callgate: the
// platform's notification (POST /callbacks/<source>) and the answer to
// callgate's query (reconciliation). One generated transaction is told
// both ways, about two orders alike; both must leave the same rows (the
// callback's status and note, the order, its payments, its notifications),
// and both what the reference model says. The model is built from the
// tables, not from the code: docs/platforms/wechatpay.md and alipay.md
// ("What callgate reads"), docs/guarantees.md (the decision table, an
// UNPAID order's column) and docs/reconciliation.md (an answer that says
// nothing happened, or paid and refunded by how much it does not say,
// stores nothing).
//
// CALLGATE_RECONCILE_DIFF_SEED=<n> replays one seed.

// reconcileDiffSeed is the sequence make test runs.
const reconcileDiffSeed = 20261204

// reconcileDiffCases is how many generated transactions a run tells both
// ways, after one per row of the model (everyRow).
const reconcileDiffCases = 40

func reconcileDiffRand(t *testing.T) *rand.Rand {
	seed := uint64(reconcileDiffSeed)
	if s := os.Getenv("CALLGATE_RECONCILE_DIFF_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "CALLGATE_RECONCILE_DIFF_SEED")
		seed = n
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d: CALLGATE_RECONCILE_DIFF_SEED=%d replays it", seed, seed)
		}
	})
	return rand.New(rand.NewPCG(seed, 0))
}

// told is a transaction as the reference model sees it, whatever the
// platform's words for it.
type told struct {
	state    string // the platform's word
	kind     string // "paid", "failed", "closed", "nothing" (no change), "refunded" (paid and refunded since)
	hasTxn   bool
	amount   string // "same", "other", "none" (missing), "bad" (not a number)
	currency string // "order", "none" (missing: the preset's), "other" (a known one), "unknown"
}

// pick returns one of choices, weighted.
func pick[T any](r *rand.Rand, choices ...weighted[T]) T {
	total := 0
	for _, c := range choices {
		total += c.w
	}
	n := r.IntN(total)
	for _, c := range choices {
		if n < c.w {
			return c.v
		}
		n -= c.w
	}
	panic("unreachable")
}

type weighted[T any] struct {
	v T
	w int
}

func w[T any](v T, weight int) weighted[T] { return weighted[T]{v, weight} }

// diffOutcome is what a transaction left, the way a user reads it: the
// order, its payments, its callback (status and note), its notifications.
// Words that name the path (the order code, the transaction number, the
// event id) are replaced by ORDER, TXN and EVENT.
type diffOutcome struct {
	Stored        bool
	Status        string
	Note          string
	OrderStatus   string
	PaymentNo     string
	PaidAt        bool
	Payments      []string
	Notifications []string
}

// modelOutcome is what the tables say an UNPAID order of 100 (CNY) gets
// from c told one way; fromAnswer: told as a query answer.
func modelOutcome(c told, fromAnswer bool) (stored bool, status, orderStatus string, routing []string) {
	// docs/reconciliation.md: an answer that says nothing happened
	// (NOTPAY, WAIT_BUYER_PAY) stores nothing; one that says paid and
	// refunded since, without how much, stores nothing either (on-call
	// decides). A notification is stored whatever it says.
	if fromAnswer && (c.kind == "nothing" || c.kind == "refunded") {
		return false, "", payment.OrderUnpaid, nil
	}
	unreadable := false
	switch c.kind {
	case "paid":
		// docs/platforms (the "stored FAILED" rows): a payment names its
		// transaction, its amount and a currency the preset knows; a
		// failed one its amount and currency (without a transaction it is
		// named by the notification's id).
		unreadable = !c.hasTxn || c.amount == "none" || c.amount == "bad" || c.currency == "unknown"
	case "failed":
		unreadable = c.amount == "none" || c.amount == "bad" || c.currency == "unknown"
	}
	if unreadable {
		return true, string(callback.StatusFailed), payment.OrderUnpaid, nil
	}
	// docs/guarantees.md, an UNPAID order's column.
	switch c.kind {
	case "paid":
		switch {
		case c.currency == "other":
			return true, string(callback.StatusSuccess), payment.OrderUnpaid, []string{payment.RoutingPaymentException + " currency_mismatch"}
		case c.amount == "other":
			return true, string(callback.StatusSuccess), payment.OrderUnpaid, []string{payment.RoutingPaymentException + " amount_mismatch"}
		}
		return true, string(callback.StatusSuccess), payment.OrderPaid, []string{payment.RoutingWarehouseShip, payment.RoutingPointsAdd}
	case "failed":
		return true, string(callback.StatusSuccess), payment.OrderPaymentFailed, nil
	case "closed":
		return true, string(callback.StatusSuccess), payment.OrderClosed, []string{payment.RoutingOrderClosed}
	}
	// Neither a payment, a failure nor a close: no effect.
	return true, string(callback.StatusSuccess), payment.OrderUnpaid, nil
}

// everyRow is one case per row of the model, for kinds (state names the
// platform's word for a kind): a run starts with them, so that every row
// is told both ways whatever the seed; generated cases follow.
func everyRow(state func(kind string) string, kinds ...string) []told {
	var out []told
	for _, k := range kinds {
		base := told{kind: k, state: state(k), amount: "same", currency: "order"}
		with := func(f func(*told)) told { c := base; f(&c); return c }
		switch k {
		case "paid":
			out = append(out, with(func(c *told) { c.hasTxn = true }),
				with(func(c *told) { c.hasTxn, c.amount = true, "other" }),
				with(func(c *told) { c.hasTxn, c.currency = true, "other" }),
				with(func(c *told) { c.hasTxn, c.currency = true, "none" }),
				with(func(c *told) { c.hasTxn, c.currency = true, "unknown" }),
				with(func(c *told) { c.hasTxn, c.amount = true, "none" }),
				with(func(c *told) { c.hasTxn, c.amount = true, "bad" }),
				base) // no transaction number
		case "failed":
			out = append(out, with(func(c *told) { c.hasTxn = true }), base,
				with(func(c *told) { c.hasTxn, c.amount = true, "none" }))
		default:
			out = append(out, base)
		}
	}
	return out
}

// diffAmount is the order's amount in the platforms' words (100 fen).
const diffAmount = 100

// outcomeOf reads what order's transaction left: its one callback of
// source (none: Stored false), once settled.
func outcomeOf(t *testing.T, r *reconciled, order, txn, eventID string) diffOutcome {
	t.Helper()
	norm := strings.NewReplacer(order, "ORDER", txn, "TXN", eventID, "EVENT").Replace
	var out diffOutcome
	var ids []int64
	require.NoError(t, r.St.DB.Table("callback_log").Where("source = ? AND business_key = ?", r.source, order).Pluck("id", &ids).Error)
	require.LessOrEqual(t, len(ids), 1, "callbacks of %s", order)
	if len(ids) == 1 {
		out.Stored = true
		var l *callback.Log
		require.Eventually(t, func() bool {
			var err error
			l, err = r.St.GetCallback(t.Context(), ids[0])
			return err == nil && l.Status.Terminal()
		}, 20*time.Second, 20*time.Millisecond, "callback of %s settles", order)
		out.Status = string(l.Status)
		if l.Status == callback.StatusFailed && l.LastError != nil {
			out.Note = norm(*l.LastError)
		} else {
			out.Note = norm(r.LastNote(t, l.ID))
		}
		for _, n := range r.St.Notifications(t, l.ID) {
			out.Notifications = append(out.Notifications, norm(n))
		}
	}
	o := r.Order(t, order)
	out.OrderStatus = o.PaymentStatus
	if o.PaymentNo != nil {
		out.PaymentNo = norm(*o.PaymentNo)
	}
	out.PaidAt = o.PaidAt != nil
	var rows []struct {
		PaymentNo, Status, Currency string
		Paying                      bool
		Amount                      int64
	}
	require.NoError(t, r.St.DB.Raw(`SELECT f.ref AS payment_no, f.status, f.currency, COALESCE(o.payment_no = f.ref, 0) AS paying, f.amount
		FROM payment_facts f JOIN orders o ON o.order_code = f.order_code WHERE f.order_code = ? AND f.kind = 'payment' ORDER BY f.ref, f.status`, order).Scan(&rows).Error)
	for _, p := range rows {
		out.Payments = append(out.Payments, fmt.Sprintf("%s %s %d %s paying=%v", norm(p.PaymentNo), p.Status, p.Amount, p.Currency, p.Paying))
	}
	return out
}

// routingOf is each notification's routing key, with the exception's kind.
func routingOf(notes []string) []string {
	var out []string
	for _, n := range notes {
		key, payload, _ := strings.Cut(n, " ")
		if key == payment.RoutingPaymentException {
			var p struct{ Kind string }
			_ = json.Unmarshal([]byte(payload), &p)
			key += " " + p.Kind
		}
		out = append(out, key)
	}
	return out
}

// checkBothWays compares the two outcomes with each other and with the
// model.
func checkBothWays(t *testing.T, i int, c told, notified, answered diffOutcome) {
	t.Helper()
	desc := fmt.Sprintf("case %d (%+v)", i, c)
	for _, way := range []struct {
		name       string
		got        diffOutcome
		fromAnswer bool
	}{{"notification", notified, false}, {"query answer", answered, true}} {
		stored, status, orderStatus, routing := modelOutcome(c, way.fromAnswer)
		require.Equal(t, stored, way.got.Stored, "%s, %s: stored", desc, way.name)
		require.Equal(t, orderStatus, way.got.OrderStatus, "%s, %s: the order (note %q)", desc, way.name, way.got.Note)
		if stored {
			require.Equal(t, status, way.got.Status, "%s, %s: the callback (note %q)", desc, way.name, way.got.Note)
		}
		require.Equal(t, routing, routingOf(way.got.Notifications), "%s, %s: notifications", desc, way.name)
	}
	if answered.Stored {
		// Told both ways: the same rows, word for word.
		if d := cmp.Diff(notified, answered); d != "" {
			t.Fatalf("%s: the notification and the query answer differ (-notification +answer):\n%s", desc, d)
		}
	}
}

// checkAll waits for each case's query and compares what the two ways
// left: case i's orders are <prefix>-<i>-N (notified, event id
// notifiedID(i)) and <prefix>-<i>-Q (asked), their transaction numbers
// txn(i, "N") and txn(i, "Q").
func checkAll(t *testing.T, r *reconciled, cases []told, prefix string, txn func(int, string) string, notifiedID func(int) string) {
	t.Helper()
	for i, c := range cases {
		n, q := fmt.Sprintf("%s-%02d-N", prefix, i), fmt.Sprintf("%s-%02d-Q", prefix, i)
		st := r.state(t, q, func(s store.ReconcileState) bool { return s.Queries >= 1 })
		if stored, _, _, _ := modelOutcome(c, true); stored {
			require.Equal(t, reconcile.OutcomeFound, st.LastOutcome, "case %d: %s", i, st.LastError)
		}
		queryID := "query:" + q + ":" + c.state
		if c.hasTxn {
			queryID += ":" + txn(i, "Q")
		}
		notified := outcomeOf(t, r, n, txn(i, "N"), notifiedID(i))
		answered := outcomeOf(t, r, q, txn(i, "Q"), queryID)
		checkBothWays(t, i, c, notified, answered)
	}
}

// TestWeChatPayNotificationAndAnswerAgree: generated transactions, each
// notified about one order and answered to a query about another.
func TestWeChatPayNotificationAndAnswerAgree(t *testing.T) {
	r := reconcileDiffRand(t)
	wx := startWeChatReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}})
	cases := everyRow(func(k string) string {
		return map[string]string{"paid": "SUCCESS", "failed": "PAYERROR", "closed": "CLOSED", "nothing": "NOTPAY", "refunded": "REFUND"}[k]
	}, "paid", "failed", "closed", "nothing", "refunded")
	for range reconcileDiffCases {
		c := told{state: pick(r, w("SUCCESS", 8), w("CLOSED", 2), w("REVOKED", 2), w("PAYERROR", 2), w("NOTPAY", 2), w("USERPAYING", 1), w("REFUND", 1))}
		c.kind = map[string]string{"SUCCESS": "paid", "CLOSED": "closed", "REVOKED": "failed", "PAYERROR": "failed", "REFUND": "refunded"}[c.state]
		if c.kind == "" {
			c.kind = "nothing"
		}
		c.hasTxn = r.IntN(10) > 0
		c.amount = pick(r, w("same", 12), w("other", 2), w("none", 1), w("bad", 1))
		c.currency = pick(r, w("order", 10), w("none", 3), w("other", 2), w("unknown", 1))
		if c.kind == "closed" || c.kind == "nothing" || c.kind == "refunded" {
			// WeChat Pay's closed and unpaid transactions carry no
			// transaction number, and a CLOSED one's amount is not read
			// (docs/platforms/wechatpay.md).
			c.hasTxn, c.amount, c.currency = false, "same", "order"
		}
		cases = append(cases, c)
	}
	// wechatTxn is the transaction JSON both ways carry (the simulator
	// adds mchid and out_trade_no to its answer).
	wechatTxn := func(c told, order, txn string) map[string]any {
		a := wechatAnswer("", c.state, 0)
		if c.hasTxn {
			a["transaction_id"], a["success_time"] = txn, "2026-12-04T10:34:56+08:00"
		}
		amount := a["amount"].(map[string]any)
		switch c.amount {
		case "same":
			amount["total"] = diffAmount
		case "other":
			amount["total"] = diffAmount + 1
		case "none":
			delete(amount, "total")
		case "bad":
			amount["total"] = "1,00"
		}
		switch c.currency {
		case "none":
			delete(amount, "currency")
		case "other":
			amount["currency"] = "USD"
		case "unknown":
			amount["currency"] = "ZZZ"
		}
		a["mchid"], a["out_trade_no"] = wechatMchID, order
		return a
	}
	for i, c := range cases {
		n, q := fmt.Sprintf("WXD-%02d-N", i), fmt.Sprintf("WXD-%02d-Q", i)
		wx.order(t, n, diffAmount, 0) // not due: only notified
		body, err := json.Marshal(wechatTxn(c, n, wechatDiffTxn(i, "N")))
		require.NoError(t, err)
		note := wechatNotification(fmt.Sprintf("EV-WXD-%02d", i), "TRANSACTION.SUCCESS", "transaction", wechatAPIv3Key, string(body))
		a := wx.Post(t, "wechatpay", note, wechatSigned(testenv.RSAKeys()[0], wechatPubKeyID, note, time.Now()))
		require.Equal(t, http.StatusNoContent, a.Status, "case %d: %s", i, a.Body)
		wx.sim.SetTransaction(q, wechatTxn(c, q, wechatDiffTxn(i, "Q")))
		wx.order(t, q, diffAmount, 2*time.Minute) // due: asked
	}
	checkAll(t, wx.reconciled, cases, "WXD", wechatDiffTxn, func(i int) string { return fmt.Sprintf("EV-WXD-%02d", i) })
	t.Logf("%d transactions told both ways", len(cases))
}

// wechatDiffTxn is case i's transaction number on the way named way.
func wechatDiffTxn(i int, way string) string {
	return fmt.Sprintf("420000000120261204%08d%s", i, way)
}

// TestAlipayNotificationAndAnswerAgree: generated trades, each notified
// about one order (trade_status_sync) and answered to alipay.trade.query
// about another.
func TestAlipayNotificationAndAnswerAgree(t *testing.T) {
	r := reconcileDiffRand(t)
	ali := startAlipayReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}}, testenv.RSAKeys()[1])
	cases := everyRow(func(k string) string {
		return map[string]string{"paid": "TRADE_SUCCESS", "closed": "TRADE_CLOSED", "nothing": "WAIT_BUYER_PAY"}[k]
	}, "paid", "closed", "nothing")
	for range reconcileDiffCases {
		// TRADE_CLOSED here is a trade closed unpaid: one refunded in full
		// since is a refund in a notification (refund_fee) and an answer
		// that does not say how much (the refunded outcome, tested in
		// alipay_reconcile_test.go).
		c := told{state: pick(r, w("TRADE_SUCCESS", 6), w("TRADE_FINISHED", 2), w("TRADE_CLOSED", 2), w("WAIT_BUYER_PAY", 2))}
		c.kind = map[string]string{"TRADE_SUCCESS": "paid", "TRADE_FINISHED": "paid", "TRADE_CLOSED": "closed", "WAIT_BUYER_PAY": "nothing"}[c.state]
		c.hasTxn = r.IntN(10) > 0
		c.amount = pick(r, w("same", 12), w("other", 2), w("none", 1), w("bad", 1))
		c.currency = pick(r, w("order", 10), w("none", 3), w("other", 2), w("unknown", 1))
		if c.kind != "paid" {
			c.hasTxn, c.amount, c.currency = false, "same", "order"
		}
		cases = append(cases, c)
	}
	// trade is the trade's fields both ways carry, in Alipay's words.
	trade := func(c told, txn string) map[string]string {
		f := map[string]string{"trade_status": c.state}
		if c.hasTxn {
			f["trade_no"] = txn
		}
		switch c.amount {
		case "same":
			f["total_amount"] = "1.00"
		case "other":
			f["total_amount"] = "1.01"
		case "bad":
			f["total_amount"] = "1,00"
		}
		switch c.currency {
		case "order":
			f["trans_currency"] = "CNY"
		case "other":
			f["trans_currency"] = "USD"
		case "unknown":
			f["trans_currency"] = "ZZZ"
		}
		if c.kind == "paid" {
			f["gmt_payment"] = "2026-12-04 10:34:56"
		}
		return f
	}
	for i, c := range cases {
		n, q := fmt.Sprintf("ALD-%02d-N", i), fmt.Sprintf("ALD-%02d-Q", i)
		ali.order(t, n, diffAmount, 0) // not due: only notified
		f := trade(c, alipayDiffTrade(i, "N"))
		// The official example's other fields, its trade's replaced.
		kv := []string{"out_trade_no", n, "notify_id", fmt.Sprintf("ali-diff-%02d", i), "trade_status", c.state, "refund_fee", "0.00"}
		params := alipayExample(kv...)
		params = slices.DeleteFunc(params, func(e [2]string) bool {
			switch e[0] {
			case "trade_no", "total_amount", "gmt_payment", "gmt_close", "trans_currency":
				return true
			}
			return false
		})
		for _, k := range []string{"trade_no", "total_amount", "trans_currency", "gmt_payment"} {
			if v, ok := f[k]; ok {
				params = append(params, [2]string{k, v})
			}
		}
		body := params.signed(testenv.RSAKeys()[0])
		requireAlipayAnswer(t, ali.Post(t, "alipay", body, alipayHeader()), http.StatusOK, "success", fmt.Sprintf("case %d", i))
		answer := trade(c, alipayDiffTrade(i, "Q"))
		if paid, ok := answer["gmt_payment"]; ok {
			delete(answer, "gmt_payment")
			answer["send_pay_date"] = paid
		}
		ali.sim.SetTrade(q, answer)
		ali.order(t, q, diffAmount, 2*time.Minute) // due: asked
	}
	checkAll(t, ali.reconciled, cases, "ALD", alipayDiffTrade, func(i int) string { return fmt.Sprintf("ali-diff-%02d", i) })
	t.Logf("%d trades told both ways", len(cases))
}

// alipayDiffTrade is case i's trade number on the way named way.
func alipayDiffTrade(i int, way string) string {
	return fmt.Sprintf("202612042200140%08d%s", i, way)
}
