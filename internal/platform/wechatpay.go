package platform

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// WeChat Pay API v3 (preset wechatpay-v3): the payment notification, a
// JSON POST signed SHA256withRSA over "timestamp\nnonce\nbody\n" (the
// Wechatpay-Timestamp and Wechatpay-Nonce headers, the raw body) with the
// key Wechatpay-Serial names: a WeChat Pay public key id (PUB_KEY_ID_...)
// or a platform certificate serial. The timestamp must be within the
// tolerance (default 5 minutes) either way. Signature probes
// (WECHATPAY/SIGNTEST/...) are refused like any bad signature, as WeChat
// Pay expects. Once the signature holds, resource is decrypted with the
// APIv3 key (AEAD_AES_256_GCM, nonce and associated data from the body).
// Event id: id. Order: out_trade_no; payment: transaction_id; amount:
// amount.total, in fen; currency: amount.currency; paid at: success_time.
// trade_state SUCCESS pays; CLOSED closes the unpaid order; REVOKED and
// PAYERROR fail; any other state is stored and processed without effect. A
// refund notification (original_type refund) counts or fails the refund
// refund_id (see wechatRefund). Keys: apiv3_key (32 bytes),
// public_keys ({id, key}: the WeChat Pay public key and its id) and/or
// certificates (PEM bundles of platform certificates): during a switch
// from certificates to the public key, or a rotation, configure both.
// With certificates and the merchant's credentials, the platform
// certificates are also downloaded and renewed while the source serves
// (PlatformCertificates, wechatpay_certs.go; internal/wechatcerts).
// Merchant: mchid (required) must match the decrypted resource's mchid,
// and app_id, when set, its appid; another merchant's notification is
// refused (403) and not stored.
// Answers: 204 with no body; a refusal is the intake's 4xx/5xx with
// {"code":"FAIL","message":...}, after which WeChat Pay resends
// (15s/15s/30s/3m/10m/20m/30m/30m/30m/60m/3h/3h/3h/6h/6h).
type wechatPay struct {
	keys      *wechatKeys // the configured keys and the downloaded platform certificates (wechatpay_certs.go)
	aes       *AESGCM
	tolerance time.Duration
	mchID     string
	appID     string // "" when not checked
}

// WeChat Pay's headers and values.
const (
	wechatSerialHeader    = "Wechatpay-Serial"
	wechatSignatureHeader = "Wechatpay-Signature"
	wechatTimestampHeader = "Wechatpay-Timestamp"
	wechatNonceHeader     = "Wechatpay-Nonce"
	wechatSigTypeHeader   = "Wechatpay-Signature-Type"
	wechatSigType         = "WECHATPAY2-SHA256-RSA2048"
	wechatProbePrefix     = "WECHATPAY/SIGNTEST/"
	wechatAlgorithm       = "AEAD_AES_256_GCM"
	wechatAPIv3KeyLen     = 32
	wechatCurrency        = "CNY"
)

