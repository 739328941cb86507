package platform_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// The lifecycle tests send each platform's own documented samples of what
// happens to a payment after it is paid (testdata/lifecycle, sources in
// testdata/lifecycle/SOURCES.md) through the real gateway and worker, and
// check what a user relies on: the order, the payments, refunds and
// disputes rows, each callback's status and attempt note, and every
// notification written, in order, against the downstream contract. The
// expectations are docs/guarantees.md's rule table ("A payment's life: the
// rule table") applied to what each preset's doc comment says the sample means.
//
// Only the fields that bind a notification to a merchant are changed in a
// sample, where the test's source binds another merchant than the sample
// names (and the sample is re-signed); the documented amounts, ids,
// statuses and field shapes are kept.

// lcSample reads a lifecycle sample.
func lcSample(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "lifecycle", name))
	require.NoError(t, err)
	return b
}

// lcFlow is one platform's source and the notifications asserted so far.
type lcFlow struct {
	p      *testenv.Platform
	source string
	status int    // the platform's accepted answer
	answer string // its body, when it is fixed ("" when not checked)
	seen   int    // notifications asserted so far
}

// step posts body, requires the platform's accepted answer, waits for the
// callback eventID to settle SUCCESS in one attempt, and requires its
// attempt's note and its notifications ("routing.key payload", in order).
func (f *lcFlow) step(t *testing.T, body []byte, h http.Header, eventID, note string, msgs ...string) *callback.Log {
	t.Helper()
	a := f.p.Post(t, f.source, body, h)
	require.Equal(t, f.status, a.Status, "%s: %s", eventID, a.Body)
	if f.answer != "" {
		require.Equal(t, f.answer, string(a.Body), eventID)
	}
	row := f.p.Settled(t, f.source, eventID)
	require.Equal(t, 1, row.Attempts, "%s: one attempt", eventID)
	require.Equal(t, note, f.p.LastNote(t, row.ID), "%s: the attempt's note", eventID)
	if msgs == nil {
		msgs = []string{}
	}
	require.Equal(t, msgs, lcNotifications(t, f.p, row.ID), "%s: its notifications", eventID)
	f.seen += len(msgs)
	return row
}

// allNotified requires that the notifications asserted are all the outbox
// holds: no callback wrote one that was not looked at.
func (f *lcFlow) allNotified(t *testing.T) {
	t.Helper()
	var n int64
	require.NoError(t, f.p.St.DB.Table("outbox").Count(&n).Error)
	require.EqualValues(t, f.seen, n, "every notification written was asserted")
}

// lcNotifications is what callback id wrote to the outbox, "routing.key
// payload" in order, each payload checked against the downstream contract.
func lcNotifications(t *testing.T, p *testenv.Platform, id int64) []string {
	t.Helper()
	return p.St.Notifications(t, id)
}

// lcOrder is what a user reads of an orders row.
type lcOrder struct {
	Status    string
	PaymentNo string
	Refunded  int64
	Dispute   string
}

func lcOrderOf(t *testing.T, p *testenv.Platform, code string) lcOrder {
	t.Helper()
	o := p.Order(t, code)
	r := lcOrder{Status: o.PaymentStatus, Refunded: o.RefundedAmount}
	if o.PaymentNo != nil {
		r.PaymentNo = *o.PaymentNo
	}
	if o.DisputeStatus != nil {
		r.Dispute = *o.DisputeStatus
	}
	return r
}

// lcFact is a payment_facts row (without its times).
type lcFact struct {
	Order     string `gorm:"column:order_code"`
	Kind      string `gorm:"column:kind"`
	Ref       string `gorm:"column:ref"`
	PaymentNo string `gorm:"column:payment_no"`
	Status    string `gorm:"column:status"`
	Amount    int64  `gorm:"column:amount"`
	Currency  string `gorm:"column:currency"`
	Reason    string `gorm:"column:reason"`
	Log       int64  `gorm:"column:callback_log_id"`
}

// lcFactsOf are the facts of kind, in arrival order.
func lcFactsOf(t *testing.T, p *testenv.Platform, kind string) []lcFact {
	t.Helper()
	var rows []lcFact
	require.NoError(t, p.St.DB.Raw(`SELECT order_code, kind, ref, payment_no, status, amount, currency, COALESCE(reason, '') AS reason,
		callback_log_id FROM payment_facts WHERE kind = ? ORDER BY order_code, ref, callback_log_id, fact_key`, kind).Scan(&rows).Error)
	return rows
}

// lcPayment is a payment as its facts say: its latest status (these
// tests send each payment's facts in the order they happened), its
// amount (its success's), whether it paid the order, and the callbacks
// that reported it first and last.
type lcPayment struct {
	Order, PaymentNo, Status string
	Paying                   bool
	Amount                   int64
	Currency                 string
	Log, Last                int64
}

func lcPayments(t *testing.T, p *testenv.Platform) []lcPayment {
	t.Helper()
	var out []lcPayment
	for _, f := range lcFactsOf(t, p, "payment") {
		if n := len(out); n > 0 && out[n-1].Order == f.Order && out[n-1].PaymentNo == f.Ref {
			r := &out[n-1]
			r.Status, r.Last = f.Status, f.Log
			if f.Status == "SUCCEEDED" {
				r.Amount, r.Currency = f.Amount, f.Currency
			}
			continue
		}
		o := p.Order(t, f.Order)
		out = append(out, lcPayment{Order: f.Order, PaymentNo: f.Ref, Status: f.Status, Paying: o.PaymentNo != nil && *o.PaymentNo == f.Ref,
			Amount: f.Amount, Currency: f.Currency, Log: f.Log, Last: f.Log})
	}
	return out
}

// lcRefund is a refund as its facts say (as lcPayment).
type lcRefund struct {
	Order, RefundNo, PaymentNo, Status string
	Amount                             int64
	Currency, Reason                   string
	Log, Last                          int64
}

func lcRefunds(t *testing.T, p *testenv.Platform) []lcRefund {
	t.Helper()
	var out []lcRefund
	for _, f := range lcFactsOf(t, p, "refund") {
		if n := len(out); n > 0 && out[n-1].Order == f.Order && out[n-1].RefundNo == f.Ref {
			r := &out[n-1]
			r.Status, r.Reason, r.Last = f.Status, f.Reason, f.Log
			if f.Status == "SUCCEEDED" {
				r.Amount, r.Currency = f.Amount, f.Currency
			}
			continue
		}
		out = append(out, lcRefund{Order: f.Order, RefundNo: f.Ref, PaymentNo: f.PaymentNo, Status: f.Status, Amount: f.Amount,
			Currency: f.Currency, Reason: f.Reason, Log: f.Log, Last: f.Log})
	}
	return out
}

// lcTotals are the running totals recorded, in arrival order.
func lcTotals(t *testing.T, p *testenv.Platform) []lcFact { return lcFactsOf(t, p, "total") }

// lcDispute is a dispute as its facts say (as lcPayment).
type lcDispute struct {
	Order, DisputeID, PaymentNo, Status string
	Amount                              int64
	Currency                            string
	Log, Last                           int64
}

func lcDisputes(t *testing.T, p *testenv.Platform) []lcDispute {
	t.Helper()
	var out []lcDispute
	for _, f := range lcFactsOf(t, p, "dispute") {
		if n := len(out); n > 0 && out[n-1].Order == f.Order && out[n-1].DisputeID == f.Ref {
			r := &out[n-1]
			r.Status, r.Amount, r.Currency, r.Last = f.Status, f.Amount, f.Currency, f.Log
			continue
		}
		out = append(out, lcDispute{Order: f.Order, DisputeID: f.Ref, PaymentNo: f.PaymentNo, Status: f.Status, Amount: f.Amount,
			Currency: f.Currency, Log: f.Log, Last: f.Log})
	}
	return out
}

// The notifications, as the payment handler writes them (keys sorted).

func lcShip(order string) string { return `warehouse.ship {"orderCode":` + lcQ(order) + `}` }

