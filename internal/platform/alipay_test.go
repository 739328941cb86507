package platform_test

import (
	"crypto/rsa"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// alipayDocumentedContent is the string to sign of Alipay's official
// notification example ("异步返回结果的验签", PLATFORMS.md section 1):
// raw Chinese, raw spaces, every parameter but sign and sign_type, sorted.
const alipayDocumentedContent = "app_id=2015102700040153&body=大乐透2.1&buyer_id=2088102116773037&charset=utf-8" +
	"&gmt_close=2016-07-19 14:10:46&gmt_payment=2016-07-19 14:10:47&notify_id=4a91b7a78a503640467525113fb7d8bg8e" +
	"&notify_time=2016-07-19 14:10:49&notify_type=trade_status_sync&out_trade_no=0719141034-6418&refund_fee=0.00" +
	"&seller_id=2088102119685838&subject=大乐透2.1&total_amount=2.00&trade_no=2016071921001003030200089909" +
	"&trade_status=TRADE_SUCCESS&version=1.0"

// The official example's keys.
const (
	alipayAppID   = "2015102700040153"
	alipayNotify  = "4a91b7a78a503640467525113fb7d8bg8e"
	alipayOrder   = "0719141034-6418"
	alipayTradeNo = "2016071921001003030200089909"
)

// alipayParams is a notification's parameters, in the order they are sent.
type alipayParams [][2]string

// alipayExample is the official example's parameters, in an order that is
// not sorted (Alipay's order is not the signing order), with kv pairs
// replacing or adding values.
func alipayExample(kv ...string) alipayParams {
	p := alipayParams{
		{"charset", "utf-8"}, {"seller_id", "2088102119685838"}, {"subject", "大乐透2.1"},
		{"body", "大乐透2.1"}, {"buyer_id", "2088102116773037"}, {"notify_id", alipayNotify},
		{"total_amount", "2.00"}, {"trade_status", "TRADE_SUCCESS"}, {"refund_fee", "0.00"},
		{"notify_time", "2016-07-19 14:10:49"}, {"version", "1.0"}, {"trade_no", alipayTradeNo},
		{"gmt_payment", "2016-07-19 14:10:47"}, {"gmt_close", "2016-07-19 14:10:46"}, {"app_id", alipayAppID},
		{"notify_type", "trade_status_sync"}, {"out_trade_no", alipayOrder},
	}
	for i := 0; i+1 < len(kv); i += 2 {
		j := slices.IndexFunc(p, func(e [2]string) bool { return e[0] == kv[i] })
		if j < 0 {
			p = append(p, [2]string{kv[i], kv[i+1]})
		} else {
			p[j][1] = kv[i+1]
		}
	}
	return p
}

// content is the string Alipay signs for p (the documented steps).
func (p alipayParams) content() []byte {
	var kv []string
	for _, e := range p {
		if e[0] != "sign" && e[0] != "sign_type" {
			kv = append(kv, e[0]+"="+e[1])
		}
	}
	slices.Sort(kv)
	return []byte(strings.Join(kv, "&"))
}

// body form-encodes p, after sign_type and sign.
func (p alipayParams) body(signType, sign string) []byte {
	parts := []string{"sign_type=" + url.QueryEscape(signType), "sign=" + url.QueryEscape(sign)}
	for _, e := range p {
		parts = append(parts, url.QueryEscape(e[0])+"="+url.QueryEscape(e[1]))
	}
	return []byte(strings.Join(parts, "&"))
}

// signed is the body of p signed RSA2 with k.
func (p alipayParams) signed(k *rsa.PrivateKey) []byte {
	return p.body("RSA2", testenv.SignSHA256WithRSA(k, p.content()))
}

// alipayHeader is what Alipay sends with a notification.
func alipayHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	return h
}

// requireAlipayAnswer asserts Alipay's answer: status, text/plain, body.
func requireAlipayAnswer(t *testing.T, a testenv.RawAnswer, status int, body, msg string) {
	t.Helper()
	if status == http.StatusOK {
		require.Equal(t, http.StatusOK, a.Status, "%s: %s", msg, a.Body)
	} else {
		require.NotEqual(t, http.StatusOK, a.Status, msg)
	}
	require.Equal(t, body, string(a.Body), "%s: exactly %q", msg, body)
	mt, _, err := mime.ParseMediaType(a.Header.Get("Content-Type"))
	require.NoError(t, err, msg)
	require.Equal(t, "text/plain", mt, msg)
}

