package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/wechatpay-apiv3/wechatpay-go/core"
	"github.com/wechatpay-apiv3/wechatpay-go/core/option"
	"github.com/wechatpay-apiv3/wechatpay-go/utils"

	"callgate/internal/outbound"
	"callgate/internal/platform"
)

// WeChatPayAPIBase is WECHATPAY_API_BASE's default.
const WeChatPayAPIBase = "https://api.mch.weixin.qq.com"

// WeChatPay queries WeChat Pay API v3 with WeChat Pay's own Go SDK
// (github.com/wechatpay-apiv3/wechatpay-go): its client signs each request
// (Authorization: WECHATPAY2-SHA256-RSA2048, SHA256withRSA with the
// merchant's API private key) and its validator checks the answer's
// Wechatpay-Signature (timestamp window, then the signature, by the key
// the source verifies notifications with).
type WeChatPay struct {
	client   *core.Client
	verifier platform.AnswerVerifier
	base     string
	mchID    string
}

// WeChatPayConfig is what asking WeChat Pay takes.
type WeChatPayConfig struct {
	MchID string
	// PrivateKeyFile is the merchant API private key (PEM), Serial its
	// certificate's serial number.
	PrivateKeyFile, Serial string
	// APIBase is WeChat Pay's API (default WeChatPayAPIBase).
	APIBase string
	// Verifier checks the answers' signatures (the wechatpay-v3 preset).
	Verifier platform.AnswerVerifier
	// HTTP is the client (default: one with the query timeout).
	HTTP *http.Client
}

// NewWeChatPay builds the WeChat Pay querier.
func NewWeChatPay(ctx context.Context, cfg WeChatPayConfig) (*WeChatPay, error) {
	if cfg.MchID == "" || cfg.PrivateKeyFile == "" || cfg.Serial == "" || cfg.Verifier == nil {
		return nil, errors.New("WeChat Pay reconciliation needs the mchid, WECHATPAY_MCH_PRIVATE_KEY_FILE and WECHATPAY_MCH_SERIAL")
	}
	key, err := utils.LoadPrivateKeyWithPath(cfg.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("WECHATPAY_MCH_PRIVATE_KEY_FILE: %w", err)
	}
	base, err := apiBase("WECHATPAY_API_BASE", cfg.APIBase, WeChatPayAPIBase)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = outbound.Client(outbound.Options{Timeout: QueryTimeoutDefault, MaxAnswerBytes: maxAnswerBytes})
	}
	client, err := core.NewClient(ctx,
		option.WithMerchantCredential(cfg.MchID, cfg.Serial, key),
		option.WithVerifier(answerVerifier{cfg.Verifier}),
		option.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("WeChat Pay client: %w", err)
	}
	return &WeChatPay{client: client, verifier: cfg.Verifier, base: base, mchID: cfg.MchID}, nil
}

// Query asks GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=
// (an order not paid yet can only be asked by its out_trade_no). WeChat
// Pay's 404 ORDER_NOT_EXIST says nothing happened.
func (w *WeChatPay) Query(ctx context.Context, order string) (Answer, error) {
	u := w.base + "/v3/pay/transactions/out-trade-no/" + url.PathEscape(order) + "?mchid=" + url.QueryEscape(w.mchID)
	res, err := w.client.Get(ctx, u)
	var apiErr *core.APIError
	switch {
	case errors.As(err, &apiErr):
		// The SDK checks the signature of 2xx answers only. WeChat Pay
		// signs its errors too: "no such order" is believed only signed,
		// or anyone on the path could silence reconciliation.
		if apiErr.StatusCode == http.StatusNotFound && apiErr.Code == "ORDER_NOT_EXIST" {
			if err := w.verifyError(apiErr); err != nil {
				return Answer{}, fmt.Errorf("%w: the ORDER_NOT_EXIST answer: %w", ErrBadSignature, err)
			}
			return Answer{NotFound: true}, nil
		}
		return Answer{}, fmt.Errorf("%w: %d %s %s", ErrRefused, apiErr.StatusCode, apiErr.Code, apiErr.Message)
	case outbound.Refused(err):
		return Answer{}, err
	case err != nil && res != nil && res.Response != nil:
		// The answer came (2xx) and its validation failed.
		return Answer{}, fmt.Errorf("%w: %w", ErrBadSignature, err)
	case err != nil:
		return Answer{}, err
	}
	defer res.Response.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Response.Body, maxAnswerBytes))
	if err != nil {
		return Answer{}, err
	}
	return Answer{Body: body, Header: res.Response.Header}, nil
}

// verifyError checks WeChat Pay's signature on an error answer as the SDK
// checks a 2xx one: the timestamp within 5 minutes, then
// "<timestamp>\n<nonce>\n<body>\n" by the key Wechatpay-Serial names.
func (w *WeChatPay) verifyError(e *core.APIError) error {
	h := e.Header
	ts, nonce, serial, sig := h.Get("Wechatpay-Timestamp"), h.Get("Wechatpay-Nonce"), h.Get("Wechatpay-Serial"), h.Get("Wechatpay-Signature")
	if ts == "" || nonce == "" || serial == "" || sig == "" {
		return errors.New("unsigned")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() >= 5*time.Minute {
		return fmt.Errorf("Wechatpay-Timestamp %q outside 5 minutes", ts)
	}
	return w.verifier.VerifyAnswer(serial, ts+"\n"+nonce+"\n"+e.Body+"\n", sig)
}

// maxAnswerBytes bounds a query answer kept.
const maxAnswerBytes = 1 << 20

// answerVerifier is the SDK's auth.Verifier over the preset's keys.
type answerVerifier struct{ v platform.AnswerVerifier }

func (a answerVerifier) Verify(_ context.Context, serial, message, signature string) error {
	return a.v.VerifyAnswer(serial, message, signature)
}

// GetSerial names no key: WeChat Pay then signs with its current one.
func (a answerVerifier) GetSerial(context.Context) (string, error) {
	return "", errors.New("any configured key")
}
