package platform_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/payment"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// paymentPresets is a gateway and a worker with every payment preset
// enabled, each bound to the tests' merchant.
func paymentPresets(t *testing.T, mutate ...func(*config.Config)) *testenv.Platform {
	t.Helper()
	k := testenv.RSAKeys()[0]
	return testenv.StartPlatform(t, "stripe", stripeConfig(stripeSecret), append([]func(*config.Config){
		testenv.WithPlatform("shopify", shopifyConfig(shopifySecret)),
		testenv.WithPlatform("adyen", adyenConfig(adyenKey)),
		testenv.WithPlatform("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID,
			SellerID: "2088102119685838"}),
		testenv.WithPlatform("wechatpay", func() platform.Config { c := wechatKeyConfig(); c.AppID = "wxd678efh567hg6787"; return c }()),
	}, mutate...)...)
}

// stripeEventFor is a payment_intent.succeeded event with the fields a
// merchant binding reads.
func stripeEventFor(id, order string, amount, received int64, currency string, livemode bool, account string) []byte {
	acct := ""
	if account != "" {
		acct = fmt.Sprintf(`"account":%q,`, account)
	}
	return fmt.Appendf(nil, `{"id":%q,"object":"event",%s"livemode":%t,"type":"payment_intent.succeeded","created":1764547200,`+
		`"data":{"object":{"id":"pi_%s","object":"payment_intent","amount":%d,"amount_received":%d,"currency":%q,`+
		`"metadata":{"order_code":%q}}}}`, id, acct, livemode, id, amount, received, currency, order)
}

// TestForeignMerchantNeverPays: a validly signed notification for another
// merchant than the source's (another Alipay app or seller, WeChat Pay
// merchant or app, Adyen merchant account, Stripe mode or connected
// account, Shopify shop) is refused with the platform's failure answer,
// nothing is stored, and the order stays unpaid.
func TestForeignMerchantNeverPays(t *testing.T) {
	p := paymentPresets(t)
	k := testenv.RSAKeys()[0]
	p.CreateOrder(t, "ORD-FM", 200, "CNY")
	p.CreateOrder(t, shopifyCode("ORD-FM"), 200, "CNY")

	wechat := func(mchid, appid string) ([]byte, http.Header) {
		plain := strings.NewReplacer(`"mchid":"`+wechatMchID+`"`, `"mchid":"`+mchid+`"`, `"appid":"wxd678efh567hg6787"`, `"appid":"`+appid+`"`).
			Replace(wechatTransaction("ORD-FM", "T-FM", "SUCCESS", 200))
		body := wechatNotification("EV-FM-"+mchid+appid, "TRANSACTION.SUCCESS", "transaction", wechatAPIv3Key, plain)
		return body, wechatSigned(k, wechatPubKeyID, body, time.Now())
	}
	stripe := func(live bool, account string) ([]byte, http.Header) {
		body := stripeEventFor(fmt.Sprintf("evt_fm_%t_%s", live, account), "ORD-FM", 200, 200, "cny", live, account)
		return body, stripeSigned(body, stripeSecret, time.Now())
	}
	live := paymentPresets(t, func(c *config.Config) {
		for i := range c.Sources {
			if c.Sources[i].Name == "stripe" {
				c.Sources[i].Platform.Livemode = "true"
			}
		}
	})
	adyen := adyenSigned(adyenKey, func() adyenItem {
		it := authorisation("PSP-FM", "ORD-FM", 200, "true")
		it.Account, it.Currency = "SomeoneElseECOM", "CNY"
		return it
	}())
	shopifyBody := []byte(`{"id":77,"name":"ORD-FM","currency":"CNY","total_price":"2.00","financial_status":"paid","updated_at":"2026-11-30T12:00:00Z"}`)
	shopifyHeader := shopifySigned(shopifyBody, shopifySecret, "wh-fm", "orders/paid")
	shopifyHeader.Set("X-Shopify-Shop-Domain", "another-shop.myshopify.com")

	type req struct {
		source string
		body   []byte
		h      http.Header
		answer string // a fragment of the platform's failure answer
	}
	cases := map[string]req{
		"alipay: another app": {"alipay", alipayExample("out_trade_no", "ORD-FM", "app_id", "2021000000000001").signed(k), alipayHeader(), "fail"},
		"alipay: another seller": {"alipay", alipayExample("out_trade_no", "ORD-FM", "seller_id", "2088000000000001").signed(k),
			alipayHeader(), "fail"},
		"stripe: live mode on a test source": func() req { b, h := stripe(true, ""); return req{"stripe", b, h, `"error":`} }(),
		"stripe: a connected account":        func() req { b, h := stripe(false, "acct_1Other"); return req{"stripe", b, h, `"error":`} }(),
		"adyen: another merchant account":    {"adyen", adyen, jsonHeader(), `"error":`},
		"shopify: another shop":              {"shopify", shopifyBody, shopifyHeader, `"error":`},
		"wechat pay: another merchant": func() req {
			b, h := wechat("1900000999", "wxd678efh567hg6787")
			return req{"wechatpay", b, h, `"FAIL"`}
		}(),
		"wechat pay: another app": func() req { b, h := wechat(wechatMchID, "wx0ther"); return req{"wechatpay", b, h, `"FAIL"`} }(),
	}
	for name, c := range cases {
		a := p.Post(t, c.source, c.body, c.h)
		require.Equal(t, http.StatusForbidden, a.Status, "%s: %s", name, a.Body)
		require.Contains(t, string(a.Body), c.answer, name)
	}
	// The dangerous direction: a test-mode event sent to a live source.
	b, h := stripe(false, "")
	a := live.Post(t, "stripe", b, h)
	require.Equal(t, http.StatusForbidden, a.Status, "test mode on a live source: %s", a.Body)
	require.Contains(t, string(a.Body), `livemode \"false\" is not this source's`)
	require.Zero(t, live.Callbacks(t, "stripe"))
	for _, src := range []string{"alipay", "stripe", "adyen", "shopify", "wechatpay"} {
		require.Zero(t, p.Callbacks(t, src), "%s: nothing refused is stored", src)
	}
	require.Equal(t, payment.OrderUnpaid, p.Order(t, "ORD-FM").PaymentStatus)
	require.Equal(t, payment.OrderUnpaid, p.Order(t, shopifyCode("ORD-FM")).PaymentStatus)

	// The same notifications for our merchant pay.
	b, h = wechat(wechatMchID, "wxd678efh567hg6787")
	require.Equal(t, http.StatusNoContent, p.Post(t, "wechatpay", b, h).Status)
	row := p.Settled(t, "wechatpay", "EV-FM-"+wechatMchID+"wxd678efh567hg6787")
	require.Equal(t, "ORD-FM", row.BusinessKey)
	require.Equal(t, payment.OrderPaid, p.Order(t, "ORD-FM").PaymentStatus)
}