func lcCancel(order string) string { return `warehouse.cancel {"orderCode":` + lcQ(order) + `}` }

func lcPoints(key, order string, amount int64, currency string) string {
	return key + ` {"amount":` + lcN(amount) + `,"currency":` + lcQ(currency) + `,"orderCode":` + lcQ(order) + `,"userId":7}`
}

func lcRefunded(order, refundNo string, amount int64, currency string, total int64, full bool) string {
	f := "false"
	if full {
		f = "true"
	}
	return `order.refunded {"amount":` + lcN(amount) + `,"currency":` + lcQ(currency) + `,"full":` + f + `,"orderCode":` + lcQ(order) +
		`,"refundNo":` + lcQ(refundNo) + `,"refundedTotal":` + lcN(total) + `}`
}

func lcRefundFailed(order, refundNo string, amount int64, currency, reason string, uncounted, total int64) string {
	return `order.refund_failed {"amount":` + lcN(amount) + `,"currency":` + lcQ(currency) + `,"orderCode":` + lcQ(order) +
		`,"reason":` + lcQ(reason) + `,"refundNo":` + lcQ(refundNo) + `,"refundedTotal":` + lcN(total) + `,"uncounted":` + lcN(uncounted) + `}`
}

func lcClosed(order, reason, status string, total int64) string {
	return `order.closed {"orderCode":` + lcQ(order) + `,"paymentStatus":` + lcQ(status) + `,"reason":` + lcQ(reason) +
		`,"refundedTotal":` + lcN(total) + `}`
}

func lcDisputeMsg(order, id, status string, amount int64, currency string) string {
	return `order.dispute {"amount":` + lcN(amount) + `,"currency":` + lcQ(currency) + `,"disputeId":` + lcQ(id) +
		`,"orderCode":` + lcQ(order) + `,"status":` + lcQ(status) + `}`
}

