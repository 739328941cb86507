package platform_test

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/kinds"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/reconcile"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/testenv"
	"callgate/internal/worker"
	"callgate/test/platformsim"
)

// The merchant API certificate's serial the tests sign queries as.
const wechatMchSerial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"

// wechatReconcile is a gateway and a worker with the wechatpay source
// reconciling against a WeChat Pay simulator: the merchant's API key is
// test key 1, WeChat Pay's key test key 0 (wechatKeyConfig's).
type wechatReconcile struct {
	*reconciled
	sim *platformsim.WeChatPay
}

func startWeChatReconcile(t *testing.T, rc reconcile.Config) *wechatReconcile {
	t.Helper()
	keys := testenv.RSAKeys()
	sim := platformsim.StartWeChatPay(t, wechatMchID, wechatMchSerial, &keys[1].PublicKey, keys[0], wechatPubKeyID)
	keyFile := filepath.Join(t.TempDir(), "apiclient_key.pem")
	der, err := x509.MarshalPKCS8PrivateKey(keys[1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	r := startReconciled(t, "wechatpay", "CNY", wechatKeyConfig(), rc,
		func(c *source.Reconcile) { c.PrivateKeyFile, c.Serial, c.APIBase = keyFile, wechatMchSerial, sim.URL })
	return &wechatReconcile{reconciled: r, sim: sim}
}

// wechatAnswer is a query answer's transaction, as WeChat Pay documents it.
func wechatAnswer(txn, state string, total int64) map[string]any {
	a := map[string]any{"appid": "wxd678efh567hg6787", "trade_type": "JSAPI", "trade_state": state, "trade_state_desc": state,
		"bank_type": "CMC", "attach": "", "payer": map[string]any{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},
		"amount": map[string]any{"total": total, "payer_total": total, "currency": "CNY", "payer_currency": "CNY"}}
	if txn != "" {
		a["transaction_id"] = txn
		a["success_time"] = "2026-12-03T10:34:56+08:00"
	}
	return a
}

// TestReconcileFindsALostWeChatPayment: a payment whose notification never
// came is found by asking WeChat Pay; the answer is a callback of the
// wechatpay source (origin reconcile, the raw answer kept) that pays the
// order by the same rules; the notification arriving late is then a
// payment already applied: the order is paid once, one order.paid.
func TestReconcileFindsALostWeChatPayment(t *testing.T) {
	w := startWeChatReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}})
	const order, txn = "WX-RC-1", "4200000001202612031234567890"
	w.sim.SetTransaction(order, wechatAnswer(txn, "SUCCESS", 100))
	w.order(t, order, 100, 2*time.Minute)
	w.order(t, "WX-RC-NEW", 100, 0) // not due: created less than `after` ago

	w.waitStatus(t, order, payment.OrderPaid)
	st := w.state(t, order, func(s store.ReconcileState) bool { return s.FoundLogID != 0 })
	require.Equal(t, reconcile.OutcomeFound, st.LastOutcome)
	row := w.St.WaitStatus(t, st.FoundLogID, callback.StatusSuccess)
	require.Equal(t, "wechatpay", row.Source)
	require.Equal(t, callback.OriginReconcile, row.Origin)
	require.Equal(t, "query:"+order+":SUCCESS:"+txn, row.EventID)
	require.Contains(t, string(row.Payload), `"transaction_id":"`+txn+`"`, "the raw answer is kept")
	require.Contains(t, string(row.Headers), "Wechatpay-Signature")
	require.Contains(t, string(row.Headers), `"Content-Type":"application/json`, "the headers a notification keeps")

	// The notification of the same payment, late: stored, answered 204,
	// and applied once already.
	body := wechatPaid("EV-LATE-1", order, txn, "SUCCESS", 100)
	a := w.Post(t, "wechatpay", body, wechatSigned(testenv.RSAKeys()[0], wechatPubKeyID, body, time.Now()))
	require.Equal(t, http.StatusNoContent, a.Status, "%s", a.Body)
	late := w.Settled(t, "wechatpay", "EV-LATE-1")
	require.Equal(t, callback.OriginNotify, late.Origin)
	require.Contains(t, w.LastNote(t, late.ID), "already")
	require.Equal(t, []string{payment.RoutingWarehouseShip}, shipped(t, w, order), "shipped once")

	// Paid: never asked again; the order created just now not yet.
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, 1, w.sim.Asked(order))
	require.Zero(t, w.sim.Asked("WX-RC-NEW"))
}

