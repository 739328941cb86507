package platform_test

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/reconcile"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/testenv"
	"callgate/test/platformsim"
)

// alipayReconcile is a gateway and a worker with the alipay source
// reconciling against an Alipay gateway simulator: Alipay's key is test
// key 0 (the notifications' too), the app's key test key 1.
type alipayReconcile struct {
	*reconciled
	sim *platformsim.Alipay
}

// startAlipayReconcile: appKey is the key the app signs its queries with
// (the simulator knows test key 1's public key as the app's).
func startAlipayReconcile(t *testing.T, rc reconcile.Config, appKey *rsa.PrivateKey) *alipayReconcile {
	t.Helper()
	keys := testenv.RSAKeys()
	sim := platformsim.StartAlipay(t, alipayAppID, &keys[1].PublicKey, keys[0])
	keyFile := filepath.Join(t.TempDir(), "app_private_key.pem")
	// PKCS#1, as Alipay's key tool writes a "PKCS1" key.
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(appKey)}), 0o600))
	r := startReconciled(t, "alipay", "CNY", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(keys[0])}}, AppID: alipayAppID}, rc,
		func(c *source.Reconcile) { c.PrivateKeyFile, c.APIBase = keyFile, sim.URL })
	return &alipayReconcile{reconciled: r, sim: sim}
}

// TestReconcileFindsALostAlipayPayment: a payment whose notification never
// came is found by alipay.trade.query; the answer is a callback of the
// alipay source (origin reconcile, the raw answer kept) that pays the
// order by the same rules as a notification; Alipay's notification of the
// same trade, late, finds the payment applied: paid once, shipped once.
func TestReconcileFindsALostAlipayPayment(t *testing.T) {
	a := startAlipayReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{300 * time.Millisecond}}, testenv.RSAKeys()[1])
	const order, tradeNo = "ALI-RC-1", "2026120322001400000000000001"
	// Alipay may send "/" escaped while its sign is over the text
	// unescaped, as its own SDKs allow for.
	a.sim.EscapeSlashes(true)
	a.sim.SetTrade(order, map[string]string{"trade_no": tradeNo, "trade_status": "TRADE_SUCCESS", "total_amount": "2.00",
		"send_pay_date": "2026-12-03 10:34:56", "store_name": "上海/徐汇店"})
	a.order(t, order, 200, 2*time.Minute)

	o := a.waitStatus(t, order, payment.OrderPaid)
	require.Equal(t, tradeNo, *o.PaymentNo)
	st := a.state(t, order, func(s store.ReconcileState) bool { return s.FoundLogID != 0 })
	require.Equal(t, reconcile.OutcomeFound, st.LastOutcome)
	row := a.St.WaitStatus(t, st.FoundLogID, callback.StatusSuccess)
	require.Equal(t, "alipay", row.Source)
	require.Equal(t, callback.OriginReconcile, row.Origin)
	require.Equal(t, "query:"+order+":TRADE_SUCCESS:"+tradeNo, row.EventID)
	require.Contains(t, string(row.Payload), `"alipay_trade_query_response"`, "the raw answer is kept")
	require.Contains(t, string(row.Payload), `"sign":"`)
	require.Contains(t, string(row.Payload), `上海\/徐汇店`, "stored as sent")
	require.Equal(t, 1, queries(t, a.metrics, "alipay", reconcile.OutcomeFound), "counted")
	require.Equal(t, 1, found(t, a.metrics, "alipay", "paid"))

	late := alipayExample("out_trade_no", order, "notify_id", "ali-late-1", "trade_no", tradeNo, "total_amount", "2.00").signed(testenv.RSAKeys()[0])
	requireAlipayAnswer(t, a.Post(t, "alipay", late, alipayHeader()), http.StatusOK, "success", "the late notification")
	n := a.Settled(t, "alipay", "ali-late-1")
	require.Equal(t, callback.OriginNotify, n.Origin)
	require.Contains(t, a.LastNote(t, n.ID), "already")
	var ships int64
	require.NoError(t, a.St.DB.Table("outbox").Where("routing_key = ? AND payload LIKE ?", payment.RoutingWarehouseShip, "%"+order+"%").Count(&ships).Error)
	require.EqualValues(t, 1, ships, "shipped once")
	require.Zero(t, a.sim.Refusals(), "every query was signed as Alipay checks it")
	time.Sleep(time.Second) // three backoff steps
	require.Equal(t, 1, a.sim.Asked(order), "paid: never asked again")
}