// lcQ is s as a JSON string, as encoding/json writes it.
func lcQ(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func lcN(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// ---------------------------------------------------------------- Alipay

// lcAlipayForm reads an Alipay sample (one decoded key=value a line) as the
// parameters the test helpers sign.
func lcAlipayForm(t *testing.T, name string, kv ...string) alipayParams {
	t.Helper()
	var p alipayParams
	for _, line := range strings.Split(strings.TrimRight(string(lcSample(t, name)), "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, "%s: %q", name, line)
		p = append(p, [2]string{k, v})
	}
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for j := range p {
			if p[j][0] == kv[i] {
				p[j][1], found = kv[i+1], true
			}
		}
		require.True(t, found, "%s has %s", name, kv[i])
	}
	return p
}

// TestAlipayLifecycleSamples: Alipay's trade notifications after the
// payment. The samples carry the official example's app_id (and
// auth_app_id), which is the test source's: nothing is changed but the
// signature, which the test makes with its own key. refund_fee is the
// trade's running total (SOURCES.md): a partial refund counts it, the full
// refund (TRADE_CLOSED with refund_fee) only what it adds, a resend
// nothing; TRADE_CLOSED without refund_fee closes an unpaid trade.
func TestAlipayLifecycleSamples(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p := testenv.StartPlatform(t, "alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	f := &lcFlow{p: p, source: "alipay", status: http.StatusOK, answer: "success"}
	const (
		unpaid   = "0719141034-6419"
		refundNo = "0719141034-6418-RF1"
	)
	p.CreateOrder(t, alipayOrder, 200, "CNY")
	p.CreateOrder(t, unpaid, 200, "CNY")

	// The unpaid trade that timed out: closed.
	closed := f.step(t, lcAlipayForm(t, "alipay_trade_closed_unpaid.form").signed(k), alipayHeader(), "2016071900222142544037031466902318", "",
		lcClosed(unpaid, "alipay TRADE_CLOSED: the trade closed unpaid", "CLOSED", 0))
	require.Equal(t, lcOrder{Status: "CLOSED"}, lcOrderOf(t, p, unpaid))
	require.Equal(t, unpaid, closed.BusinessKey)

	// The official example pays the trade the refunds are of.
	paid := f.step(t, alipayExample().signed(k), alipayHeader(), alipayNotify, "",
		lcShip(alipayOrder), lcPoints("points.add", alipayOrder, 200, "CNY"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: alipayTradeNo}, lcOrderOf(t, p, alipayOrder))

	// TRADE_SUCCESS with refund_fee 0.50: a partial refund of 50 fen.
	partial := lcAlipayForm(t, "alipay_trade_success_partial_refund.form")
	first := f.step(t, partial.signed(k), alipayHeader(), "2016071900222144530037031466911207", "",
		lcRefunded(alipayOrder, refundNo, 50, "CNY", 50, false), lcPoints("points.deduct", alipayOrder, 50, "CNY"))
	require.Equal(t, lcOrder{Status: "PARTIALLY_REFUNDED", PaymentNo: alipayTradeNo, Refunded: 50}, lcOrderOf(t, p, alipayOrder))
	// A running total is a fact of its own, dated by gmt_refund (China time).
	require.Equal(t, []lcFact{{Order: alipayOrder, Kind: "total", Ref: refundNo, PaymentNo: alipayTradeNo, Status: "SUCCEEDED", Amount: 50,
		Currency: "CNY", Log: first.ID}}, lcTotals(t, p))
	require.Empty(t, lcRefunds(t, p))
	sameTotal := "already recorded: total/" + alipayTradeNo + "/" + refundNo + "/50/20160719T064530.512000Z"

	// Alipay resends it under a new notify_id (a new callback): the
	// running total adds nothing.
	resend := lcAlipayForm(t, "alipay_trade_success_partial_refund.form", "notify_id", "2016071900222144530037031466911208",
		"notify_time", "2016-07-19 14:49:31")
	f.step(t, resend.signed(k), alipayHeader(), "2016071900222144530037031466911208", sameTotal)
	require.Equal(t, lcOrder{Status: "PARTIALLY_REFUNDED", PaymentNo: alipayTradeNo, Refunded: 50}, lcOrderOf(t, p, alipayOrder))

	// TRADE_CLOSED with refund_fee 2.00 (= total_amount): the whole trade
	// is refunded. refund_fee is the running total, so it counts what it
	// adds, 150 fen, and the order is REFUNDED (docs/platforms/alipay.md: "the full
	// refund that closed the paid trade (REFUNDED, warehouse.cancel)"; the
	// rule table: a running total "counts what the total adds to
	// refunded_amount"). The sample's out_biz_no is the partial refund's.
	full := f.step(t, lcAlipayForm(t, "alipay_trade_closed_full_refund.form").signed(k), alipayHeader(), "2016071900222150211037031466925861", "",
		lcRefunded(alipayOrder, refundNo, 150, "CNY", 200, true), lcPoints("points.deduct", alipayOrder, 150, "CNY"), lcCancel(alipayOrder))
	require.Equal(t, lcOrder{Status: "REFUNDED", PaymentNo: alipayTradeNo, Refunded: 200}, lcOrderOf(t, p, alipayOrder))
	require.Equal(t, []lcFact{{Order: alipayOrder, Kind: "total", Ref: refundNo, PaymentNo: alipayTradeNo, Status: "SUCCEEDED", Amount: 50,
		Currency: "CNY", Log: first.ID}, {Order: alipayOrder, Kind: "total", Ref: refundNo, PaymentNo: alipayTradeNo, Status: "SUCCEEDED",
		Amount: 200, Currency: "CNY", Log: full.ID}}, lcTotals(t, p))

	// A late resend of the partial refund's notification changes nothing.
	late := lcAlipayForm(t, "alipay_trade_success_partial_refund.form", "notify_id", "2016071900222144530037031466911209",
		"notify_time", "2016-07-19 16:00:00")
	lateRow := f.step(t, late.signed(k), alipayHeader(), "2016071900222144530037031466911209", sameTotal)
	require.Equal(t, lcOrder{Status: "REFUNDED", PaymentNo: alipayTradeNo, Refunded: 200}, lcOrderOf(t, p, alipayOrder))
	require.Equal(t, alipayOrder, lateRow.BusinessKey)

	require.Equal(t, []lcPayment{{Order: alipayOrder, PaymentNo: alipayTradeNo, Status: "SUCCEEDED", Paying: true, Amount: 200, Currency: "CNY",
		Log: paid.ID, Last: paid.ID}}, lcPayments(t, p))
	require.Empty(t, lcDisputes(t, p))
	f.allNotified(t)
}

// ------------------------------------------------------------ WeChat Pay

// The WeChat Pay refund samples' order, payment and refund.
const (
	lcWeChatOrder    = "20150806125346"
	lcWeChatTxn      = "1008450740201411110005820873"
	lcWeChatRefundID = "50200207182018070300011301001"
	lcWeChatAbnormal = "wechat pay refund " + lcWeChatRefundID + " is ABNORMAL: the money could not reach the payer's account; " +
		"apply an abnormal refund in the merchant platform, whose REFUND.SUCCESS or REFUND.CLOSED is applied"
	lcWeChatClosed = "wechat pay REFUND.CLOSED: the refund was closed"
)

// lcWeChatResource is a documented decrypted refund resource with the
// test source's merchant: the samples are of mchid 1900000100, the test
// source takes wechatMchID. Nothing else changes (the documented spacing
// included).
func lcWeChatResource(t *testing.T, name string) []byte {
	t.Helper()
	b := lcSample(t, name)
	require.Contains(t, string(b), `"mchid": "1900000100"`)
	return bytes.Replace(b, []byte(`"mchid": "1900000100"`), []byte(`"mchid": "`+wechatMchID+`"`), 1)
}

// lcWeChatEnvelope is the documented refund envelope
// (wechatpay_refund_envelope.json) around plaintext, encrypted with the
// test's APIv3 key and the envelope's own associated_data (""), with the
// notification's id, event_type and summary.
func lcWeChatEnvelope(t *testing.T, id, eventType, summary string, plaintext []byte) []byte {
	t.Helper()
	var env map[string]any
	require.NoError(t, json.Unmarshal(lcSample(t, "wechatpay_refund_envelope.json"), &env))
	res := env["resource"].(map[string]any)
	ct, nonce := wechatEncrypt(wechatAPIv3Key, string(plaintext), res["associated_data"].(string))
	res["ciphertext"], res["nonce"] = ct, nonce
	env["id"], env["event_type"], env["summary"] = id, eventType, summary
	b, err := json.Marshal(env)
	require.NoError(t, err)
	return b
}

// TestWeChatPayEnvelopeSample: the documented envelope's ciphertext is the
// documented success resource, compact, under the key SOURCES.md names:
// what lcWeChatEnvelope re-encrypts is the sample itself.
func TestWeChatPayEnvelopeSample(t *testing.T) {
	var env struct {
		Resource struct {
			Ciphertext     string `json:"ciphertext"`
			AssociatedData string `json:"associated_data"`
			Nonce          string `json:"nonce"`
		} `json:"resource"`
	}
	require.NoError(t, json.Unmarshal(lcSample(t, "wechatpay_refund_envelope.json"), &env))
	aes, err := platform.NewAESGCM([]byte("callgateTestAPIv3Key000000000000"))
	require.NoError(t, err)
	plain, err := aes.Open(env.Resource.Nonce, env.Resource.AssociatedData, env.Resource.Ciphertext)
	require.NoError(t, err)
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, lcSample(t, "wechatpay_refund_success.json")))
	require.Equal(t, compact.String(), string(plain))
}

func lcWeChatSigned(body []byte) http.Header {
	return wechatSigned(testenv.RSAKeys()[0], wechatPubKeyID, body, time.Now())
}

// lcWeChatPay pays the refund samples' order with a TRANSACTION.SUCCESS of
// their transaction_id, and checks it.
func lcWeChatPay(t *testing.T, f *lcFlow, id string) *callback.Log {
	t.Helper()
	body := wechatPaid(id, lcWeChatOrder, lcWeChatTxn, "SUCCESS", 999)
	row := f.step(t, body, lcWeChatSigned(body), id, "", lcShip(lcWeChatOrder), lcPoints("points.add", lcWeChatOrder, 999, "CNY"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcWeChatTxn}, lcOrderOf(t, f.p, lcWeChatOrder))
	return row
}

// TestWeChatPayRefundSuccessSample: REFUND.SUCCESS of the documented
// refund (the whole 999 fen) refunds the order in full; WeChat Pay's resend
// is a duplicate; a transaction CLOSED (the query-order answer for a
// closed order, SOURCES.md) closes the unpaid order.
func TestWeChatPayRefundSuccessSample(t *testing.T) {
	p := testenv.StartPlatform(t, "wechatpay", wechatKeyConfig())
	f := &lcFlow{p: p, source: "wechatpay", status: http.StatusNoContent}
	const unpaid = "1217752501201407033233368018"
	p.CreateOrder(t, lcWeChatOrder, 999, "CNY")
	p.CreateOrder(t, unpaid, 100, "CNY")
	paid := lcWeChatPay(t, f, "EV-LC-PAY-1")

	// The documented envelope, id EV-2018022511223320873.
	body := lcWeChatEnvelope(t, "EV-2018022511223320873", "REFUND.SUCCESS", "退款成功", lcWeChatResource(t, "wechatpay_refund_success.json"))
	row := f.step(t, body, lcWeChatSigned(body), "EV-2018022511223320873", "",
		lcRefunded(lcWeChatOrder, lcWeChatRefundID, 999, "CNY", 999, true), lcPoints("points.deduct", lcWeChatOrder, 999, "CNY"), lcCancel(lcWeChatOrder))
	require.Equal(t, lcWeChatOrder, row.BusinessKey)
	require.Equal(t, lcOrder{Status: "REFUNDED", PaymentNo: lcWeChatTxn, Refunded: 999}, lcOrderOf(t, p, lcWeChatOrder))
	require.Equal(t, []lcRefund{{Order: lcWeChatOrder, RefundNo: lcWeChatRefundID, PaymentNo: lcWeChatTxn, Status: "SUCCEEDED", Amount: 999, Currency: "CNY", Log: row.ID, Last: row.ID}}, lcRefunds(t, p))

	a := p.Post(t, "wechatpay", body, lcWeChatSigned(body))
	require.Equal(t, http.StatusNoContent, a.Status, string(a.Body))
	require.Equal(t, 2, p.Callbacks(t, "wechatpay"), "WeChat Pay's resend is a duplicate")

	// The closed order's transaction, as documented (its mchid is the
	// test source's already).
	closedBody := wechatNotification("EV-LC-CLOSED", "TRANSACTION.SUCCESS", "transaction", wechatAPIv3Key,
		string(lcSample(t, "wechatpay_transaction_closed.json")))
	f.step(t, closedBody, lcWeChatSigned(closedBody), "EV-LC-CLOSED", "", lcClosed(unpaid, "wechat pay trade_state CLOSED", "CLOSED", 0))
	require.Equal(t, lcOrder{Status: "CLOSED"}, lcOrderOf(t, p, unpaid))

	require.Equal(t, []lcPayment{{Order: lcWeChatOrder, PaymentNo: lcWeChatTxn, Status: "SUCCEEDED", Paying: true, Amount: 999, Currency: "CNY",
		Log: paid.ID, Last: paid.ID}}, lcPayments(t, p))
	require.Empty(t, lcDisputes(t, p))
	f.allNotified(t)
}

// TestWeChatPayRefundAbnormalSample: REFUND.ABNORMAL is not final (the
// merchant hands the refund to WeChat Pay's abnormal-refund flow under the
// same refund_id): stored with a note, nothing recorded; the refund's
// REFUND.CLOSED after it fails it (recorded FAILED, order.refund_failed),
// and a REFUND.SUCCESS after the abnormal one would have counted it. The
// samples all name one refund, so this order is paid on a database of its
// own, where that refund never succeeded.
func TestWeChatPayRefundAbnormalSample(t *testing.T) {
	p := testenv.StartPlatform(t, "wechatpay", wechatKeyConfig())
	f := &lcFlow{p: p, source: "wechatpay", status: http.StatusNoContent}
	p.CreateOrder(t, lcWeChatOrder, 999, "CNY")
	lcWeChatPay(t, f, "EV-LC-PAY-2")

	// The documented envelope, with the abnormal refund's event_type and
	// summary and an id of its own.
	abnormal := lcWeChatEnvelope(t, "EV-2018022511223320874", "REFUND.ABNORMAL", "退款异常", lcWeChatResource(t, "wechatpay_refund_abnormal.json"))
	f.step(t, abnormal, lcWeChatSigned(abnormal), "EV-2018022511223320874", lcWeChatAbnormal)
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcWeChatTxn}, lcOrderOf(t, p, lcWeChatOrder), "the money is unchanged")
	require.Empty(t, lcRefunds(t, p), "an abnormal refund is not final: nothing is recorded")

	closed := lcWeChatEnvelope(t, "EV-2018022511223320875", "REFUND.CLOSED", "退款关闭", lcWeChatResource(t, "wechatpay_refund_closed.json"))
	row := f.step(t, closed, lcWeChatSigned(closed), "EV-2018022511223320875", "",
		lcRefundFailed(lcWeChatOrder, lcWeChatRefundID, 999, "CNY", lcWeChatClosed, 0, 0))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcWeChatTxn}, lcOrderOf(t, p, lcWeChatOrder))
	require.Equal(t, []lcRefund{{Order: lcWeChatOrder, RefundNo: lcWeChatRefundID, PaymentNo: lcWeChatTxn, Status: "FAILED", Amount: 999,
		Currency: "CNY", Reason: lcWeChatClosed, Log: row.ID, Last: row.ID}}, lcRefunds(t, p))
	f.allNotified(t)
}

