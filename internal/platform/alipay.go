package platform

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// Alipay (preset alipay): the asynchronous trade notification (notify_url),
// a form POST signed RSA2: SHA256withRSA, by Alipay's key, over every
// parameter except sign and sign_type, sorted by name and joined as
// k=v&k=v with the values form-decoded exactly once (rsaCheckV1), that
// string being signed in the notification's charset (utf-8, gbk or
// gb2312: the escaped bytes of the body are in it, and the values are
// stored and read as UTF-8). sign_type must be RSA2 (RSA, i.e.
// SHA1withRSA, is refused).
// Event id: notify_id (the same on every resend). Order: out_trade_no;
// payment: trade_no; amount: total_amount in yuan (or in trans_currency
// when the notification names one), converted to minor units;
// paid at: gmt_payment (China time). trade_status TRADE_SUCCESS and
// TRADE_FINISHED pay; with refund_fee above zero they are a refund of
// out_biz_no whose running total is refund_fee; TRADE_CLOSED with
// refund_fee is a (full) refund likewise, without it a closure of the
// unpaid trade; any other status (WAIT_BUYER_PAY) is stored and processed
// without effect (see interpret). Keys: public_keys, the "Alipay
// public key" (not the app's key) as the console shows it (bare base64) or
// as PEM; several during a rotation, any may verify. Merchant: app_id
// (required) must match every notification's app_id, and seller_id, when
// set, its seller_id; another merchant's notification is refused (403)
// and not stored. Alipay wants exactly "success" in a 200, or it
// resends 8 times within 25 hours (4m, 10m, 10m, 1h, 2h, 6h, 15h); a
// refusal answers "fail".
type alipay struct {
	keys     *signature.KeyRing
	appID    string
	sellerID string // "" when not checked
}

// Alipay's answers and the values it sends.
const (
	alipaySuccess      = "success"
	alipayFail         = "fail"
	alipaySignType     = "RSA2"
	alipayCharsetParam = "charset"
	alipayCurrency     = "CNY"
	alipayContentType  = "application/x-www-form-urlencoded"
	alipayAnswerType   = "text/plain; charset=utf-8"
	alipayTradeSuccess = "TRADE_SUCCESS"
	alipayTradeDone    = "TRADE_FINISHED"
	alipayTradeClosed  = "TRADE_CLOSED"
)