func TestAlipayBuildsTheDocumentedString(t *testing.T) {
	require.Equal(t, alipayDocumentedContent, string(alipayExample().content()), "the test's parameters are the official example")
	k := testenv.RSAKeys()[0]
	p, err := platform.New("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	require.NoError(t, err)
	// Signed over the documented string itself: the preset rebuilt it
	// byte for byte from the form body.
	body := alipayExample().body("RSA2", testenv.SignSHA256WithRSA(k, []byte(alipayDocumentedContent)))
	cbs, err := p.Read(platform.Request{Header: alipayHeader(), Body: body, Now: time.Now()})
	require.NoError(t, err)
	require.Len(t, cbs, 1)
	require.Equal(t, alipayNotify, cbs[0].EventID)
	require.Equal(t, alipayOrder, cbs[0].BusinessKey)
	require.Contains(t, string(body), "subject=%E5%A4%A7%E4%B9%90%E9%80%8F2.1", "Chinese travels percent-encoded")
	require.Contains(t, string(body), "gmt_payment=2016-07-19+14%3A10%3A47", "spaces travel as +")
}

func TestAlipayPaysTheOrder(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p := testenv.StartPlatform(t, "alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	p.CreateOrder(t, alipayOrder, 200, "CNY")
	body := alipayExample().signed(k)

	requireAlipayAnswer(t, p.Post(t, "alipay", body, alipayHeader()), http.StatusOK, "success", "a signed notification")
	row := p.Settled(t, "alipay", alipayNotify)
	require.Equal(t, alipayOrder, row.BusinessKey)
	require.Equal(t, body, row.Payload, "the raw body is stored byte for byte")
	var ev callback.PaymentEvent
	require.NoError(t, json.Unmarshal(row.Normalized, &ev))
	paidAt := time.Date(2016, 7, 19, 6, 10, 47, 0, time.UTC) // gmt_payment 14:10:47 China time
	require.NotNil(t, ev.PaidAt)
	require.True(t, paidAt.Equal(*ev.PaidAt), "paidAt %s", ev.PaidAt)
	require.Equal(t, callback.PaymentEvent{OrderCode: alipayOrder, PaymentNo: alipayTradeNo, Amount: 200, Currency: "CNY",
		Status: callback.PaymentSuccess, PaidAt: ev.PaidAt}, ev, "total_amount 2.00 yuan is 200 fen")
	o := p.Order(t, alipayOrder)
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Equal(t, alipayTradeNo, *o.PaymentNo)

	requireAlipayAnswer(t, p.Post(t, "alipay", body, alipayHeader()), http.StatusOK, "success", "Alipay's resend")
	require.Equal(t, 1, p.Callbacks(t, "alipay"), "the resend is a duplicate")
}

func TestAlipayPEMKeysDuringARotation(t *testing.T) {
	old, next := testenv.RSAKeys()[0], testenv.RSAKeys()[1]
	p := testenv.StartPlatform(t, "alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: testenv.RSAPublicKeyPEM(old)}, {Key: testenv.RSAPublicKeyPEM(next)}}, AppID: alipayAppID})
	for i, k := range []*rsa.PrivateKey{old, next} {
		order, notify := []string{"ALI-ROT-OLD", "ALI-ROT-NEW"}[i], []string{"rot-old", "rot-new"}[i]
		p.CreateOrder(t, order, 12345, "CNY")
		body := alipayExample("out_trade_no", order, "notify_id", notify, "total_amount", "123.45", "trade_no", "T"+notify).signed(k)
		requireAlipayAnswer(t, p.Post(t, "alipay", body, alipayHeader()), http.StatusOK, "success", order)
		p.Settled(t, "alipay", notify)
		require.Equal(t, payment.OrderPaid, p.Order(t, order).PaymentStatus, "either key of the rotation verifies")
	}
}

func TestAlipayClosedAndWaiting(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p := testenv.StartPlatform(t, "alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	p.CreateOrder(t, "ALI-CLOSED", 200, "CNY")
	closed := alipayExample("out_trade_no", "ALI-CLOSED", "notify_id", "n-closed", "trade_status", "TRADE_CLOSED").signed(k)
	requireAlipayAnswer(t, p.Post(t, "alipay", closed, alipayHeader()), http.StatusOK, "success", "TRADE_CLOSED")
	p.Settled(t, "alipay", "n-closed")
	require.Equal(t, payment.OrderClosed, p.Order(t, "ALI-CLOSED").PaymentStatus, "TRADE_CLOSED without refund_fee closes the unpaid trade")

	p.CreateOrder(t, "ALI-WAIT", 200, "CNY")
	waiting := alipayExample("out_trade_no", "ALI-WAIT", "notify_id", "n-wait", "trade_status", "WAIT_BUYER_PAY").signed(k)
	requireAlipayAnswer(t, p.Post(t, "alipay", waiting, alipayHeader()), http.StatusOK, "success", "WAIT_BUYER_PAY")
	row := p.Settled(t, "alipay", "n-wait")
	require.Equal(t, "ALI-WAIT", row.BusinessKey)
	require.Contains(t, p.LastNote(t, row.ID), "WAIT_BUYER_PAY", "the attempt says why nothing changed")
	o := p.Order(t, "ALI-WAIT")
	require.Equal(t, payment.OrderUnpaid, o.PaymentStatus, "no business effect")
	require.Nil(t, o.PaymentNo)
}

func TestAlipayRefusals(t *testing.T) {
	k, other := testenv.RSAKeys()[0], testenv.RSAKeys()[1]
	p := testenv.StartPlatform(t, "alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	p.CreateOrder(t, alipayOrder, 200, "CNY")
	ex := alipayExample()
	sign := testenv.SignSHA256WithRSA(k, ex.content())
	flipped := sign[:10] + map[bool]string{true: "B", false: "A"}[sign[10] == 'A'] + sign[11:]
	cases := map[string][]byte{
		"wrong signature": ex.body("RSA2", flipped),
		"tampered body":   alipayExample("total_amount", "0.01").body("RSA2", sign),
		"wrong key":       ex.signed(other),
		"wrong app_id":    alipayExample("app_id", "2015102700040999").signed(k),
		"charset=Big5":    alipayExample("charset", "Big5").signed(k),
		"sign_type=RSA":   ex.body("RSA", sign),
		"no sign":         ex.body("RSA2", ""),
	}
	for name, body := range cases {
		requireAlipayAnswer(t, p.Post(t, "alipay", body, alipayHeader()), 0, "fail", name)
	}
	require.Zero(t, p.Callbacks(t, "alipay"), "nothing refused is stored")
	require.Equal(t, payment.OrderUnpaid, p.Order(t, alipayOrder).PaymentStatus)
}

func TestAlipayReadErrors(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p, err := platform.New("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	require.NoError(t, err)
	read := func(body []byte) error {
		_, err := p.Read(platform.Request{Header: alipayHeader(), Body: body, Now: time.Now()})
		return err
	}
	ex := alipayExample()
	unauth := map[string]struct {
		body []byte
		want string
	}{
		"wrong key":     {ex.signed(testenv.RSAKeys()[1]), "parameter sign: SHA256withRSA: no signature matched"},
		"sign_type RSA": {ex.body("RSA", testenv.SignSHA256WithRSA(k, ex.content())), `sign_type "RSA" is not accepted, only RSA2`},
		"no sign_type":  {ex.body("", testenv.SignSHA256WithRSA(k, ex.content())), "parameter sign_type: missing"},
		"sign garbage":  {ex.body("RSA2", "%%%"), "not standard base64"},
	}
	for name, c := range unauth {
		err := read(c.body)
		require.ErrorContains(t, err, c.want, name)
		require.True(t, platform.IsUnauthenticated(err), "%s is a 401", name)
	}
	bad := map[string]struct {
		body []byte
		want string
	}{
		"charset Big5": {alipayExample("charset", "Big5").signed(k), `charset "Big5" is not supported (supported: gb2312, gbk, utf-8, utf8)`},
		"other app":    {alipayExample("app_id", "x").signed(k), `app_id "x" is not this source's`},
		"no notify_id": {alipayExample("notify_id", "").signed(k), "parameter notify_id is missing"},
		"duplicate":    {append(ex.signed(k), "&app_id="+alipayAppID...), `parameter "app_id" appears twice`},
	}
	for name, c := range bad {
		err := read(c.body)
		require.ErrorContains(t, err, c.want, name)
		require.False(t, platform.IsUnauthenticated(err), "%s is a 400", name)
	}
	require.NoError(t, read(alipayExample("charset", "UTF-8").signed(k)), "the charset's case does not matter")
	// Signed and ours, but unreadable: kept, with the reason.
	cbs, err := p.Read(platform.Request{Header: alipayHeader(), Body: alipayExample("total_amount", "2.001").signed(k), Now: time.Now()})
	require.NoError(t, err)
	require.Equal(t, `the notification could not be read: total_amount: amount "2.001" has more than 2 decimal places`, cbs[0].Unreadable)
	require.Nil(t, cbs[0].Event)
}

// TestAlipayRefundsAfterPayment: TRADE_CLOSED after a payment carries the
// refund in refund_fee: a full refund, never "the same payment again". The
// order is REFUNDED, the warehouse told to cancel and the points deducted;
// a partial refund before it (TRADE_SUCCESS with refund_fee) counted its
// share, and the full refund only the rest (refund_fee is a running
// total).
func TestAlipayRefundsAfterPayment(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p := testenv.StartPlatform(t, "alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	p.CreateOrder(t, alipayOrder, 200, "CNY")
	requireAlipayAnswer(t, p.Post(t, "alipay", alipayExample().signed(k), alipayHeader()), http.StatusOK, "success", "the payment")
	p.Settled(t, "alipay", alipayNotify)

	partial := alipayExample("notify_id", "n-partial", "refund_fee", "0.50", "gmt_refund", "2016-07-20 10:00:00.000", "out_biz_no", "RF-1")
	requireAlipayAnswer(t, p.Post(t, "alipay", partial.signed(k), alipayHeader()), http.StatusOK, "success", "partial refund")
	row := p.Settled(t, "alipay", "n-partial")
	o := p.Order(t, alipayOrder)
	require.Equal(t, payment.OrderPartiallyRefunded, o.PaymentStatus)
	require.EqualValues(t, 50, o.RefundedAmount)
	require.Equal(t, []string{
		`order.refunded {"amount":50,"currency":"CNY","full":false,"orderCode":"` + alipayOrder + `","refundNo":"RF-1","refundedTotal":50}`,
		`points.deduct {"amount":50,"currency":"CNY","orderCode":"` + alipayOrder + `","userId":7}`,
	}, outboxOf(t, p, row.ID))

	full := alipayExample("notify_id", "n-full", "trade_status", "TRADE_CLOSED", "refund_fee", "2.00", "gmt_refund", "2016-07-21 10:00:00.000", "out_biz_no", "RF-2")
	requireAlipayAnswer(t, p.Post(t, "alipay", full.signed(k), alipayHeader()), http.StatusOK, "success", "full refund")
	row = p.Settled(t, "alipay", "n-full")
	o = p.Order(t, alipayOrder)
	require.Equal(t, payment.OrderRefunded, o.PaymentStatus, "a full refund is not the same payment again")
	require.EqualValues(t, 200, o.RefundedAmount)
	require.Equal(t, []string{
		`order.refunded {"amount":150,"currency":"CNY","full":true,"orderCode":"` + alipayOrder + `","refundNo":"RF-2","refundedTotal":200}`,
		`points.deduct {"amount":150,"currency":"CNY","orderCode":"` + alipayOrder + `","userId":7}`,
		`warehouse.cancel {"orderCode":"` + alipayOrder + `"}`,
	}, outboxOf(t, p, row.ID))
}

// outboxOf is what callback id published: "routing.key payload", each
// checked against the downstream contract.
func outboxOf(t *testing.T, p *testenv.Platform, id int64) []string {
	t.Helper()
	return p.St.Notifications(t, id)
}
