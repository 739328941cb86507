package platform_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/simplifiedchinese"

	"callgate/internal/callback"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// gbkBody is p as Alipay sends it with charset=GBK: each name and value
// written in GBK and form-escaped, signed as Alipay's SDKs verify it
// (alipay-sdk-java AlipaySignature.rsaCheckV1(params, key, "GBK", "RSA2"):
// the sorted k=v string of the decoded values, content.getBytes("GBK"),
// SHA256withRSA).
func gbkBody(t *testing.T, p alipayParams, sign func([]byte) string) []byte {
	t.Helper()
	enc := simplifiedchinese.GBK.NewEncoder()
	gbk := func(s string) string {
		b, err := enc.String(s)
		require.NoError(t, err)
		return b
	}
	parts := []string{"sign_type=RSA2", "sign=" + url.QueryEscape(sign([]byte(gbk(string(p.content())))))}
	for _, e := range p {
		parts = append(parts, url.QueryEscape(gbk(e[0]))+"="+url.QueryEscape(gbk(e[1])))
	}
	return []byte(strings.Join(parts, "&"))
}

func gbkHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded; charset=GBK")
	return h
}

// TestAlipayGBKNotificationPaysTheOrder: Alipay's own PC-website
// notification example is charset=GBK. A GBK notification, Chinese in its
// subject, body and order number, signed over its GBK bytes, is verified,
// answered success, and its values are stored and sent on as UTF-8: the
// order (named in Chinese) is paid and the warehouse told so.
func TestAlipayGBKNotificationPaysTheOrder(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p := testenv.StartPlatform(t, "alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	const order = "订单-GBK-1"
	p.CreateOrder(t, order, 200, "CNY")
	params := alipayExample("charset", "GBK", "out_trade_no", order, "notify_id", "n-gbk", "subject", "大乐透2.1 测试", "body", "彩票")
	body := gbkBody(t, params, func(b []byte) string { return testenv.SignSHA256WithRSA(k, b) })
	require.Contains(t, string(body), "subject=%B4%F3%C0%D6%CD%B82.1+", "大乐透 travels as its GBK bytes (B4F3 C0D6 CDB8), not UTF-8")

	requireAlipayAnswer(t, p.Post(t, "alipay", body, gbkHeader()), http.StatusOK, "success", "a GBK notification")
	row := p.Settled(t, "alipay", "n-gbk")
	require.Equal(t, order, row.BusinessKey, "the order number is read as UTF-8")
	require.Equal(t, body, row.Payload, "the raw body is stored byte for byte")
	var ev callback.PaymentEvent
	require.NoError(t, json.Unmarshal(row.Normalized, &ev))
	require.Equal(t, order, ev.OrderCode)
	require.Equal(t, alipayTradeNo, ev.PaymentNo)
	require.Equal(t, int64(200), ev.Amount)
	o := p.Order(t, order)
	require.Equal(t, payment.OrderPaid, o.PaymentStatus)
	require.Contains(t, strings.Join(outboxOf(t, p, row.ID), "\n"), `"orderCode":"订单-GBK-1"`, "downstream reads the order in UTF-8")

	requireAlipayAnswer(t, p.Post(t, "alipay", body, gbkHeader()), http.StatusOK, "success", "Alipay's resend")
	require.Equal(t, 1, p.Callbacks(t, "alipay"), "the resend is a duplicate")
}

// TestAlipayCharsets: the values Alipay signs are read in the charset
// the notification names (gbk, gb2312, utf-8, any case), else as UTF-8,
// whatever the Content-Type says (it is not signed); the signature is over the string in that charset,
// so the same string signed as UTF-8 does not verify a GBK notification;
// a charset Alipay does not document is a 400 naming it.
func TestAlipayCharsets(t *testing.T) {
	k := testenv.RSAKeys()[0]
	p, err := platform.New("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	require.NoError(t, err)
	read := func(body []byte, h http.Header) ([]platform.Callback, error) {
		return p.Read(platform.Request{Header: h, Body: body, Now: time.Now()})
	}
	sign := func(b []byte) string { return testenv.SignSHA256WithRSA(k, b) }
	for _, cs := range []string{"GBK", "gbk", "gb2312", "GB2312"} {
		cbs, err := read(gbkBody(t, alipayExample("charset", cs, "out_trade_no", "订单-1"), sign), gbkHeader())
		require.NoError(t, err, cs)
		require.Equal(t, "订单-1", cbs[0].Event.(callback.PaymentEvent).OrderCode, cs)
	}
	// No charset parameter: UTF-8, whatever the Content-Type names. The
	// Content-Type is not signed: one signed body must have one reading
	// (GBK bytes read as UTF-8 are not text: refused; UTF-8 bytes sent
	// with a GBK Content-Type read as UTF-8).
	noParam := alipayExample("out_trade_no", "订单-2")
	noParam = noParam[1:] // the example's first parameter is charset
	_, err = read(gbkBody(t, noParam, sign), gbkHeader())
	require.ErrorContains(t, err, "is not UTF-8")
	cbs, err := read(noParam.signed(k), gbkHeader())
	require.NoError(t, err)
	require.Equal(t, "订单-2", cbs[0].Event.(callback.PaymentEvent).OrderCode)

	// Signed over the UTF-8 bytes, sent as GBK: not what Alipay signs.
	utf8Signed := gbkBody(t, alipayExample("charset", "GBK"), func([]byte) string {
		return sign(alipayExample("charset", "GBK").content())
	})
	_, err = read(utf8Signed, gbkHeader())
	require.ErrorContains(t, err, "no signature matched")
	require.True(t, platform.IsUnauthenticated(err))

	// Bytes that are not GBK text.
	_, err = read([]byte("charset=gbk&subject=%FF%FF&"+string(alipayExample().signed(k))[len("sign_type=RSA2&"):]), gbkHeader())
	require.ErrorContains(t, err, `parameter "subject" is not gbk`)

	// A charset Alipay does not document.
	_, err = read(alipayExample("charset", "Big5").signed(k), alipayHeader())
	require.EqualError(t, err, `form body: charset "Big5" is not supported (supported: gb2312, gbk, utf-8, utf8)`)
	require.False(t, platform.IsUnauthenticated(err), "a 400")
}