func newAlipay(cfg Config) (Platform, error) {
	ring, errs := publicKeyRing(cfg.PublicKeys, nil, false)
	if len(errs) == 0 && ring.Len() == 0 {
		errs = append(errs, fieldErr("public_keys", errors.New("at least one Alipay public key is required")))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &alipay{keys: ring, appID: strings.TrimSpace(cfg.AppID), sellerID: strings.TrimSpace(cfg.SellerID)}, nil
}

func (p *alipay) Kind() string { return callback.KindPayment }

// Headers: everything Alipay sends is in the body.
func (p *alipay) Headers() []string { return nil }

// Errors of an alipay request that are about its signature.
var (
	errAlipayNoSign     = fmt.Errorf("parameter sign: %w", signature.ErrMissing)
	errAlipayNoSignType = fmt.Errorf("parameter sign_type: %w", signature.ErrMissing)
)

func (p *alipay) Read(req Request) ([]Callback, error) {
	f, cs, err := p.form(req)
	if err != nil {
		return nil, err
	}
	sign := f["sign"]
	switch st := f["sign_type"]; {
	case sign == "":
		return nil, errAlipayNoSign
	case st == "":
		return nil, errAlipayNoSignType
	case st != alipaySignType:
		return nil, fmt.Errorf("sign_type %q is not accepted, only RSA2 (SHA256withRSA): %w", truncate(st), signature.ErrMalformed)
	}
	// Alipay's SDKs verify the string's bytes in the notification's
	// charset (alipay-sdk-java AlipaySignature.rsaCheckV1(params, key,
	// charset, signType): content.getBytes(charset)).
	content, err := cs.Encode(string(alipaySignedContent(f)))
	if err != nil {
		return nil, badRequest("the parameters cannot be written in charset %s", truncate(cs.Name))
	}
	if err := p.keys.VerifyAny(content, sign); err != nil {
		return nil, fmt.Errorf("parameter sign: %w", err)
	}
	return p.interpret(f)
}

func (p *alipay) Reread(req Request) ([]Callback, error) {
	f, _, err := p.form(req)
	if err != nil {
		return nil, err
	}
	return p.interpret(f)
}

// form reads the request's form body, in the charset its charset
// parameter names (Alipay's PC-website example sends gbk), else UTF-8.
// Only the signed parameter decides: the Content-Type's charset is not
// signed, and a body whose bytes read as text in two charsets would
// otherwise be two notifications under one signature (a stored
// notification, read again, has no Content-Type either).
func (p *alipay) form(req Request) (Form, Charset, error) {
	if err := needMediaType(req.Header, alipayContentType); err != nil {
		return nil, Charset{}, err
	}
	return ParseFormCharset(req.Body, alipayCharsetParam, "")
}

// interpret checks a verified notification's merchant and maps it to its
// event. The trade's notifications report its whole life
// (opendocs.alipay.com/open/270/105902, "异步通知参数"; refunds:
// opendocs.alipay.com/open/02e7gm, alipay.trade.refund, which notifies the
// trade's notify_url): TRADE_SUCCESS and TRADE_FINISHED pay; the same with
// refund_fee above zero (and gmt_refund, out_biz_no) is a partial refund,
// refund_fee being everything refunded of the trade so far; TRADE_CLOSED
// with refund_fee is a full refund, without it an unpaid trade closed
// (timed out or cancelled). Alipay's pages do not say that every refund
// notifies (docs/platforms/alipay.md).
func (p *alipay) interpret(f Form) ([]Callback, error) {
	// Signed, and ours: Alipay's own demo checks both.
	if f["app_id"] != p.appID {
		return nil, foreign("app_id", f["app_id"])
	}
	// A third-party (ISV) app's notifications carry the app_id of the
	// ISV, shared by every merchant it serves, and the merchant's own in
	// auth_app_id: a merchant's app (this source) takes only its own.
	if auth, ok := f["auth_app_id"]; ok && auth != p.appID {
		return nil, foreign("auth_app_id", auth)
	}
	if p.sellerID != "" && f["seller_id"] != p.sellerID {
		return nil, foreign("seller_id", f["seller_id"])
	}
	id, err := f.Need("notify_id")
	if err != nil {
		return nil, err
	}
	order := f["out_trade_no"]
	ev, err := alipayEvent(f)
	if err != nil {
		return []Callback{unreadable(id, order, err)}, nil
	}
	return []Callback{{EventID: id, BusinessKey: order, Event: ev}}, nil
}

// alipayEvent maps a notification's fields to its event.
func alipayEvent(f Form) (callback.PaymentEvent, error) {
	order, err := f.Need("out_trade_no")
	if err != nil {
		return callback.PaymentEvent{}, err
	}
	status, err := f.Need("trade_status")
	if err != nil {
		return callback.PaymentEvent{}, err
	}
	ev := callback.PaymentEvent{OrderCode: order}
	// Amounts are in trans_currency when the order was priced in a
	// foreign currency (cross-border), else in yuan.
	currency := alipayCurrency
	if c := f["trans_currency"]; c != "" {
		currency = c
	}
	// amountIn reads field's amount in currency: a currency that is not
	// one is named as trans_currency's fault, whichever amount is read
	// first (a notification's refund_fee, 0.00 on a payment, or a query
	// answer's total_amount).
	amountIn := func(field, v string) (int64, string, error) {
		n, code, err := AmountIn(v, currency)
		if err == nil {
			return n, code, nil
		}
		if _, cerr := callback.Currency(currency); cerr != nil {
			field = "trans_currency"
		}
		return 0, "", badRequest("%s: %v", field, err)
	}
	var refunded int64
	if fee := f["refund_fee"]; fee != "" {
		if refunded, ev.Currency, err = amountIn("refund_fee", fee); err != nil {
			return ev, err
		}
	}
	switch status {
	case alipayTradeSuccess, alipayTradeDone, alipayTradeClosed:
	default:
		return callback.PaymentEvent{Ignored: fmt.Sprintf("alipay trade_status %s is neither a payment, a refund nor a closure", truncate(status))}, nil
	}
	if status == alipayTradeClosed && refunded == 0 {
		return callback.PaymentEvent{Type: callback.TypeClose, OrderCode: order, Reason: "alipay TRADE_CLOSED: the trade closed unpaid",
			OccurredAt: chinaAt(f["gmt_close"])}, nil
	}
	if ev.PaymentNo, err = f.Need("trade_no"); err != nil {
		return ev, err
	}
	if refunded > 0 {
		ev.Type, ev.Status, ev.RefundedTotal = callback.TypeRefund, callback.RefundSuccess, &refunded
		ev.RefundNo = f["out_biz_no"] // "": a running total that names no refund
		// gmt_refund dates the refund that made the total; TRADE_CLOSED
		// of a fully refunded trade may give only gmt_close.
		if ev.OccurredAt = chinaAt(f["gmt_refund"]); ev.OccurredAt == nil {
			ev.OccurredAt = chinaAt(f["gmt_close"])
		}
		return ev, nil
	}
	ev.Status = callback.PaymentSuccess
	amount, err := f.Need("total_amount")
	if err != nil {
		return ev, err
	}
	if ev.Amount, ev.Currency, err = amountIn("total_amount", amount); err != nil {
		return ev, err
	}
	ev.PaidAt = chinaAt(f["gmt_payment"])
	return ev, nil
}

// alipaySignedContent is what Alipay signs (rsaCheckV1): every parameter
// but sign and sign_type, sorted by name, as k=v joined with '&', values
// as decoded.
func alipaySignedContent(f Form) []byte { return alipayContent(f, "sign", "sign_type") }

// alipayContent is f's parameters but skip, sorted by name, as k=v joined
// with '&'.
func alipayContent(f Form, skip ...string) []byte {
	keys := make([]string, 0, len(f))
	n := 0
	for k, v := range f {
		if slices.Contains(skip, k) {
			continue
		}
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	b := make([]byte, 0, n)
	for i, k := range keys {
		if i > 0 {
			b = append(b, '&')
		}
		b = append(b, k...)
		b = append(b, '=')
		b = append(b, f[k]...)
	}
	return b
}

func (p *alipay) Accepted([]Stored) Answer {
	return Answer{Status: http.StatusOK, ContentType: alipayAnswerType, Body: []byte(alipaySuccess)}
}

func (p *alipay) Refused(status int, _ string) Answer {
	return Answer{Status: status, ContentType: alipayAnswerType, Body: []byte(alipayFail)}
}

// needMediaType refuses a request whose Content-Type is not want (its
// parameters, such as a charset, are not compared).
func needMediaType(h http.Header, want string) error {
	ct := h.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !strings.EqualFold(mt, want) {
		return badRequest("Content-Type %q is not %s", truncate(ct), want)
	}
	return nil
}
