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
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// Alipay is Alipay's open-platform gateway answering alipay.trade.query
// (opendocs.alipay.com/open/02e7gm; signing: opendocs.alipay.com/common/02kf5q).
// A request is a POST form with the common parameters app_id, method,
// format JSON, charset utf-8, sign_type RSA2, timestamp
// "yyyy-MM-dd HH:mm:ss" (China time), version 1.0, biz_content, and sign:
// SHA256withRSA by the app's private key over every other non-empty
// parameter sorted by name as k=v joined with '&'; a request whose sign
// does not verify with the app's public key is answered 40002
// isv.invalid-signature, unsigned. Answers are
// {"alipay_trade_query_response":{...},"sign":"..."}, the sign (by
// Alipay's key) over the response object's exact text; an unknown trade
// is a signed 40004 ACQ.TRADE_NOT_EXIST.
type Alipay struct {
	URL string
	misbehaving

	appID  string
	app    *rsa.PublicKey
	alipay *rsa.PrivateKey

	state
	trades   map[string]map[string]string
	badSig   *rsa.PrivateKey
	escape   bool
	unsigned bool
}

// Unsigned makes every answer come without its sign (true), as a forger
// on the path would send it.
func (s *Alipay) Unsigned(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsigned = on
}

// EscapeSlashes makes the answers carry "/" as "\/" while the sign is over
// the unescaped text, as Alipay may send them.
func (s *Alipay) EscapeSlashes(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.escape = on
}

// StartAlipay serves the gateway until the test ends: app appID's public
// key is app; answers are signed by alipay.
func StartAlipay(t testing.TB, appID string, app *rsa.PublicKey, alipay *rsa.PrivateKey) *Alipay {
	t.Helper()
	s := &Alipay{appID: appID, app: app, alipay: alipay, trades: map[string]map[string]string{}}
	srv := httptest.NewServer(s.wrap(http.HandlerFunc(s.serve)))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/gateway.do"
	return s
}

// SetTrade makes out_trade_no order's answer the trade's fields (trade_no,
// trade_status, total_amount, send_pay_date, ...); code, msg and
// out_trade_no are set.
func (s *Alipay) SetTrade(order string, fields map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fields["out_trade_no"] = order
	s.trades[order] = fields
}

// SignWith signs the answers with k instead of Alipay's key (nil: Alipay's
// again): a forged answer.
func (s *Alipay) SignWith(k *rsa.PrivateKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.badSig = k
}

func (s *Alipay) serve(w http.ResponseWriter, r *http.Request) {
	if s.hungUp(w) {
		return
	}
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		http.Error(w, "not a form POST", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.checkRequest(r.PostForm); err != nil {
		s.refused()
		s.write(w, map[string]string{"code": "40002", "msg": "Invalid Arguments", "sub_code": "isv.invalid-signature", "sub_msg": err.Error()}, false)
		return
	}
	var biz struct {
		OutTradeNo string `json:"out_trade_no"`
	}
	if err := json.Unmarshal([]byte(r.PostForm.Get("biz_content")), &biz); err != nil || biz.OutTradeNo == "" {
		s.write(w, map[string]string{"code": "40002", "msg": "Invalid Arguments", "sub_code": "isv.missing-parameter", "sub_msg": "out_trade_no"}, true)
		return
	}
	s.mu.Lock()
	s.count(biz.OutTradeNo)
	trade, ok := s.trades[biz.OutTradeNo]
	s.mu.Unlock()
	if !ok {
		s.write(w, map[string]string{"code": "40004", "msg": "Business Failed", "sub_code": "ACQ.TRADE_NOT_EXIST",
			"sub_msg": "交易不存在", "out_trade_no": biz.OutTradeNo, "buyer_pay_amount": "0.00", "point_amount": "0.00",
			"invoice_amount": "0.00", "receipt_amount": "0.00"}, true)
		return
	}
	ans := map[string]string{"code": "10000", "msg": "Success", "buyer_logon_id": "159****5620", "buyer_user_id": "2088101117955611"}
	for k, v := range trade {
		ans[k] = v
	}
	s.write(w, ans, true)
}

// checkRequest verifies the app's request as Alipay's gateway does.
func (s *Alipay) checkRequest(f url.Values) error {
	for k, want := range map[string]string{"app_id": s.appID, "method": "alipay.trade.query", "format": "JSON",
		"charset": "utf-8", "sign_type": "RSA2", "version": "1.0"} {
		if got := f.Get(k); !strings.EqualFold(got, want) {
			return fmt.Errorf("%s is %q, not %q", k, got, want)
		}
	}
	ts, err := time.ParseInLocation(time.DateTime, f.Get("timestamp"), time.FixedZone("CST", 8*3600))
	if err != nil || time.Since(ts).Abs() > 15*time.Minute {
		return fmt.Errorf("timestamp %q is not yyyy-MM-dd HH:mm:ss China time within 15 minutes", f.Get("timestamp"))
	}
	keys := make([]string, 0, len(f))
	for k := range f {
		if k != "sign" && f.Get(k) != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + f.Get(k)
	}
	sig, err := base64.StdEncoding.DecodeString(f.Get("sign"))
	if err != nil {
		return fmt.Errorf("sign is not base64")
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "&")))
	if err := rsa.VerifyPKCS1v15(s.app, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("验签出错: the sign does not verify with the app's public key")
	}
	return nil
}

// write answers the response object, signed by Alipay (or by the forger's
// key) when signed.
func (s *Alipay) write(w http.ResponseWriter, resp map[string]string, signed bool) {
	content, _ := json.Marshal(resp)
	s.mu.Lock()
	key, escape := s.alipay, s.escape
	signed = signed && !s.unsigned
	if s.badSig != nil {
		key = s.badSig
	}
	s.mu.Unlock()
	sent := string(content)
	if escape {
		sent = strings.ReplaceAll(sent, "/", `\/`)
	}
	body := `{"alipay_trade_query_response":` + sent
	if signed {
		sum := sha256.Sum256(content)
		sig, _ := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		body += `,"sign":"` + base64.StdEncoding.EncodeToString(sig) + `"`
	}
	w.Header().Set("Content-Type", "text/html;charset=utf-8")
	_, _ = w.Write([]byte(body + "}"))
}

// hangUp closes the connection without an answer (a platform down).
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	http.Error(w, "down", http.StatusServiceUnavailable)
}