// TestWeChatPayRefundBeforeItsPayment: the documented REFUND.SUCCESS that
// reaches callgate before its order's TRANSACTION.SUCCESS (answered 5xx
// and resent later, say) is recorded at once and changes nothing; the
// payment then pays the order, and the refund counts with it: shipped,
// refunded in full, cancelled, and the points never given.
func TestWeChatPayRefundBeforeItsPayment(t *testing.T) {
	p := testenv.StartPlatform(t, "wechatpay", wechatKeyConfig())
	f := &lcFlow{p: p, source: "wechatpay", status: http.StatusNoContent}
	p.CreateOrder(t, lcWeChatOrder, 999, "CNY")
	refund := lcWeChatEnvelope(t, "EV-2018022511223320873", "REFUND.SUCCESS", "退款成功", lcWeChatResource(t, "wechatpay_refund_success.json"))
	row := f.step(t, refund, lcWeChatSigned(refund), "EV-2018022511223320873", "recorded: the order's money is unchanged")
	require.Equal(t, 1, row.Attempts, "no wait")
	require.Equal(t, lcOrder{Status: "UNPAID"}, lcOrderOf(t, p, lcWeChatOrder))

	pay := wechatPaid("EV-LC-PAY-3", lcWeChatOrder, lcWeChatTxn, "SUCCESS", 999)
	paid := f.step(t, pay, lcWeChatSigned(pay), "EV-LC-PAY-3", "",
		lcShip(lcWeChatOrder), lcRefunded(lcWeChatOrder, lcWeChatRefundID, 999, "CNY", 999, true), lcCancel(lcWeChatOrder))
	require.Equal(t, lcOrder{Status: "REFUNDED", PaymentNo: lcWeChatTxn, Refunded: 999}, lcOrderOf(t, p, lcWeChatOrder))
	require.Equal(t, []lcRefund{{Order: lcWeChatOrder, RefundNo: lcWeChatRefundID, PaymentNo: lcWeChatTxn, Status: "SUCCEEDED", Amount: 999,
		Currency: "CNY", Log: row.ID, Last: row.ID}}, lcRefunds(t, p))
	require.NotZero(t, paid.ID)
	f.allNotified(t)
}

// ---------------------------------------------------------------- Stripe

// The Stripe samples' story (SOURCES.md): PaymentIntent pi_1Gszs... paid
// 1099 usd, refunded 1000 by re_1Nisp..., disputed (du_1MtJ..., 1000);
// PaymentIntent pi_3Mtw... (2000 usd) canceled. The samples are test-mode
// events of the platform's own account (livemode false, no account), as
// the test source takes them: nothing is changed. The order codes are the
// samples' metadata order_id values.
const (
	lcStripePI       = "pi_1GszsK2eZvKYlo2CfhZyoZLp"
	lcStripeRefund   = "re_1Nispe2eZvKYlo2Cd31jOCgZ"
	lcStripeDispute  = "du_1MtJUT2eZvKYlo2CNaw2HvEv"
	lcStripeCanceled = "pi_3MtwBwLkdIwHu7ix28a3tqPa"
	lcStripeOrder    = "6735"
	lcStripeUnpaid   = "6736"
)

func lcStripeSigned(body []byte) http.Header { return stripeSigned(body, stripeSecret, time.Now()) }

// lcStripeEventID is a sample's event id.
func lcStripeEventID(t *testing.T, body []byte) string {
	t.Helper()
	var ev struct{ ID string }
	require.NoError(t, json.Unmarshal(body, &ev))
	require.NotEmpty(t, ev.ID)
	return ev.ID
}

// lcStripeStep sends a sample by its file name.
func lcStripeStep(t *testing.T, f *lcFlow, name, note string, msgs ...string) *callback.Log {
	t.Helper()
	body := lcSample(t, name)
	return f.step(t, body, lcStripeSigned(body), lcStripeEventID(t, body), note, msgs...)
}