// shipped lists the warehouse.ship notifications written for order.
func shipped(t *testing.T, w *wechatReconcile, order string) []string {
	t.Helper()
	var keys []string
	require.NoError(t, w.St.DB.Table("outbox").Where("routing_key = ? AND payload LIKE ?", payment.RoutingWarehouseShip, "%"+order+"%").
		Pluck("routing_key", &keys).Error)
	return keys
}

// TestReconcileWeChatPayClosedAndUnpaid: CLOSED closes the order through
// the same rules; NOTPAY and an order WeChat Pay does not know store
// nothing and are asked again on the backoff.
func TestReconcileWeChatPayClosedAndUnpaid(t *testing.T) {
	w := startWeChatReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}})
	w.sim.SetTransaction("WX-RC-CLOSED", wechatAnswer("", "CLOSED", 100))
	w.sim.SetTransaction("WX-RC-NOTPAY", wechatAnswer("", "NOTPAY", 100))
	w.order(t, "WX-RC-CLOSED", 100, 2*time.Minute)
	w.order(t, "WX-RC-NOTPAY", 100, 2*time.Minute)
	w.order(t, "WX-RC-UNKNOWN", 100, 2*time.Minute)

	w.waitStatus(t, "WX-RC-CLOSED", payment.OrderClosed)
	for _, order := range []string{"WX-RC-NOTPAY", "WX-RC-UNKNOWN"} {
		st := w.state(t, order, func(s store.ReconcileState) bool { return s.Queries == 1 })
		require.Equal(t, reconcile.OutcomeNothing, st.LastOutcome, order)
		require.Zero(t, st.FoundLogID, order)
		require.WithinDuration(t, time.Now().Add(time.Hour), st.NextAt, time.Minute, "asked again after the backoff: %s", order)
		require.Equal(t, payment.OrderUnpaid, w.Order(t, order).PaymentStatus)
	}
	require.Equal(t, 1, w.Callbacks(t, "wechatpay"), "only the closing answer is stored")
}

// TestReconcileWeChatPayAnswersThatChangeNothing: an answer signed by
// another key, and WeChat Pay unreachable, apply nothing: no callback, the
// order UNPAID, the outcome recorded and counted, asked again on the
// backoff; once WeChat Pay answers properly the payment is found.
func TestReconcileWeChatPayAnswersThatChangeNothing(t *testing.T) {
	w := startWeChatReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{300 * time.Millisecond}})
	const order = "WX-RC-BAD"
	w.sim.SetTransaction(order, wechatAnswer("4200000001202612030000000001", "SUCCESS", 100))
	w.sim.SignWith(testenv.RSAKeys()[2])
	w.order(t, order, 100, 2*time.Minute)
	st := w.state(t, order, func(s store.ReconcileState) bool { return s.Queries >= 1 })
	require.Equal(t, reconcile.OutcomeBadSignature, st.LastOutcome, st.LastError)
	require.Zero(t, w.Callbacks(t, "wechatpay"), "a forged answer stores nothing")
	require.Equal(t, payment.OrderUnpaid, w.Order(t, order).PaymentStatus)

	w.sim.SignWith(nil)
	w.sim.Down(true)
	st = w.state(t, order, func(s store.ReconcileState) bool { return s.LastOutcome == reconcile.OutcomeUnreachable })
	require.Zero(t, w.Callbacks(t, "wechatpay"))
	require.NotEmpty(t, st.LastError)

	w.sim.Down(false)
	w.waitStatus(t, order, payment.OrderPaid)
	require.Zero(t, w.sim.Refusals(), "every query was signed as WeChat Pay checks it")
}