// TestReconcileAlipayAnswers: TRADE_CLOSED never paid closes the order;
// WAIT_BUYER_PAY and a trade Alipay does not know store nothing; closed
// after a payment (refunded in full, by how much the answer does not say)
// applies nothing and is counted refunded.
func TestReconcileAlipayAnswers(t *testing.T) {
	a := startAlipayReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}}, testenv.RSAKeys()[1])
	a.sim.SetTrade("ALI-RC-CLOSED", map[string]string{"trade_no": "2026120322001400000000000002", "trade_status": "TRADE_CLOSED", "total_amount": "1.00"})
	a.sim.SetTrade("ALI-RC-WAIT", map[string]string{"trade_no": "2026120322001400000000000003", "trade_status": "WAIT_BUYER_PAY", "total_amount": "1.00"})
	a.sim.SetTrade("ALI-RC-REFUNDED", map[string]string{"trade_no": "2026120322001400000000000004", "trade_status": "TRADE_CLOSED",
		"total_amount": "1.00", "send_pay_date": "2026-12-03 10:00:00"})
	for _, o := range []string{"ALI-RC-CLOSED", "ALI-RC-WAIT", "ALI-RC-UNKNOWN", "ALI-RC-REFUNDED"} {
		a.order(t, o, 100, 2*time.Minute)
	}
	a.waitStatus(t, "ALI-RC-CLOSED", payment.OrderClosed)
	for _, o := range []string{"ALI-RC-WAIT", "ALI-RC-UNKNOWN"} {
		st := a.state(t, o, func(s store.ReconcileState) bool { return s.Queries == 1 })
		require.Equal(t, reconcile.OutcomeNothing, st.LastOutcome, o)
		require.WithinDuration(t, time.Now().Add(time.Hour), st.NextAt, time.Minute, "asked again after the backoff: %s", o)
	}
	st := a.state(t, "ALI-RC-REFUNDED", func(s store.ReconcileState) bool { return s.Queries == 1 })
	require.Equal(t, reconcile.OutcomeRefunded, st.LastOutcome)
	require.Equal(t, payment.OrderUnpaid, a.Order(t, "ALI-RC-REFUNDED").PaymentStatus)
	require.Equal(t, 1, a.Callbacks(t, "alipay"), "only the closing answer is stored")
}

// TestReconcileAlipayAnswersThatChangeNothing: an answer signed by another
// key, Alipay unreachable, and a query Alipay refuses (signed with a key
// that is not the app's) apply nothing: no callback, the order UNPAID, the
// outcome recorded, asked again; once Alipay answers properly the payment
// is found.
func TestReconcileAlipayAnswersThatChangeNothing(t *testing.T) {
	const order = "ALI-RC-BAD"
	trade := map[string]string{"trade_no": "2026120322001400000000000005", "trade_status": "TRADE_SUCCESS", "total_amount": "1.00"}

	refused := startAlipayReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}}, testenv.RSAKeys()[2])
	refused.sim.SetTrade(order, trade)
	refused.order(t, order, 100, 2*time.Minute)
	st := refused.state(t, order, func(s store.ReconcileState) bool { return s.Queries >= 1 })
	require.Equal(t, reconcile.OutcomeRefused, st.LastOutcome, st.LastError)
	require.Contains(t, st.LastError, "isv.invalid-signature")
	require.Equal(t, 1, refused.sim.Refusals())
	require.Zero(t, refused.Callbacks(t, "alipay"))

	a := startAlipayReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{300 * time.Millisecond}}, testenv.RSAKeys()[1])
	a.sim.SetTrade(order, trade)
	a.sim.SignWith(testenv.RSAKeys()[2])
	a.order(t, order, 100, 2*time.Minute)
	st = a.state(t, order, func(s store.ReconcileState) bool { return s.Queries >= 1 })
	require.Equal(t, reconcile.OutcomeBadSignature, st.LastOutcome, st.LastError)
	require.Zero(t, a.Callbacks(t, "alipay"), "a forged answer stores nothing")
	require.Equal(t, payment.OrderUnpaid, a.Order(t, order).PaymentStatus)

	a.sim.SignWith(nil)
	a.sim.Unsigned(true)
	st = a.state(t, order, func(s store.ReconcileState) bool { return s.Queries >= 2 })
	require.Equal(t, reconcile.OutcomeBadSignature, st.LastOutcome, "an unsigned 10000 is believed in nothing: %s", st.LastError)
	a.order(t, "ALI-RC-UNSIGNED-NONE", 100, 2*time.Minute) // unknown to Alipay: an unsigned 40004
	st = a.state(t, "ALI-RC-UNSIGNED-NONE", func(s store.ReconcileState) bool { return s.Queries >= 1 })
	require.Equal(t, reconcile.OutcomeBadSignature, st.LastOutcome, "an unsigned TRADE_NOT_EXIST is not believed: %s", st.LastError)
	require.Zero(t, a.Callbacks(t, "alipay"))
	require.Positive(t, queries(t, a.metrics, "alipay", reconcile.OutcomeBadSignature), "counted")
	a.sim.Unsigned(false)
	a.sim.Down(true)
	st = a.state(t, order, func(s store.ReconcileState) bool { return s.LastOutcome == reconcile.OutcomeUnreachable })
	require.Zero(t, a.Callbacks(t, "alipay"))
	require.NotEmpty(t, st.LastError)

	a.sim.Down(false)
	a.waitStatus(t, order, payment.OrderPaid)
}