// TestStripeLifecycleSamples: a refund pending (no effect), then succeeded
// (counted), the Charge's running total covering it (no double count), the
// refund failed (uncounted), a dispute opened and lost; and a PaymentIntent
// whose payment failed (so callgate recorded it) canceled: found by the
// PaymentIntent the event names, a failed attempt again (one
// PaymentIntent is one attempt: the order may still be paid by another).
func TestStripeLifecycleSamples(t *testing.T) {
	p := testenv.StartPlatform(t, "stripe", stripeConfig(stripeSecret))
	f := &lcFlow{p: p, source: "stripe", status: http.StatusOK}
	p.CreateOrder(t, lcStripeOrder, 1099, "USD")
	p.CreateOrder(t, lcStripeUnpaid, 2000, "USD")
	pay := stripeEvent("evt_lc_paid", "payment_intent.succeeded", lcStripeOrder, lcStripePI, 1099)
	paid := f.step(t, pay, lcStripeSigned(pay), "evt_lc_paid", "", lcShip(lcStripeOrder), lcPoints("points.add", lcStripeOrder, 1099, "USD"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcStripePI}, lcOrderOf(t, p, lcStripeOrder))

	pending := lcStripeStep(t, f, "stripe_refund_created.json", "stripe refund "+lcStripeRefund+" is pending")
	require.Equal(t, lcStripePI, pending.BusinessKey, "a refund is keyed by its PaymentIntent")
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcStripePI}, lcOrderOf(t, p, lcStripeOrder))
	require.Empty(t, lcRefunds(t, p))

	succeeded := lcStripeStep(t, f, "stripe_refund_updated.json", "",
		lcRefunded(lcStripeOrder, lcStripeRefund, 1000, "USD", 1000, false), lcPoints("points.deduct", lcStripeOrder, 1000, "USD"))
	require.Equal(t, lcOrder{Status: "PARTIALLY_REFUNDED", PaymentNo: lcStripePI, Refunded: 1000}, lcOrderOf(t, p, lcStripeOrder))
	require.Equal(t, []lcRefund{{Order: lcStripeOrder, RefundNo: lcStripeRefund, PaymentNo: lcStripePI, Status: "SUCCEEDED", Amount: 1000, Currency: "USD", Log: succeeded.ID, Last: succeeded.ID}}, lcRefunds(t, p))

	// charge.refunded: amount_refunded 1000 is what the refund counted.
	lcStripeStep(t, f, "stripe_charge_refunded.json", "recorded: the order's money is unchanged")
	require.Equal(t, lcOrder{Status: "PARTIALLY_REFUNDED", PaymentNo: lcStripePI, Refunded: 1000}, lcOrderOf(t, p, lcStripeOrder))

	failed := lcStripeStep(t, f, "stripe_refund_failed.json", "",
		lcRefundFailed(lcStripeOrder, lcStripeRefund, 1000, "USD", "expired_or_canceled_card", 1000, 0), lcPoints("points.add", lcStripeOrder, 1000, "USD"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcStripePI}, lcOrderOf(t, p, lcStripeOrder))
	// The row keeps what the refund counted before it failed (counted);
	// its status, and the order's refunded_amount, say it counts no more.
	// The running total that added nothing is no row.
	require.Equal(t, []lcRefund{{Order: lcStripeOrder, RefundNo: lcStripeRefund, PaymentNo: lcStripePI, Status: "FAILED", Amount: 1000, Currency: "USD", Reason: "expired_or_canceled_card", Log: succeeded.ID, Last: failed.ID}}, lcRefunds(t, p))

	opened := lcStripeStep(t, f, "stripe_charge_dispute_created.json", "",
		lcDisputeMsg(lcStripeOrder, lcStripeDispute, "OPEN", 1000, "USD"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcStripePI, Dispute: "OPEN"}, lcOrderOf(t, p, lcStripeOrder))
	lost := lcStripeStep(t, f, "stripe_charge_dispute_closed_lost.json", "",
		// 99 of 1099 is left: a partial chargeback cancels nothing.
		lcDisputeMsg(lcStripeOrder, lcStripeDispute, "LOST", 1000, "USD"), lcPoints("points.deduct", lcStripeOrder, 1000, "USD"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcStripePI, Dispute: "LOST"}, lcOrderOf(t, p, lcStripeOrder),
		"a lost dispute does not change refunded_amount")
	require.Equal(t, []lcDispute{{Order: lcStripeOrder, DisputeID: lcStripeDispute, PaymentNo: lcStripePI, Status: "LOST", Amount: 1000,
		Currency: "USD", Log: opened.ID, Last: lost.ID}}, lcDisputes(t, p))

	// 6736: its PaymentIntent's payment failed (recorded), then it was
	// canceled. The canceled event's metadata has no order_code: its order
	// is found by the PaymentIntent.
	fail := stripeEvent("evt_lc_failed", "payment_intent.payment_failed", lcStripeUnpaid, lcStripeCanceled, 2000)
	failedPay := f.step(t, fail, lcStripeSigned(fail), "evt_lc_failed", "")
	require.Equal(t, lcOrder{Status: "FAILED"}, lcOrderOf(t, p, lcStripeUnpaid))
	canceled := lcStripeStep(t, f, "stripe_payment_intent_canceled.json", "already recorded: payment/"+lcStripeCanceled+"/FAILED")
	require.Equal(t, lcStripeCanceled, canceled.BusinessKey)
	require.Equal(t, lcOrder{Status: "FAILED"}, lcOrderOf(t, p, lcStripeUnpaid))

	require.Equal(t, []lcPayment{
		{Order: lcStripeOrder, PaymentNo: lcStripePI, Status: "SUCCEEDED", Paying: true, Amount: 1099, Currency: "USD", Log: paid.ID, Last: paid.ID},
		{Order: lcStripeUnpaid, PaymentNo: lcStripeCanceled, Status: "FAILED", Amount: 2000, Currency: "USD", Log: failedPay.ID, Last: failedPay.ID},
	}, lcPayments(t, p))
	f.allNotified(t)
}

// TestStripeDisputeWonSample: the same dispute won, on an order of its own
// (its own database: the samples name one PaymentIntent); and the canceled
// PaymentIntent of an order no payment was ever recorded for, named by its
// metadata. This source reads the order where the samples' metadata carries
// it, order_path data.object.metadata.order_id (docs/platforms/stripe.md: "or set
// order_path").
func TestStripeDisputeWonSample(t *testing.T) {
	cfg := stripeConfig(stripeSecret)
	cfg.OrderPath = "data.object.metadata.order_id"
	p := testenv.StartPlatform(t, "stripe", cfg)
	f := &lcFlow{p: p, source: "stripe", status: http.StatusOK}
	p.CreateOrder(t, lcStripeOrder, 1099, "USD")
	p.CreateOrder(t, lcStripeUnpaid, 2000, "USD")
	pay := bytes.Replace(stripeEvent("evt_lc_paid", "payment_intent.succeeded", lcStripeOrder, lcStripePI, 1099),
		[]byte(`"order_code"`), []byte(`"order_id"`), 1)
	f.step(t, pay, lcStripeSigned(pay), "evt_lc_paid", "", lcShip(lcStripeOrder), lcPoints("points.add", lcStripeOrder, 1099, "USD"))

	opened := lcStripeStep(t, f, "stripe_charge_dispute_created.json", "", lcDisputeMsg(lcStripeOrder, lcStripeDispute, "OPEN", 1000, "USD"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcStripePI, Dispute: "OPEN"}, lcOrderOf(t, p, lcStripeOrder))
	won := lcStripeStep(t, f, "stripe_charge_dispute_closed_won.json", "", lcDisputeMsg(lcStripeOrder, lcStripeDispute, "WON", 1000, "USD"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcStripePI, Dispute: "WON"}, lcOrderOf(t, p, lcStripeOrder))
	require.Equal(t, []lcDispute{{Order: lcStripeOrder, DisputeID: lcStripeDispute, PaymentNo: lcStripePI, Status: "WON", Amount: 1000,
		Currency: "USD", Log: opened.ID, Last: won.ID}}, lcDisputes(t, p))

	// A cancellation is a failed attempt: the order is FAILED, not
	// CLOSED, and another PaymentIntent still pays it.
	canceled := lcStripeStep(t, f, "stripe_payment_intent_canceled.json", "")
	require.Equal(t, lcStripeUnpaid, canceled.BusinessKey, "the metadata names the order")
	require.Equal(t, lcOrder{Status: "FAILED"}, lcOrderOf(t, p, lcStripeUnpaid))
	payments := lcPayments(t, p)
	require.Len(t, payments, 2)
	require.Equal(t, lcPayment{Order: lcStripeUnpaid, PaymentNo: lcStripeCanceled, Status: "FAILED", Amount: 2000, Currency: "USD",
		Log: canceled.ID, Last: canceled.ID}, payments[1])
	repay := stripeEvent("evt_lc_repaid", "payment_intent.succeeded", lcStripeUnpaid, "pi_lc_second_attempt", 2000)
	repay = bytes.Replace(repay, []byte(`"order_code"`), []byte(`"order_id"`), 1)
	f.step(t, repay, lcStripeSigned(repay), "evt_lc_repaid", "", lcShip(lcStripeUnpaid), lcPoints("points.add", lcStripeUnpaid, 2000, "USD"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: "pi_lc_second_attempt"}, lcOrderOf(t, p, lcStripeUnpaid))
	require.Empty(t, lcRefunds(t, p))
	f.allNotified(t)
}

// ----------------------------------------------------------------- Adyen

// The Adyen samples' references (the spec's placeholders): every
// modification is pspReference QFQTPCQ8HXSKGK82 of payment
// 9913140798220028, 1000 EUR; the chargeback samples without
// originalReference are about payment QFQTPCQ8HXSKGK82 itself (the
// preset's fallback).
const (
	lcAdyenPSP      = "QFQTPCQ8HXSKGK82"
	lcAdyenOriginal = "9913140798220028"
	lcAdyenRef      = "YOUR_MERCHANT_REFERENCE"
)