// TestPresetPaymentCurrencies: each preset's payment carries the
// platform's currency, and a payment in another currency than the order's
// is FAILED with a reason naming both (1999 JPY, IDR, KRW or USD never pays
// an order of 1999 CNY minor units); a decimal amount converts by its
// currency's exponent (Shopify "1999" JPY pays 1999 JPY, "1.999" KWD pays
// 1999 fils); Stripe pays on amount_received, not amount.
func TestPresetPaymentCurrencies(t *testing.T) {
	p := paymentPresets(t, func(c *config.Config) {
		for i := range c.Sources {
			if c.Sources[i].Name == "stripe" {
				c.Sources[i].Platform.Livemode = "true"
			}
		}
	})
	for _, o := range []string{"ORD-ST-JPY", "ORD-AD-IDR", "ORD-WX-USD"} {
		p.CreateOrder(t, o, 1999, "CNY")
	}
	p.CreateOrder(t, shopifyCode("ORD-SH-KRW"), 1999, "CNY")
	p.CreateOrder(t, shopifyCode("ORD-SH-JPY"), 1999, "JPY")
	p.CreateOrder(t, shopifyCode("ORD-SH-KWD"), 1999, "KWD")
	p.CreateOrder(t, "ORD-ST-PART", 5000, "USD")

	stripe := func(id, order string, amount, received int64, currency string) {
		body := stripeEventFor(id, order, amount, received, currency, true, "")
		require.Equal(t, http.StatusOK, p.Post(t, "stripe", body, stripeSigned(body, stripeSecret, time.Now())).Status, id)
	}
	shopify := func(id int64, name, total, currency string) string {
		body := fmt.Appendf(nil, `{"id":%d,"name":%q,"currency":%q,"total_price":%q,"financial_status":"paid","updated_at":"2026-11-30T12:00:00Z"}`,
			id, name, currency, total)
		a := p.Post(t, "shopify", body, shopifySigned(body, shopifySecret, "wh", "orders/paid"))
		require.Equal(t, http.StatusOK, a.Status, "%s: %s", name, a.Body)
		return fmt.Sprintf("order:%d:2026-11-30T12:00:00Z:paid", id)
	}
	stripe("evt_jpy", "ORD-ST-JPY", 1999, 1999, "jpy")
	stripe("evt_part", "ORD-ST-PART", 5000, 100, "usd")
	adyen := authorisation("PSP-IDR", "ORD-AD-IDR", 1999, "true")
	adyen.Currency = "IDR"
	require.Equal(t, http.StatusOK, p.Post(t, "adyen", adyenSigned(adyenKey, adyen), jsonHeader()).Status)
	krw := shopify(1, "ORD-SH-KRW", "1999", "KRW")
	jpy := shopify(2, "ORD-SH-JPY", "1999", "JPY")
	kwd := shopify(3, "ORD-SH-KWD", "1.999", "KWD")
	plain := strings.Replace(wechatTransaction("ORD-WX-USD", "T-USD", "SUCCESS", 1999), `"currency":"CNY"`, `"currency":"USD"`, 1)
	body := wechatNotification("EV-USD", "TRANSACTION.SUCCESS", "transaction", wechatAPIv3Key, plain)
	require.Equal(t, http.StatusNoContent, p.Post(t, "wechatpay", body, wechatSigned(testenv.RSAKeys()[0], wechatPubKeyID, body, time.Now())).Status)

	// Money in another currency, or another amount, is an exception for
	// a person: the callback SUCCESS, the order unchanged.
	exception := func(source, event, want string) {
		t.Helper()
		row := p.Settled(t, source, event)
		require.Equal(t, callback.StatusSuccess, row.Status, event)
		require.Equal(t, want, p.LastNote(t, row.ID), event)
	}
	exception("stripe", "evt_jpy", "exception currency_mismatch: payment in JPY, order in CNY")
	exception("adyen", "PSP-IDR:AUTHORISATION:true", "exception currency_mismatch: payment in IDR, order in CNY")
	exception("shopify", krw, "exception currency_mismatch: payment in KRW, order in CNY")
	exception("wechatpay", "EV-USD", "exception currency_mismatch: payment in USD, order in CNY")
	exception("stripe", "evt_part", "exception amount_mismatch: payment 100, order 5000 (USD minor units)")
	for _, o := range []string{"ORD-ST-JPY", "ORD-AD-IDR", "ORD-WX-USD", shopifyCode("ORD-SH-KRW"), "ORD-ST-PART"} {
		require.Equal(t, payment.OrderUnpaid, p.Order(t, o).PaymentStatus, o)
	}
	p.Settled(t, "shopify", jpy)
	p.Settled(t, "shopify", kwd)
	require.Equal(t, payment.OrderPaid, p.Order(t, shopifyCode("ORD-SH-JPY")).PaymentStatus, "1999 yen is 1999 yen")
	require.Equal(t, payment.OrderPaid, p.Order(t, shopifyCode("ORD-SH-KWD")).PaymentStatus, "1.999 dinar is 1999 fils")
}

