// Package platformsim holds local stand-ins for the platforms' query APIs,
// for the reconciliation tests: each checks a request's signature exactly
// as its platform documents it, and signs its answers with a test platform
// key, so that callgate's real client (and the platform's own SDK) runs
// unchanged against it.
package platformsim

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// WeChatPay is WeChat Pay API v3's query-order API
// (GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=,
// pay.weixin.qq.com/doc/v3/merchant/4012791859). A request must carry
// Authorization: WECHATPAY2-SHA256-RSA2048 mchid="",nonce_str="",
// signature="",timestamp="",serial_no="", the signature being
// SHA256withRSA by the merchant's API key over
// "GET\n<path?query>\n<timestamp>\n<nonce>\n\n", within 5 minutes; else
// 401 SIGN_ERROR. Answers are signed like notifications: Wechatpay-Serial
// (the public key's id), -Timestamp, -Nonce, -Signature over
// "<timestamp>\n<nonce>\n<body>\n". GET /v3/certificates, the platform
// certificates download, is wechatpay_certs.go's.
type WeChatPay struct {
	URL string
	misbehaving

	mchID, mchSerial string
	merchant         *rsa.PublicKey
	platform         *rsa.PrivateKey
	keyID            string

	state
	orders map[string]map[string]any
	times  []time.Time
	badSig *rsa.PrivateKey

	// GET /v3/certificates (wechatpay_certs.go)
	apiv3Key  string
	certs     []string // PEM
	downloads int
}

// StartWeChatPay serves the API until the test ends: merchant mchID's API
// key (serial mchSerial) is merchant; answers are signed by platform as
// key keyID.
func StartWeChatPay(t testing.TB, mchID, mchSerial string, merchant *rsa.PublicKey, platform *rsa.PrivateKey, keyID string) *WeChatPay {
	t.Helper()
	s := &WeChatPay{mchID: mchID, mchSerial: mchSerial, merchant: merchant, platform: platform, keyID: keyID,
		orders: map[string]map[string]any{}}
	srv := httptest.NewServer(s.wrap(http.HandlerFunc(s.serve)))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// SetTransaction makes out_trade_no's answer the transaction txn (JSON
// object; mchid and out_trade_no are set).
func (s *WeChatPay) SetTransaction(order string, txn map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	txn["mchid"], txn["out_trade_no"] = s.mchID, order
	s.orders[order] = txn
}

// SignWith signs the answers with k instead of the platform's key (nil:
// the platform's again): a forged answer.
func (s *WeChatPay) SignWith(k *rsa.PrivateKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badSig = k
}

// Times are when the signed queries came.
func (s *WeChatPay) Times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...)
}

var authRe = regexp.MustCompile(`^WECHATPAY2-SHA256-RSA2048 (.+)$`)

func (s *WeChatPay) serve(w http.ResponseWriter, r *http.Request) {
	if s.hungUp(w) {
		return
	}
	if r.URL.Path == certificatesPath {
		s.serveCertificates(w, r)
		return
	}
	const prefix = "/v3/pay/transactions/out-trade-no/"
	if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, prefix) {
		s.answer(w, http.StatusNotFound, map[string]any{"code": "NOT_FOUND", "message": "no such API"})
		return
	}
	if err := s.checkAuthorization(r); err != nil {
		s.refused()
		s.answer(w, http.StatusUnauthorized, map[string]any{"code": "SIGN_ERROR", "message": err.Error()})
		return
	}
	if r.URL.Query().Get("mchid") != s.mchID {
		s.answer(w, http.StatusBadRequest, map[string]any{"code": "PARAM_ERROR", "message": "mchid"})
		return
	}
	order := strings.TrimPrefix(r.URL.Path, prefix)
	s.mu.Lock()
	s.count(order)
	s.times = append(s.times, time.Now())
	txn, ok := s.orders[order]
	s.mu.Unlock()
	if !ok {
		s.answer(w, http.StatusNotFound, map[string]any{"code": "ORDER_NOT_EXIST", "message": "订单不存在"})
		return
	}
	s.answer(w, http.StatusOK, txn)
}

// checkAuthorization verifies the merchant's signature of the request.
func (s *WeChatPay) checkAuthorization(r *http.Request) error {
	m := authRe.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return fmt.Errorf("the Authorization header is not WECHATPAY2-SHA256-RSA2048")
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(m[1], ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return fmt.Errorf("malformed Authorization field %q", kv)
		}
		uq, err := strconv.Unquote(v)
		if err != nil {
			return fmt.Errorf("the Authorization field %s is not quoted", k)
		}
		fields[k] = uq
	}
	if fields["mchid"] != s.mchID || fields["serial_no"] != s.mchSerial {
		return fmt.Errorf("mchid %q / serial_no %q is not the merchant's", fields["mchid"], fields["serial_no"])
	}
	ts, err := strconv.ParseInt(fields["timestamp"], 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Minute {
		return fmt.Errorf("timestamp %q outside 5 minutes", fields["timestamp"])
	}
	msg := r.Method + "\n" + r.URL.RequestURI() + "\n" + fields["timestamp"] + "\n" + fields["nonce_str"] + "\n\n"
	sig, err := base64.StdEncoding.DecodeString(fields["signature"])
	if err != nil {
		return fmt.Errorf("signature is not base64")
	}
	sum := sha256.Sum256([]byte(msg))
	if err := rsa.VerifyPKCS1v15(s.merchant, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("signature does not verify")
	}
	return nil
}

// answer writes v as JSON, signed.
func (s *WeChatPay) answer(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	ts, nonce := strconv.FormatInt(time.Now().Unix(), 10), rand.Text()
	s.mu.Lock()
	key, keyID := s.platform, s.keyID
	if s.badSig != nil {
		key = s.badSig
	}
	s.mu.Unlock()
	sum := sha256.Sum256([]byte(ts + "\n" + nonce + "\n" + string(body) + "\n"))
	sig, _ := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-ID", rand.Text())
	h.Set("Wechatpay-Serial", keyID)
	h.Set("Wechatpay-Timestamp", ts)
	h.Set("Wechatpay-Nonce", nonce)
	h.Set("Wechatpay-Signature", base64.StdEncoding.EncodeToString(sig))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