// lcAdyen reads an Adyen sample for the test source: merchantAccountCode
// YOUR_MERCHANT_ACCOUNT becomes CallgateECOM (the account the source
// takes), and every item is signed again with the test key. Where the
// sample carries a signature, it is first checked to be the test
// oracle's over the sample as documented (SOURCES.md signed them with the
// same key).
func lcAdyen(t *testing.T, name string) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(lcSample(t, name)))
	dec.UseNumber()
	var body map[string]any
	require.NoError(t, dec.Decode(&body))
	for _, e := range body["notificationItems"].([]any) {
		item := e.(map[string]any)["NotificationRequestItem"].(map[string]any)
		add, _ := item["additionalData"].(map[string]any)
		if add == nil {
			add = map[string]any{}
			item["additionalData"] = add
		}
		if sig, ok := add["hmacSignature"].(string); ok {
			require.Equal(t, sig, adyenSign(adyenKey, lcAdyenFields(t, item)), "%s: the documented signature", name)
		}
		require.Equal(t, "YOUR_MERCHANT_ACCOUNT", item["merchantAccountCode"])
		item["merchantAccountCode"] = "CallgateECOM"
		add["hmacSignature"] = adyenSign(adyenKey, lcAdyenFields(t, item))
	}
	b, err := json.Marshal(body)
	require.NoError(t, err)
	return b
}

// lcAdyenFields are the signed fields of a decoded item.
func lcAdyenFields(t *testing.T, item map[string]any) adyenItem {
	t.Helper()
	s := func(k string) string { v, _ := item[k].(string); return v }
	amount := item["amount"].(map[string]any)
	value, err := amount["value"].(json.Number).Int64()
	require.NoError(t, err)
	return adyenItem{PSP: s("pspReference"), Original: s("originalReference"), Account: s("merchantAccountCode"), Ref: s("merchantReference"),
		Value: value, Currency: amount["currency"].(string), Event: s("eventCode"), Success: s("success")}
}

// lcAdyenFlow is an Adyen platform with order code paid, amount, by an
// AUTHORISATION of pspReference psp.
func lcAdyenFlow(t *testing.T, code, psp string, amount int64) (*lcFlow, *callback.Log) {
	t.Helper()
	p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
	f := &lcFlow{p: p, source: "adyen", status: http.StatusOK, answer: "[accepted]"}
	p.CreateOrder(t, code, amount, "EUR")
	paid := f.step(t, adyenSigned(adyenKey, authorisation(psp, code, amount, "true")), jsonHeader(), psp+":AUTHORISATION:true", "",
		lcShip(code), lcPoints("points.add", code, amount, "EUR"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: psp}, lcOrderOf(t, p, code))
	return f, paid
}

// lcAdyenStep sends a sample; its event id is pspReference:eventCode:success.
func lcAdyenStep(t *testing.T, f *lcFlow, name, eventID, note string, msgs ...string) *callback.Log {
	t.Helper()
	return f.step(t, lcAdyen(t, name), jsonHeader(), eventID, note, msgs...)
}