// TestReconcileWeChatPayGivesUpAndKeepsTheRate: an order still unpaid at
// give_up is unresolved (listed, never asked again); thirty due orders are
// asked at no more than rate a second.
func TestReconcileWeChatPayGivesUpAndKeepsTheRate(t *testing.T) {
	const rate = 10
	w := startWeChatReconcile(t, reconcile.Config{After: time.Minute, GiveUp: time.Hour, Rate: rate, Backoff: []time.Duration{time.Hour}})
	w.order(t, "WX-RC-OLD", 100, 2*time.Hour) // its next query would be past give_up
	st := w.state(t, "WX-RC-OLD", func(s store.ReconcileState) bool { return s.GaveUpAt != nil })
	require.Equal(t, 1, st.Queries)
	unresolved, err := w.St.Unresolved(t.Context(), 10)
	require.NoError(t, err)
	require.Len(t, unresolved, 1)
	require.Equal(t, "WX-RC-OLD", unresolved[0].Order)

	const n = 30
	for i := range n {
		w.order(t, "WX-RC-RATE-"+string(rune('A'+i)), 100, 2*time.Minute)
	}
	require.Eventually(t, func() bool { return len(w.sim.Times()) >= n+1 }, 30*time.Second, 50*time.Millisecond)
	times := w.sim.Times()
	for i := range times {
		in := 0
		for _, at := range times[i:] {
			if at.Sub(times[i]) < time.Second {
				in++
			}
		}
		require.LessOrEqual(t, in, rate+1, "queries in the second after %s", times[i])
	}
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 1, w.sim.Asked("WX-RC-OLD"), "never asked again once given up")
	st = w.state(t, "WX-RC-RATE-A", func(s store.ReconcileState) bool { return s.Queries == 1 })
	require.Nil(t, st.GaveUpAt, "asked once more at give_up before it is unresolved")
	require.WithinDuration(t, time.Now().Add(time.Hour-2*time.Minute), st.NextAt, time.Minute, "the last query is at give_up")
}

// TestReconcileTwoWorkersAskOnce: with two workers, each order is asked
// once per step (the job runs on the scheduler's lease holder only).
func TestReconcileTwoWorkersAskOnce(t *testing.T) {
	w := startWeChatReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}})
	second := *w.Cfg
	second.Worker.ID = "second-worker" // a process of its own would have its own id
	testenv.StartWorker(t, &second, worker.Options{})
	orders := []string{"WX-RC-2W-1", "WX-RC-2W-2", "WX-RC-2W-3"}
	for _, o := range orders {
		w.order(t, o, 100, 2*time.Minute)
	}
	for _, o := range orders {
		w.state(t, o, func(s store.ReconcileState) bool { return s.Queries >= 1 })
	}
	time.Sleep(time.Second) // several runs of the job
	for _, o := range orders {
		require.Equal(t, 1, w.sim.Asked(o), o)
	}
}

// TestWorkerReconcileOrder: `worker reconcile --order CODE` asks now, not
// due or not, prints what WeChat Pay said and what was stored, and the
// workers process it; an order without a payment source, or no --order,
// is refused with the reason.
func TestWorkerReconcileOrder(t *testing.T) {
	w := startWeChatReconcile(t, reconcile.Config{After: time.Hour, Backoff: []time.Duration{time.Hour}})
	const order, txn = "WX-RC-CLI", "4200000001202612039999999999"
	w.sim.SetTransaction(order, wechatAnswer(txn, "SUCCESS", 100))
	w.order(t, order, 100, time.Minute) // not due for an hour
	run := func(args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := worker.ReconcileCommand(t.Context(), w.Cfg.WorkerSettings(), kinds.Names(), args, &out, &errOut, testenv.Logger(t, w.Cfg))
		return code, out.String(), errOut.String()
	}
	code, out, errOut := run("--order", order)
	require.Zero(t, code, "%s%s", out, errOut)
	require.Contains(t, out, "order WX-RC-CLI, payment source wechatpay, query 1: found")
	require.Contains(t, out, `"transaction_id":"`+txn+`"`, "the platform's answer")
	require.Regexp(t, `stored as callback \d+ \(origin reconcile\)`, out)
	w.waitStatus(t, order, payment.OrderPaid)

	code, out, _ = run("--order", order)
	require.Zero(t, code)
	require.Contains(t, out, "already stored as callback", "asked again: the same answer, stored once")

	w.CreateOrder(t, "WX-RC-NOSRC", 100, "CNY")
	code, _, errOut = run("--order", "WX-RC-NOSRC")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "has no payment_source")
	code, _, errOut = run()
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "usage: worker [-config PATH] reconcile --order CODE")
}