// TestPlatformMinorUnitsUnlikeISO: where a platform counts a currency's
// minor units unlike ISO 4217 (Stripe: ISK and UGX with two decimals, MGA
// with none; Adyen: CLP and ISK with two, CVE and IDR with none), its
// integer amount is converted to ISO minor units, the unit of
// orders.amount, and one that is not whole in ISO units is refused: Stripe's
// 5000 ISK is 50 krónur and never pays an order of 5000.
func TestPlatformMinorUnitsUnlikeISO(t *testing.T) {
	t.Parallel()
	st, err := platform.New("stripe", platform.Config{Secrets: []string{stripeSecret}})
	require.NoError(t, err)
	stripe := func(amount int64, currency string) (callback.PaymentEvent, error) {
		body := stripeEventFor("evt_iso", "ORD-ISO", amount, amount, currency, true, "")
		cbs, err := st.Read(platform.Request{Header: stripeSigned(body, stripeSecret, time.Now()), Body: body, Now: time.Now()})
		return eventOf(cbs, err)
	}
	ad := newAdyen(t, adyenKey)
	adyen := func(value int64, currency string) (callback.PaymentEvent, error) {
		it := authorisation("PSP-ISO", "ORD-ISO", value, "true")
		it.Currency = currency
		cbs, err := ad.Read(platform.Request{Body: adyenSigned(adyenKey, it), Now: time.Now()})
		return eventOf(cbs, err)
	}
	for _, c := range []struct {
		read     func(int64, string) (callback.PaymentEvent, error)
		name     string
		amount   int64
		currency string
		want     int64
	}{
		{stripe, "stripe", 500000, "isk", 5000}, {stripe, "stripe", 1500, "ugx", 15}, {stripe, "stripe", 5000, "mga", 500000},
		{stripe, "stripe", 1999, "usd", 1999}, {stripe, "stripe", 1999, "jpy", 1999},
		{adyen, "adyen", 100000, "CLP", 1000}, {adyen, "adyen", 500000, "ISK", 5000}, {adyen, "adyen", 12, "CVE", 1200},
		{adyen, "adyen", 15000, "IDR", 1500000}, {adyen, "adyen", 1999, "EUR", 1999},
	} {
		ev, err := c.read(c.amount, c.currency)
		require.NoError(t, err, "%s %d %s", c.name, c.amount, c.currency)
		require.Equal(t, c.want, ev.Amount, "%s %d %s", c.name, c.amount, c.currency)
	}
	_, err = stripe(5050, "isk")
	require.ErrorContains(t, err, "amount 5050 ISK is not a whole number of ISK's ISO 4217 minor units")
	_, err = adyen(100050, "CLP")
	require.ErrorContains(t, err, "not a whole number")
}