// TestAdyenLifecycleSamples: Adyen's modification and dispute examples
// (Webhooks-v1.json) against orders paid by the payments they name. Every
// modification example is the same refund of the same payment, so each
// case is a database of its own. A modification finds its order by
// originalReference; its merchantReference (YOUR_MERCHANT_REFERENCE) is no
// order of these.
func TestAdyenLifecycleSamples(t *testing.T) {
	const order = "ORD-AD-LC"
	refunded := lcRefunded(order, lcAdyenPSP, 1000, "EUR", 1000, false)
	deducted := lcPoints("points.deduct", order, 1000, "EUR")
	added := lcPoints("points.add", order, 1000, "EUR")

	t.Run("REFUND counts, REFUND_FAILED uncounts", func(t *testing.T) {
		f, _ := lcAdyenFlow(t, order, lcAdyenOriginal, 2000)
		counted := lcAdyenStep(t, f, "adyen_refund.json", lcAdyenPSP+":REFUND:true", "", refunded, deducted)
		require.Equal(t, lcAdyenOriginal, counted.BusinessKey, "keyed by the payment it names, not merchantReference")
		require.Equal(t, lcOrder{Status: "PARTIALLY_REFUNDED", PaymentNo: lcAdyenOriginal, Refunded: 1000}, lcOrderOf(t, f.p, order))
		require.Equal(t, []lcRefund{{Order: order, RefundNo: lcAdyenPSP, PaymentNo: lcAdyenOriginal, Status: "SUCCEEDED", Amount: 1000, Currency: "EUR", Log: counted.ID, Last: counted.ID}}, lcRefunds(t, f.p))

		const reason = "adyen REFUND_FAILED: the refund failed after it was processed"
		failed := lcAdyenStep(t, f, "adyen_refund_failed.json", lcAdyenPSP+":REFUND_FAILED:true", "",
			lcRefundFailed(order, lcAdyenPSP, 1000, "EUR", reason, 1000, 0), added)
		require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcAdyenOriginal}, lcOrderOf(t, f.p, order))
		// counted keeps what the refund counted before it failed.
		require.Equal(t, []lcRefund{{Order: order, RefundNo: lcAdyenPSP, PaymentNo: lcAdyenOriginal, Status: "FAILED", Amount: 1000, Currency: "EUR", Reason: reason, Log: counted.ID, Last: failed.ID}}, lcRefunds(t, f.p))
		f.allNotified(t)
	})

	t.Run("REFUND counts, REFUNDED_REVERSED uncounts", func(t *testing.T) {
		f, _ := lcAdyenFlow(t, order, lcAdyenOriginal, 2000)
		counted := lcAdyenStep(t, f, "adyen_refund.json", lcAdyenPSP+":REFUND:true", "", refunded, deducted)
		reversed := lcAdyenStep(t, f, "adyen_refunded_reversed.json", lcAdyenPSP+":REFUNDED_REVERSED:true", "",
			lcRefundFailed(order, lcAdyenPSP, 1000, "EUR", "refund reversed", 1000, 0), added)
		require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcAdyenOriginal}, lcOrderOf(t, f.p, order))
		require.Equal(t, []lcRefund{{Order: order, RefundNo: lcAdyenPSP, PaymentNo: lcAdyenOriginal, Status: "REVERSED", Amount: 1000, Currency: "EUR", Reason: "refund reversed", Log: counted.ID, Last: reversed.ID}}, lcRefunds(t, f.p))
		f.allNotified(t)
	})

	t.Run("REFUND refused", func(t *testing.T) {
		f, _ := lcAdyenFlow(t, order, lcAdyenOriginal, 2000)
		const reason = "adyen REFUND was refused"
		row := lcAdyenStep(t, f, "adyen_refund_false.json", lcAdyenPSP+":REFUND:false", "", lcRefundFailed(order, lcAdyenPSP, 1000, "EUR", reason, 0, 0))
		require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcAdyenOriginal}, lcOrderOf(t, f.p, order), "the money is unchanged")
		require.Equal(t, []lcRefund{{Order: order, RefundNo: lcAdyenPSP, PaymentNo: lcAdyenOriginal, Status: "FAILED", Amount: 1000,
			Currency: "EUR", Reason: reason, Log: row.ID, Last: row.ID}}, lcRefunds(t, f.p))
		f.allNotified(t)
	})

	for _, c := range []struct{ name, file, event string }{
		{"CANCEL_OR_REFUND refunds in full", "adyen_cancel_or_refund.json", "CANCEL_OR_REFUND"},
		{"CANCELLATION refunds in full", "adyen_cancellation.json", "CANCELLATION"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, _ := lcAdyenFlow(t, order, lcAdyenOriginal, 1000)
			row := lcAdyenStep(t, f, c.file, lcAdyenPSP+":"+c.event+":true", "",
				lcRefunded(order, lcAdyenPSP, 1000, "EUR", 1000, true), deducted, lcCancel(order))
			require.Equal(t, lcOrder{Status: "REFUNDED", PaymentNo: lcAdyenOriginal, Refunded: 1000}, lcOrderOf(t, f.p, order))
			require.Equal(t, []lcRefund{{Order: order, RefundNo: lcAdyenPSP, PaymentNo: lcAdyenOriginal, Status: "SUCCEEDED", Amount: 1000, Currency: "EUR", Log: row.ID, Last: row.ID}}, lcRefunds(t, f.p))
			f.allNotified(t)
		})
	}

	// A CHARGEBACK is debited but, while defendable (the sample's
	// additionalData.defendable is "true"), not final (Adyen's dispute
	// flow): the dispute stays OPEN, nothing is cancelled.
	t.Run("NOTIFICATION_OF_CHARGEBACK opens, a defendable CHARGEBACK keeps it open", func(t *testing.T) {
		f, _ := lcAdyenFlow(t, order, lcAdyenOriginal, 2000)
		opened := lcAdyenStep(t, f, "adyen_notification_of_chargeback.json", lcAdyenPSP+":NOTIFICATION_OF_CHARGEBACK:true", "",
			lcDisputeMsg(order, lcAdyenPSP, "OPEN", 1000, "EUR"))
		require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcAdyenOriginal, Dispute: "OPEN"}, lcOrderOf(t, f.p, order))
		// The sample is dated as its notification: the same stage again.
		lcAdyenStep(t, f, "adyen_chargeback.json", lcAdyenPSP+":CHARGEBACK:true", "already recorded: dispute/"+lcAdyenPSP+"/OPEN/20210101T000000.000000Z")
		require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcAdyenOriginal, Dispute: "OPEN"}, lcOrderOf(t, f.p, order))
		require.Equal(t, []lcDispute{{Order: order, DisputeID: lcAdyenPSP, PaymentNo: lcAdyenOriginal, Status: "OPEN", Amount: 1000,
			Currency: "EUR", Log: opened.ID, Last: opened.ID}}, lcDisputes(t, f.p))
		require.Empty(t, lcRefunds(t, f.p))
		f.allNotified(t)
	})

	// The examples without originalReference: their payment is their
	// pspReference, so this order is paid by an AUTHORISATION of that
	// reference. SECOND_CHARGEBACK is the only one of them that loses, so
	// it comes first here, and CHARGEBACK_REVERSED gives back what was
	// lost.
	t.Run("SECOND_CHARGEBACK loses, CHARGEBACK_REVERSED wins it back", func(t *testing.T) {
		f, paid := lcAdyenFlow(t, order, lcAdyenPSP, 1000)
		lost := lcAdyenStep(t, f, "adyen_second_chargeback.json", lcAdyenPSP+":SECOND_CHARGEBACK:true", "",
			lcDisputeMsg(order, lcAdyenPSP, "LOST", 1000, "EUR"), deducted, lcCancel(order))
		require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcAdyenPSP, Dispute: "LOST"}, lcOrderOf(t, f.p, order))
		won := lcAdyenStep(t, f, "adyen_chargeback_reversed.json", lcAdyenPSP+":CHARGEBACK_REVERSED:true", "",
			lcDisputeMsg(order, lcAdyenPSP, "WON", 1000, "EUR"), added,
			// The warehouse was told to cancel when the chargeback took it all;
			// with the money back, a person decides (no second ship).
			`payment.exception {"amount":1000,"currency":"EUR","kind":"cancelled_with_money_left","orderCode":"ORD-AD-LC","paymentNo":"`+lcAdyenPSP+`"}`)
		require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcAdyenPSP, Dispute: "WON"}, lcOrderOf(t, f.p, order))
		require.Equal(t, []lcDispute{{Order: order, DisputeID: lcAdyenPSP, PaymentNo: lcAdyenPSP, Status: "WON", Amount: 1000,
			Currency: "EUR", Log: lost.ID, Last: won.ID}}, lcDisputes(t, f.p))
		require.Equal(t, []lcPayment{{Order: order, PaymentNo: lcAdyenPSP, Status: "SUCCEEDED", Paying: true, Amount: 1000, Currency: "EUR",
			Log: paid.ID, Last: paid.ID}}, lcPayments(t, f.p))
		f.allNotified(t)
	})

	// The same two in Adyen's own order: reversed (won), then charged back
	// a second time. The examples are dated alike (eventDate
	// 2021-01-01T01:00:00+01:00), and of one time a loss is taken before a
	// win: the same facts give the same money in either order, WON.
	t.Run("CHARGEBACK_REVERSED wins, SECOND_CHARGEBACK of the same time changes nothing", func(t *testing.T) {
		f, _ := lcAdyenFlow(t, order, lcAdyenPSP, 1000)
		lcAdyenStep(t, f, "adyen_chargeback_reversed.json", lcAdyenPSP+":CHARGEBACK_REVERSED:true", "",
			lcDisputeMsg(order, lcAdyenPSP, "WON", 1000, "EUR"))
		require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcAdyenPSP, Dispute: "WON"}, lcOrderOf(t, f.p, order))
		lcAdyenStep(t, f, "adyen_second_chargeback.json", lcAdyenPSP+":SECOND_CHARGEBACK:true", "recorded: the order's money is unchanged")
		require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcAdyenPSP, Dispute: "WON"}, lcOrderOf(t, f.p, order))
		f.allNotified(t)
	})

	// ORDER_CLOSED names its order by merchantReference: an unpaid order
	// of that code.
	t.Run("ORDER_CLOSED", func(t *testing.T) {
		p := testenv.StartPlatform(t, "adyen", adyenConfig(adyenKey))
		f := &lcFlow{p: p, source: "adyen", status: http.StatusOK, answer: "[accepted]"}
		p.CreateOrder(t, lcAdyenRef, 1000, "EUR")
		row := lcAdyenStep(t, f, "adyen_order_closed.json", lcAdyenPSP+":ORDER_CLOSED:true",
			"adyen eventCode ORDER_CLOSED (success true) is an order whose payments all succeeded: its AUTHORISATION pays it")
		require.Equal(t, lcAdyenRef, row.BusinessKey)
		require.Equal(t, lcOrder{Status: "UNPAID"}, lcOrderOf(t, p, lcAdyenRef), "no effect")
		lcAdyenStep(t, f, "adyen_order_closed_false.json", lcAdyenPSP+":ORDER_CLOSED:false", "",
			lcClosed(lcAdyenRef, "adyen ORDER_CLOSED: the order was not paid in full in time", "CLOSED", 0))
		require.Equal(t, lcOrder{Status: "CLOSED"}, lcOrderOf(t, p, lcAdyenRef))
		require.Empty(t, lcPayments(t, p))
		f.allNotified(t)
	})
}

// --------------------------------------------------------------- Shopify

// The Shopify samples' order: id 820982911946154508, name #9999, USD
// 404.95 (orders/cancelled); the refund (85.00 in two successful refund
// transactions) and the dispute (11.50 CAD) are of that order_id.
const (
	lcShopifyOrderID = "820982911946154508"
	lcShopifyName    = "#9999"
)

// lcShopifyPaid is orders/paid of the samples' order, as the existing
// tests build it, in currency.
func lcShopifyPaid(currency, total string) []byte {
	// Paid before the samples' refunds (2019-12-31) and cancellation
	// (2021-12-31) happened: the facts are taken by their time.
	return bytes.Replace(shopifyOrder(lcShopifyName, 820982911946154508, total), []byte(`"currency":"EUR"`),
		[]byte(`"currency":`+lcQ(currency)+`,"processed_at":"2019-12-30T12:00:00-05:00"`), 1)
}