// TestReconcileWeChatPayRefundedMismatchAndForgedNotFound: a REFUND answer
// (paid, refunded since, by how much unsaid) applies nothing and is its own
// outcome; a found payment that leaves the order UNPAID (an amount that
// does not match) is unresolved at give_up like one never found; an
// ORDER_NOT_EXIST answer is believed only signed.
func TestReconcileWeChatPayRefundedMismatchAndForgedNotFound(t *testing.T) {
	w := startWeChatReconcile(t, reconcile.Config{After: time.Minute, GiveUp: time.Hour, Backoff: []time.Duration{time.Hour}})
	w.sim.SetTransaction("WX-RC-REFUND", wechatAnswer("4200000001202612030000000002", "REFUND", 100))
	w.sim.SetTransaction("WX-RC-MISMATCH", wechatAnswer("4200000001202612030000000003", "SUCCESS", 99))
	w.order(t, "WX-RC-REFUND", 100, 2*time.Minute)
	w.order(t, "WX-RC-MISMATCH", 100, 2*time.Hour) // this query is at give_up

	st := w.state(t, "WX-RC-REFUND", func(s store.ReconcileState) bool { return s.Queries == 1 })
	require.Equal(t, reconcile.OutcomeRefunded, st.LastOutcome)
	require.Zero(t, st.FoundLogID, "nothing applied")
	require.Equal(t, payment.OrderUnpaid, w.Order(t, "WX-RC-REFUND").PaymentStatus)

	st = w.state(t, "WX-RC-MISMATCH", func(s store.ReconcileState) bool { return s.Queries == 1 })
	require.Equal(t, reconcile.OutcomeFound, st.LastOutcome)
	require.NotNil(t, st.GaveUpAt, "found, but the order is still unpaid at give_up: unresolved")
	w.St.WaitStatus(t, st.FoundLogID, callback.StatusSuccess)
	require.Equal(t, payment.OrderUnpaid, w.Order(t, "WX-RC-MISMATCH").PaymentStatus, "an amount that does not match pays nothing")
	unresolved, err := w.St.Unresolved(t.Context(), 10)
	require.NoError(t, err)
	require.Len(t, unresolved, 1)
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 1, w.sim.Asked("WX-RC-MISMATCH"), "not asked again")

	w.sim.SignWith(testenv.RSAKeys()[2])
	w.order(t, "WX-RC-FORGED-404", 100, 2*time.Minute)
	st = w.state(t, "WX-RC-FORGED-404", func(s store.ReconcileState) bool { return s.Queries == 1 })
	require.Equal(t, reconcile.OutcomeBadSignature, st.LastOutcome, "a forged ORDER_NOT_EXIST: %s", st.LastError)
}

// TestWeChatPayAnswerIsBound: an answer is read only when it is this
// merchant's (mchid, the source's appid) and about the order asked.
func TestWeChatPayAnswerIsBound(t *testing.T) {
	cfg := wechatKeyConfig()
	cfg.AppID = "wxd678efh567hg6787"
	p, err := platform.New("wechatpay-v3", cfg)
	require.NoError(t, err)
	ans := p.(platform.Answerer)
	read := func(edit func(map[string]any)) error {
		a := wechatAnswer("4200000001202612030000000004", "SUCCESS", 100)
		a["mchid"], a["out_trade_no"] = wechatMchID, "WX-BOUND"
		edit(a)
		b, err := json.Marshal(a)
		require.NoError(t, err)
		cbs, err := ans.ReadAnswer("WX-BOUND", b)
		if err == nil {
			require.Len(t, cbs, 1)
		}
		return err
	}
	require.NoError(t, read(func(map[string]any) {}))
	require.ErrorIs(t, read(func(a map[string]any) { a["mchid"] = "1900000109" }), platform.ErrForeignMerchant)
	require.ErrorIs(t, read(func(a map[string]any) { a["appid"] = "wx0000000000000000" }), platform.ErrForeignMerchant)
	require.ErrorIs(t, read(func(a map[string]any) { delete(a, "appid") }), platform.ErrForeignMerchant, "the source names an appid")
	require.ErrorContains(t, read(func(a map[string]any) { a["out_trade_no"] = "WX-OTHER" }), "not \"WX-BOUND\"")
	require.ErrorIs(t, read(func(a map[string]any) { a["trade_state"] = "REFUND" }), platform.ErrRefundedAnswer)
}