// TestAlipayAnswerIsBound: an answer is read only about the order asked,
// only with code 10000, and its sign covers the response object's exact
// text: one byte changed and it does not verify.
func TestAlipayAnswerIsBound(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p, err := platform.New("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	require.NoError(t, err)
	answers, verifier := p.(platform.Answerer), p.(platform.AnswerVerifier)
	content := `{"code":"10000","msg":"Success","out_trade_no":"ALI-B-1","trade_no":"T1","trade_status":"TRADE_SUCCESS","total_amount":"3.10"}`
	body := []byte(`{"alipay_trade_query_response":` + content + `,"sign":"` + testenv.SignSHA256WithRSA(k, []byte(content)) + `"}`)

	got, sign, err := platform.AlipaySignedAnswer(body)
	require.NoError(t, err)
	require.Equal(t, content, string(got), "what Alipay signed, byte for byte")
	require.NoError(t, verifier.VerifyAnswer("", string(got), sign))
	require.Error(t, verifier.VerifyAnswer("", string(got[:len(got)-5])+`"9"}`, sign), "a changed amount does not verify")
	require.Error(t, verifier.VerifyAnswer("", string(got), ""), "unsigned")

	cbs, err := answers.ReadAnswer("ALI-B-1", body)
	require.NoError(t, err)
	require.Len(t, cbs, 1)
	ev := cbs[0].Event.(callback.PaymentEvent)
	require.Equal(t, int64(310), ev.Amount)
	require.Equal(t, "T1", ev.PaymentNo)
	_, err = answers.ReadAnswer("ALI-B-2", body)
	require.ErrorContains(t, err, "not \"ALI-B-2\"", "an answer about another order")
	notFound := []byte(`{"alipay_trade_query_response":{"code":"40004","sub_code":"ACQ.TRADE_NOT_EXIST","out_trade_no":"ALI-B-1"},"sign":"x"}`)
	_, err = answers.ReadAnswer("ALI-B-1", notFound)
	require.ErrorContains(t, err, "40004")
	// A refund_fee smuggled into a query answer steers nothing: answers
	// never carry one, and only the notification's fields are read.
	withFee := []byte(`{"alipay_trade_query_response":{"code":"10000","out_trade_no":"ALI-B-1","trade_no":"T1","trade_status":"TRADE_SUCCESS","total_amount":"3.10","refund_fee":"3.10"}}`)
	cbs, err = answers.ReadAnswer("ALI-B-1", withFee)
	require.NoError(t, err)
	require.Equal(t, callback.PaymentSuccess, cbs[0].Event.(callback.PaymentEvent).Status)
}

// TestReconcileAlipayAnswerIsBoundByTheOrder: an answer paying less than
// the order, or in another currency, applies nothing (the same rules as a
// notification: the order stays UNPAID); one whose amount does not read
// fails with that reason, read again as an answer, not as a notification.
func TestReconcileAlipayAnswerIsBoundByTheOrder(t *testing.T) {
	a := startAlipayReconcile(t, reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}}, testenv.RSAKeys()[1])
	a.sim.SetTrade("ALI-RC-SHORT", map[string]string{"trade_no": "2026120322001400000000000011", "trade_status": "TRADE_SUCCESS", "total_amount": "1.00"})
	a.sim.SetTrade("ALI-RC-USD", map[string]string{"trade_no": "2026120322001400000000000012", "trade_status": "TRADE_SUCCESS", "total_amount": "2.00", "trans_currency": "USD"})
	a.sim.SetTrade("ALI-RC-ABC", map[string]string{"trade_no": "2026120322001400000000000013", "trade_status": "TRADE_SUCCESS", "total_amount": "abc"})
	for _, o := range []string{"ALI-RC-SHORT", "ALI-RC-USD", "ALI-RC-ABC"} {
		a.order(t, o, 200, 2*time.Minute)
	}
	for o, want := range map[string]string{"ALI-RC-SHORT": "amount", "ALI-RC-USD": "currency", "ALI-RC-ABC": "total_amount"} {
		st := a.state(t, o, func(s store.ReconcileState) bool { return s.FoundLogID != 0 })
		var row *callback.Log
		require.Eventually(t, func() bool {
			r, err := a.St.GetCallback(t.Context(), st.FoundLogID)
			row = r
			return err == nil && r.Status != callback.StatusPending
		}, 20*time.Second, 20*time.Millisecond, o)
		require.Equal(t, payment.OrderUnpaid, a.Order(t, o).PaymentStatus, o)
		why := a.LastNote(t, row.ID)
		if row.LastError != nil {
			why += " " + *row.LastError
		}
		require.Contains(t, why, want, "%s: %s (%s)", o, why, row.Status)
		if o == "ALI-RC-ABC" {
			require.Equal(t, callback.StatusFailed, row.Status)
			require.NotContains(t, why, "Content-Type", "read again as an answer, not as a notification")
		}
	}
}