// lcShopifyCancelled is the orders/cancelled sample delivered by shop:
// its order_status_url, the one field of the signed body that names the
// shop (jsmith.myshopify.com in the sample), names shop instead, and its
// id is id (Shopify's ids are unique across shops).
func lcShopifyCancelled(t *testing.T, shop, id string) ([]byte, http.Header) {
	t.Helper()
	const url = `"order_status_url": "https://jsmith.myshopify.com/`
	b := lcSample(t, "shopify_orders_cancelled.json")
	require.Contains(t, string(b), url)
	b = bytes.Replace(b, []byte(url), []byte(`"order_status_url": "https://`+shop+`/`), 1)
	b = bytes.Replace(b, []byte(`"id": `+lcShopifyOrderID+`,`), []byte(`"id": `+id+`,`), 1)
	h := shopifySigned(b, shopifySecret, "wh-lc-cancelled-"+shop, "orders/cancelled")
	h.Set("X-Shopify-Shop-Domain", shop)
	return b, h
}

// lcShopifyPay pays the samples' order in the tests' shop.
func lcShopifyPay(t *testing.T, f *lcFlow, amount int64, currency, total string) *callback.Log {
	t.Helper()
	code := shopifyCode(lcShopifyName)
	body := lcShopifyPaid(currency, total)
	paid := f.step(t, body, shopifySigned(body, shopifySecret, "wh-lc-paid", "orders/paid"),
		"order:"+lcShopifyOrderID+":2026-11-30T12:00:00-05:00:paid", "", lcShip(code), lcPoints("points.add", code, amount, currency))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcShopifyOrderID}, lcOrderOf(t, f.p, code))
	return paid
}

// TestShopifyLifecycleSamples: refunds/create counts the refund's
// successful refund transactions; orders/cancelled of the paid order moves
// no money (order.closed only), and of an unpaid order (the same sample
// from the source's other shop, whose #9999 was never paid) closes it.
// The samples carry no shop (the header does), so only the cancelled
// order's order_status_url is changed.
func TestShopifyLifecycleSamples(t *testing.T) {
	p := testenv.StartPlatform(t, "shopify", shopifyConfig(shopifySecret))
	f := &lcFlow{p: p, source: "shopify", status: http.StatusOK}
	code := shopifyCode(lcShopifyName)
	const otherShop = "other-shop.myshopify.com"
	other := otherShop + "/" + lcShopifyName
	p.CreateOrder(t, code, 40495, "USD")
	p.CreateOrder(t, other, 40495, "USD")
	paid := lcShopifyPay(t, f, 40495, "USD", "404.95")

	// Each refund transaction is a refund of its own: one callback each.
	const tx1, tx2 = "245135271310201194", "839212141605670573"
	refund := lcSample(t, "shopify_refunds_create.json")
	row := f.step(t, refund, shopifySigned(refund, shopifySecret, "wh-lc-refund", "refunds/create"),
		"transaction:"+tx1+":SUCCESS", "",
		lcRefunded(code, tx1, 7500, "USD", 7500, false), lcPoints("points.deduct", code, 7500, "USD"))
	require.Equal(t, shopifyShop+"/order_id:"+lcShopifyOrderID, row.BusinessKey)
	row2 := f.p.Settled(t, "shopify", "transaction:"+tx2+":SUCCESS")
	require.Equal(t, []string{lcRefunded(code, tx2, 1000, "USD", 8500, false), lcPoints("points.deduct", code, 1000, "USD")},
		lcNotifications(t, p, row2.ID))
	f.seen += 2
	require.Equal(t, lcOrder{Status: "PARTIALLY_REFUNDED", PaymentNo: lcShopifyOrderID, Refunded: 8500}, lcOrderOf(t, p, code))
	require.Equal(t, []lcRefund{
		{Order: code, RefundNo: tx1, PaymentNo: lcShopifyOrderID, Status: "SUCCEEDED", Amount: 7500, Currency: "USD", Log: row.ID, Last: row.ID},
		{Order: code, RefundNo: tx2, PaymentNo: lcShopifyOrderID, Status: "SUCCEEDED", Amount: 1000, Currency: "USD", Log: row2.ID, Last: row2.ID},
	}, lcRefunds(t, p))

	body, h := lcShopifyCancelled(t, shopifyShop, lcShopifyOrderID)
	f.step(t, body, h, "order:"+lcShopifyOrderID+":2021-12-31T19:00:00-05:00:cancelled",
		"", lcClosed(code, "shopify orders/cancelled customer", "PARTIALLY_REFUNDED", 8500))
	require.Equal(t, lcOrder{Status: "PARTIALLY_REFUNDED", PaymentNo: lcShopifyOrderID, Refunded: 8500}, lcOrderOf(t, p, code), "unchanged")

	body, h = lcShopifyCancelled(t, otherShop, "820982911946154599")
	f.step(t, body, h, "order:820982911946154599:2021-12-31T19:00:00-05:00:cancelled", "",
		lcClosed(other, "shopify orders/cancelled customer", "CLOSED", 0))
	require.Equal(t, lcOrder{Status: "CLOSED"}, lcOrderOf(t, p, other))
	require.Equal(t, lcOrder{Status: "PARTIALLY_REFUNDED", PaymentNo: lcShopifyOrderID, Refunded: 8500}, lcOrderOf(t, p, code))

	require.Equal(t, []lcPayment{{Order: code, PaymentNo: lcShopifyOrderID, Status: "SUCCEEDED", Paying: true, Amount: 40495, Currency: "USD",
		Log: paid.ID, Last: paid.ID}}, lcPayments(t, p))
	require.Empty(t, lcDisputes(t, p))
	f.allNotified(t)
}

// TestShopifyDisputeSamples: disputes/create (under_review) opens the
// dispute, disputes/update (won) wins it. The dispute sample is in CAD, so
// its order is a CAD order (on a database of its own: the refund sample is
// in USD, of the same order id). A dispute has no updated_at: its event id
// is "dispute:<id>:<status>".
func TestShopifyDisputeSamples(t *testing.T) {
	p := testenv.StartPlatform(t, "shopify", shopifyConfig(shopifySecret))
	f := &lcFlow{p: p, source: "shopify", status: http.StatusOK}
	code := shopifyCode(lcShopifyName)
	p.CreateOrder(t, code, 40495, "CAD")
	lcShopifyPay(t, f, 40495, "CAD", "404.95")

	created := lcSample(t, "shopify_disputes_create.json")
	opened := f.step(t, created, shopifySigned(created, shopifySecret, "wh-lc-dispute-1", "disputes/create"),
		"dispute:285332461850802063:under_review", "",
		lcDisputeMsg(code, "285332461850802063", "OPEN", 1150, "CAD"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcShopifyOrderID, Dispute: "OPEN"}, lcOrderOf(t, p, code))

	updated := lcSample(t, "shopify_disputes_update.json")
	won := f.step(t, updated, shopifySigned(updated, shopifySecret, "wh-lc-dispute-2", "disputes/update"),
		"dispute:285332461850802063:won", "",
		lcDisputeMsg(code, "285332461850802063", "WON", 1150, "CAD"))
	require.Equal(t, lcOrder{Status: "PAID", PaymentNo: lcShopifyOrderID, Dispute: "WON"}, lcOrderOf(t, p, code))
	require.Equal(t, []lcDispute{{Order: code, DisputeID: "285332461850802063", PaymentNo: lcShopifyOrderID, Status: "WON", Amount: 1150,
		Currency: "CAD", Log: opened.ID, Last: won.ID}}, lcDisputes(t, p))
	require.Empty(t, lcRefunds(t, p))

	// The same signed "won" body captured and sent again under a new
	// webhook id is the same event: Shopify signs no time, and a dispute
	// has no updated_at, so its status names the event.
	resent := p.Post(t, "shopify", updated, shopifySigned(updated, shopifySecret, "wh-lc-dispute-3", "disputes/update"))
	require.Equal(t, http.StatusOK, resent.Status, string(resent.Body))
	require.Contains(t, string(resent.Body), `"duplicate":true`)
	f.allNotified(t)
}