// eventOf is the payment event of the one callback read, or why it could
// not be read.
func eventOf(cbs []platform.Callback, err error) (callback.PaymentEvent, error) {
	switch {
	case err != nil:
		return callback.PaymentEvent{}, err
	case cbs[0].Unreadable != "":
		return callback.PaymentEvent{}, errors.New(cbs[0].Unreadable)
	}
	return cbs[0].Event.(callback.PaymentEvent), nil
}

// TestMerchantBindingEdges: a WeChat Pay refund (its resource has no appid)
// is taken with WECHATPAY_APPID set, and read as the refund it is; an Alipay notification of an ISV's app
// for another merchant (auth_app_id) is refused; a merchant list of blanks
// is no list.
func TestMerchantBindingEdges(t *testing.T) {
	t.Parallel()
	k := testenv.RSAKeys()[0]
	cfg := wechatKeyConfig()
	cfg.AppID = "wxd678efh567hg6787"
	wx, err := platform.New("wechatpay-v3", cfg)
	require.NoError(t, err)
	refund := `{"mchid":"` + wechatMchID + `","out_trade_no":"WX-R","transaction_id":"T","out_refund_no":"R1","refund_id":"50000000382019052709732678859","refund_status":"SUCCESS","amount":{"total":5,"refund":5}}`
	body := wechatNotification("EV-R", "REFUND.SUCCESS", "refund", wechatAPIv3Key, refund)
	cbs, err := wx.Read(platform.Request{Header: wechatSigned(k, wechatPubKeyID, body, time.Now()), Body: body, Now: time.Now()})
	require.NoError(t, err, "a refund has no appid to compare")
	created := time.Date(2018, time.June, 8, 2, 34, 56, 0, time.UTC) // the notification's create_time: the refund names no success_time
	require.Equal(t, callback.PaymentEvent{Type: callback.TypeRefund, OrderCode: "WX-R", PaymentNo: "T", RefundNo: "50000000382019052709732678859",
		Amount: 5, Currency: "CNY", Status: callback.RefundSuccess, OccurredAt: &created}, cbs[0].Event)

	ali, err := platform.New("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(k)}}, AppID: alipayAppID})
	require.NoError(t, err)
	read := func(kv ...string) error {
		_, err := ali.Read(platform.Request{Header: alipayHeader(), Body: alipayExample(kv...).signed(k), Now: time.Now()})
		return err
	}
	require.NoError(t, read("auth_app_id", alipayAppID), "our own app")
	err = read("auth_app_id", "2021000000009999")
	require.True(t, platform.IsForeignMerchant(err), "another merchant of the same ISV app: %v", err)

	for _, blank := range []string{",", " , ", ""} {
		require.Contains(t, platform.Missing("adyen", platform.Config{Secrets: []string{adyenKey}, MerchantAccounts: blank}),
			"platform.merchant_accounts (ADYEN_MERCHANT_ACCOUNTS)", "%q", blank)
		require.Contains(t, platform.Missing("shopify", platform.Config{Secrets: []string{"s"}, ShopDomains: blank}),
			"platform.shop_domains (SHOPIFY_SHOP_DOMAINS)", "%q", blank)
	}
	require.Empty(t, platform.Missing("adyen", platform.Config{Secrets: []string{adyenKey}, MerchantAccounts: " , A"}))
}