func newWeChatPay(cfg Config) (Platform, error) {
	ring, errs := newWeChatKeys(cfg.PublicKeys, cfg.Certificates)
	if len(errs) == 0 && ring.len() == 0 {
		errs = append(errs, fieldErr("public_keys", errors.New("at least one WeChat Pay public key (or a platform certificate under certificates) is required")))
	}
	var aes *AESGCM
	switch n := len(cfg.APIv3Key); {
	case n == 0:
		errs = append(errs, fieldErr("apiv3_key", errors.New("is required (it decrypts the notification's resource)")))
	case n != wechatAPIv3KeyLen:
		errs = append(errs, fieldErr("apiv3_key", fmt.Errorf("must be %d bytes (the APIv3 key set in the merchant platform), not %d", wechatAPIv3KeyLen, n)))
	default:
		var err error
		if aes, err = NewAESGCM([]byte(cfg.APIv3Key)); err != nil {
			errs = append(errs, fieldErr("apiv3_key", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &wechatPay{keys: ring, aes: aes, tolerance: toleranceOr(cfg.Tolerance),
		mchID: strings.TrimSpace(cfg.MchID), appID: strings.TrimSpace(cfg.AppID)}, nil
}

func (p *wechatPay) Kind() string { return callback.KindPayment }

func (p *wechatPay) Headers() []string {
	return []string{wechatSerialHeader, wechatSignatureHeader, wechatTimestampHeader, wechatNonceHeader, wechatSigTypeHeader, "Request-Id"}
}

// Errors of a wechatpay-v3 request that are about its signature.
var (
	errWeChatTimestamp = fmt.Errorf("%s is not a unix timestamp in seconds: %w", wechatTimestampHeader, signature.ErrMalformed)
	errWeChatTooOld    = fmt.Errorf("%s too old: %w", wechatTimestampHeader, signature.ErrExpired)
	errWeChatTooNew    = fmt.Errorf("%s too far in the future: %w", wechatTimestampHeader, signature.ErrExpired)
	errWeChatProbe     = fmt.Errorf("%s is a signature probe (%s...): %w", wechatSignatureHeader, wechatProbePrefix, signature.ErrMismatch)
	errWeChatSigType   = fmt.Errorf("%s is not %s: %w", wechatSigTypeHeader, wechatSigType, signature.ErrMalformed)
)

// wechatEnvelope is the notification around the encrypted resource.
type wechatEnvelope struct {
	ID        string `json:"id"`
	EventType string `json:"event_type"`
	// CreateTime is when WeChat Pay created the notification (RFC 3339):
	// the time of what an event without its own time reports.
	CreateTime string `json:"create_time"`
	Resource   *struct {
		OriginalType   string `json:"original_type"`
		Algorithm      string `json:"algorithm"`
		Ciphertext     string `json:"ciphertext"`
		AssociatedData string `json:"associated_data"`
		Nonce          string `json:"nonce"`
	} `json:"resource"`
}

func (p *wechatPay) Read(req Request) ([]Callback, error) {
	if err := needMediaType(req.Header, "application/json"); err != nil {
		return nil, err
	}
	if err := p.verify(req); err != nil {
		return nil, err
	}
	return p.interpret(req.Body)
}

func (p *wechatPay) Reread(req Request) ([]Callback, error) {
	if err := needMediaType(req.Header, "application/json"); err != nil {
		return nil, err
	}
	return p.interpret(req.Body)
}

// interpret decrypts a verified notification's resource, checks its
// merchant and maps it to its event. A resource that does not decrypt
// names no merchant, so it is refused (400) rather than stored.
func (p *wechatPay) interpret(body []byte) ([]Callback, error) {
	var env wechatEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, badRequest("the body is not a WeChat Pay notification (JSON object)")
	}
	if strings.TrimSpace(env.ID) == "" {
		return nil, badRequest("id is missing")
	}
	r := env.Resource
	switch {
	case r == nil:
		return nil, badRequest("resource is missing")
	case r.Algorithm != wechatAlgorithm:
		return nil, badRequest("resource.algorithm %q is not %s", truncate(r.Algorithm), wechatAlgorithm)
	}
	plain, err := p.aes.Open(r.Nonce, r.AssociatedData, r.Ciphertext)
	if err != nil {
		return nil, badRequest("resource: %v", err)
	}
	obj, err := callback.ParseObject(plain)
	if err != nil {
		return nil, badRequest("resource: the decrypted text is not a JSON object")
	}
	// One merchant's APIv3 key and WeChat Pay's key say nothing about
	// whose notification this is: the resource does.
	mchID, err := obj.Scalar("mchid")
	if err != nil {
		return nil, badRequest("resource: %v", err)
	}
	if mchID != p.mchID {
		return nil, foreign("mchid", mchID)
	}
	// appid, when the source names one, binds the notifications that
	// carry it (transactions); a refund's resource has none.
	if appID, err := obj.Scalar("appid"); p.appID != "" && err == nil && appID != p.appID {
		return nil, foreign("appid", appID)
	}
	order, _ := obj.Scalar("out_trade_no")
	var ev callback.PaymentEvent
	switch {
	case r.OriginalType == "refund" || strings.HasPrefix(env.EventType, "REFUND."):
		ev, err = wechatRefund(obj)
	case r.OriginalType == "transaction" || strings.HasPrefix(env.EventType, "TRANSACTION."):
		ev, err = wechatTransaction(obj, env.ID)
	default:
		ev = callback.PaymentEvent{Ignored: fmt.Sprintf("wechat pay %s notification (%s) is neither a payment nor a refund",
			truncate(env.EventType), truncate(r.OriginalType))}
	}
	if err != nil {
		return []Callback{unreadable(env.ID, order, err)}, nil
	}
	if ev.Ignored == "" && ev.OccurredAt == nil && ev.PaidAt == nil {
		ev.OccurredAt = parseRFC3339(env.CreateTime)
	}
	key := order
	if ev.Ignored != "" {
		key = orderOr(obj, "out_trade_no", env.ID)
	}
	return []Callback{{EventID: env.ID, BusinessKey: key, Event: ev}}, nil
}

// ReadAnswer maps WeChat Pay's answer to callgate's query about order
// (GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=: the
// transaction as plain JSON, its signature checked with VerifyAnswer) into
// the callback a notification of that transaction gives, through the same
// wechatTransaction: SUCCESS pays; CLOSED closes the order; REVOKED and
// PAYERROR fail the payment. NOTPAY and USERPAYING say nothing happened:
// no callback. REFUND (paid, and refunded since, by how much it does not
// say) is ErrRefundedAnswer: nothing is applied. The answer must be
// this merchant's (mchid, and appid when the source names one) and about
// order. Its event id is the query's own ("query:<order>:<state>[:<transaction>]"),
// so asking again stores nothing twice, and a late notification of the
// same payment is a callback of its own that finds the payment applied.
func (p *wechatPay) ReadAnswer(order string, answer []byte) ([]Callback, error) {
	obj, err := callback.ParseObject(answer)
	if err != nil {
		return nil, badRequest("the answer is not a JSON object")
	}
	if mchID, err := obj.Scalar("mchid"); err != nil || mchID != p.mchID {
		return nil, foreign("mchid", mchID)
	}
	// A transaction always carries its appid: one the source names binds.
	if appID, err := obj.Scalar("appid"); p.appID != "" && (err != nil || appID != p.appID) {
		return nil, foreign("appid", appID)
	}
	if got, err := obj.Scalar("out_trade_no"); err != nil || got != order {
		return nil, badRequest("the answer is about out_trade_no %q, not %q", truncate(got), truncate(order))
	}
	state, err := obj.Scalar("trade_state")
	if err != nil {
		return nil, badRequest("trade_state: %v", err)
	}
	id := "query:" + order + ":" + state
	if txn, err := obj.Scalar("transaction_id"); err == nil && txn != "" {
		id += ":" + txn
	}
	switch state {
	case "NOTPAY", "USERPAYING":
		return nil, nil
	case "REFUND":
		return nil, ErrRefundedAnswer
	}
	ev, err := wechatTransaction(obj, id)
	if err != nil {
		return []Callback{unreadable(id, order, err)}, nil
	}
	if ev.Ignored != "" {
		return nil, nil
	}
	return []Callback{{EventID: id, BusinessKey: order, Event: ev}}, nil
}

// VerifyAnswer checks a signature WeChat Pay put on an answer
// (Wechatpay-Signature over message, by the key Wechatpay-Serial names)
// with the keys the source verifies notifications with.
func (p *wechatPay) VerifyAnswer(serial, message, sig string) error {
	pub := p.keys.lookup(strings.TrimSpace(serial), time.Now())
	if pub == nil {
		return fmt.Errorf("%s %s names no configured WeChat Pay public key or platform certificate: %w",
			wechatSerialHeader, strconv.Quote(truncate(serial)), signature.ErrMismatch)
	}
	return signature.VerifySHA256WithRSA(pub, []byte(message), sig)
}

// wechatTransaction maps a transaction resource: trade_state SUCCESS pays;
// CLOSED closes the unpaid order; REVOKED (a payment-code payment taken
// back) and PAYERROR fail the payment; any other state changes nothing
// (pay.weixin.qq.com/wiki/doc/apiv3/apis/chapter3_2_5.shtml, "支付通知";
// WeChat Pay notifies paid orders only: CLOSED comes from a query answer).
func wechatTransaction(obj callback.Object, notificationID string) (callback.PaymentEvent, error) {
	order, err := obj.Scalar("out_trade_no")
	if err != nil {
		return callback.PaymentEvent{}, err
	}
	state, err := obj.Scalar("trade_state")
	if err != nil {
		return callback.PaymentEvent{}, err
	}
	ev := callback.PaymentEvent{OrderCode: order}
	switch state {
	case "SUCCESS":
		ev.Status = callback.PaymentSuccess
	case "REVOKED", "PAYERROR":
		ev.Status = callback.PaymentFailed
	case "CLOSED":
		return callback.PaymentEvent{Type: callback.TypeClose, OrderCode: order, Reason: "wechat pay trade_state CLOSED"}, nil
	default:
		return callback.PaymentEvent{Ignored: fmt.Sprintf("wechat pay trade_state %s is neither a payment nor a failed payment", truncate(state))}, nil
	}
	if ev.PaymentNo, err = obj.Scalar("transaction_id"); err != nil {
		if ev.Status == callback.PaymentSuccess {
			return ev, err
		}
		// A payment that failed before WeChat Pay made a transaction.
		ev.PaymentNo = notificationID
	}
	total, err := obj.Scalar("amount.total")
	if err != nil {
		return ev, err
	}
	if ev.Amount, err = MinorUnits(total, 0); err != nil {
		return ev, badRequest("amount.total: %v", err)
	}
	// amount.currency is CNY for a merchant in mainland China, the only
	// currency such a merchant may charge; it is read when present.
	if ev.Currency, err = wechatCurrencyOf(obj, "amount.currency"); err != nil {
		return ev, err
	}
	if ev.Status == callback.PaymentSuccess {
		ev.PaidAt = rfc3339At(obj, "success_time")
	}
	return ev, nil
}

// wechatRefund maps a refund resource (event_type REFUND.SUCCESS,
// REFUND.ABNORMAL, REFUND.CLOSED; pay.weixin.qq.com/doc/v3/merchant/4012082053,
// "退款结果通知"): the refund refund_id of the payment transaction_id of
// order out_trade_no, amount.refund fen. SUCCESS counts it; CLOSED fails
// it. ABNORMAL (the money could not reach the payer's account) is not
// final: the merchant hands it to WeChat Pay's abnormal-refund flow under
// the same refund_id, which ends in REFUND.SUCCESS or REFUND.CLOSED; it is
// stored with a note that says so, and changes nothing.
func wechatRefund(obj callback.Object) (callback.PaymentEvent, error) {
	ev := callback.PaymentEvent{Type: callback.TypeRefund}
	var err error
	if ev.OrderCode, err = obj.Scalar("out_trade_no"); err != nil {
		return ev, err
	}
	ev.PaymentNo, _ = obj.Scalar("transaction_id")
	if ev.RefundNo, err = obj.Scalar("refund_id"); err != nil {
		return ev, err
	}
	status, err := obj.Scalar("refund_status")
	if err != nil {
		return ev, err
	}
	switch status {
	case "SUCCESS":
		ev.Status = callback.RefundSuccess
	case "ABNORMAL":
		return callback.PaymentEvent{Ignored: fmt.Sprintf("wechat pay refund %s is ABNORMAL: the money could not reach the payer's account; "+
			"apply an abnormal refund in the merchant platform, whose REFUND.SUCCESS or REFUND.CLOSED is applied", truncate(ev.RefundNo))}, nil
	case "CLOSED":
		ev.Status, ev.Reason = callback.RefundFailed, "wechat pay REFUND.CLOSED: the refund was closed"
	default:
		return callback.PaymentEvent{Ignored: fmt.Sprintf("wechat pay refund_status %s is not final", truncate(status))}, nil
	}
	refund, err := obj.Scalar("amount.refund")
	if err != nil {
		return ev, err
	}
	if ev.Amount, err = MinorUnits(refund, 0); err != nil {
		return ev, badRequest("amount.refund: %v", err)
	}
	if ev.Currency, err = wechatCurrencyOf(obj, "amount.currency"); err != nil {
		return ev, err
	}
	// success_time dates a refund that succeeded; create_time is when it
	// began (a CLOSED one is dated by its notification).
	if ev.Status == callback.RefundSuccess {
		ev.OccurredAt = rfc3339At(obj, "success_time")
	}
	ev.InitiatedAt = rfc3339At(obj, "create_time")
	return ev, nil
}

// wechatCurrencyOf is the currency at path, CNY when absent.
func wechatCurrencyOf(obj callback.Object, path string) (string, error) {
	currency := wechatCurrency
	if c, err := obj.Scalar(path); err == nil {
		currency = c
	}
	c, err := callback.Currency(currency)
	if err != nil {
		return "", badRequest("%s: %v", path, err)
	}
	return c, nil
}

// verify checks the headers, the timestamp window and the signature of
// "timestamp\nnonce\nbody\n" with the key Wechatpay-Serial names.
func (p *wechatPay) verify(req Request) error {
	h := req.Header
	var vals [4]string
	for i, name := range []string{wechatSerialHeader, wechatSignatureHeader, wechatTimestampHeader, wechatNonceHeader} {
		if vals[i] = h.Get(name); strings.TrimSpace(vals[i]) == "" {
			return fmt.Errorf("%s: %w", name, signature.ErrMissing)
		}
	}
	serial, sig, ts, nonce := strings.TrimSpace(vals[0]), vals[1], vals[2], vals[3]
	if t := h.Get(wechatSigTypeHeader); t != "" && t != wechatSigType {
		return errWeChatSigType
	}
	sec, ok := unixSeconds(ts)
	if !ok {
		return errWeChatTimestamp
	}
	switch d := req.Now.Sub(time.Unix(sec, 0)); {
	case d > p.tolerance:
		return errWeChatTooOld
	case d < -p.tolerance:
		return errWeChatTooNew
	}
	if strings.HasPrefix(sig, wechatProbePrefix) {
		return errWeChatProbe
	}
	pub := p.keys.lookup(serial, req.Now)
	if pub == nil {
		return fmt.Errorf("%s %s names no configured WeChat Pay public key or platform certificate: %w",
			wechatSerialHeader, strconv.Quote(truncate(serial)), signature.ErrMismatch)
	}
	msg := make([]byte, 0, len(ts)+len(nonce)+len(req.Body)+3)
	msg = append(append(msg, ts...), '\n')
	msg = append(append(msg, nonce...), '\n')
	msg = append(append(msg, req.Body...), '\n')
	if err := signature.VerifySHA256WithRSA(pub, msg, sig); err != nil {
		return fmt.Errorf("%s: %w", wechatSignatureHeader, err)
	}
	return nil
}

// unixSeconds parses a decimal unix time of at most 18 digits.
func unixSeconds(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, true
}

// Accepted: 204, no body (WeChat Pay takes 200 or 204).
func (p *wechatPay) Accepted([]Stored) Answer { return Answer{Status: http.StatusNoContent} }

// Refused: {"code":"FAIL","message":reason}; the status makes WeChat Pay
// resend.
func (p *wechatPay) Refused(status int, reason string) Answer {
	b, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{"FAIL", reason})
	return jsonAnswer(status, b)
}
