package reconcile

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"callgate/internal/callback"
	"callgate/internal/outbound"
	"callgate/internal/platform"
	"callgate/internal/source"
)

// AlipayGatewayURL is ALIPAY_GATEWAY_URL's default.
const AlipayGatewayURL = "https://openapi.alipay.com/gateway.do"

// Alipay asks alipay.trade.query (opendocs.alipay.com/open/02e7gm): a
// form POST to the gateway with the common parameters (app_id, method,
// format JSON, charset utf-8, sign_type RSA2, timestamp in China time,
// version 1.0) and biz_content {"out_trade_no"}, signed SHA256withRSA by
// the app's private key over every parameter but sign, sorted. The answer's
// sign is checked with the Alipay public keys the source verifies
// notifications with. Alipay has no Go SDK of its own (its SDKs are Java,
// PHP, .NET, Python and Node.js), and the community ones are not served
// here: the request is a few lines, and the answer is verified by the
// preset's own keys, one place for Alipay's rules.
type Alipay struct {
	appID    string
	key      *rsa.PrivateKey
	gateway  string
	verifier platform.AnswerVerifier
	http     *http.Client
	now      func() time.Time
}

// AlipayConfig is what asking Alipay takes.
type AlipayConfig struct {
	AppID string
	// PrivateKeyFile is the app's private key (ALIPAY_APP_PRIVATE_KEY_FILE):
	// PEM (PKCS#8 or PKCS#1) or the bare base64 Alipay's key tool writes.
	PrivateKeyFile string
	// Gateway is Alipay's gateway (default AlipayGatewayURL).
	Gateway string
	// Verifier checks the answers' sign (the alipay preset).
	Verifier platform.AnswerVerifier
	HTTP     *http.Client
}

// NewAlipay builds the Alipay querier.
func NewAlipay(cfg AlipayConfig) (*Alipay, error) {
	if cfg.AppID == "" || cfg.PrivateKeyFile == "" || cfg.Verifier == nil {
		return nil, errors.New("Alipay reconciliation needs ALIPAY_APP_ID and ALIPAY_APP_PRIVATE_KEY_FILE")
	}
	raw, err := os.ReadFile(cfg.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("ALIPAY_APP_PRIVATE_KEY_FILE: %w", err)
	}
	key, err := parseRSAPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("ALIPAY_APP_PRIVATE_KEY_FILE %s: %w", cfg.PrivateKeyFile, err)
	}
	gw, err := apiBase("ALIPAY_GATEWAY_URL", cfg.Gateway, AlipayGatewayURL)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = outbound.Client(outbound.Options{Timeout: QueryTimeoutDefault, MaxAnswerBytes: maxAnswerBytes})
	}
	return &Alipay{appID: cfg.AppID, key: key, gateway: gw, verifier: cfg.Verifier, http: hc, now: time.Now}, nil
}

func newAlipaySource(_ context.Context, s source.Config, plat platform.Platform, hc *http.Client) (*Source, error) {
	verifier, _ := plat.(platform.AnswerVerifier)
	if verifier == nil {
		return nil, errors.New("preset " + s.Preset + " verifies no query answers")
	}
	q, err := NewAlipay(AlipayConfig{AppID: s.Platform.AppID, PrivateKeyFile: s.Reconcile.PrivateKeyFile,
		Gateway: s.Reconcile.APIBase, Verifier: verifier, HTTP: hc})
	if err != nil {
		return nil, err
	}
	return &Source{Querier: q}, nil
}

// chinaTime is Alipay's clock (timestamp, send_pay_date).
var chinaTime = time.FixedZone("CST", 8*3600)

// Query asks alipay.trade.query about out_trade_no order. Alipay's signed
// 40004 ACQ.TRADE_NOT_EXIST says nothing happened; an unsigned one is not
// believed (anyone on the path could silence reconciliation).
func (a *Alipay) Query(ctx context.Context, order string) (Answer, error) {
	biz, err := json.Marshal(map[string]string{"out_trade_no": order})
	if err != nil {
		return Answer{}, err
	}
	params := map[string]string{"app_id": a.appID, "method": "alipay.trade.query", "format": "JSON", "charset": "utf-8",
		"sign_type": "RSA2", "timestamp": a.now().In(chinaTime).Format(time.DateTime), "version": "1.0", "biz_content": string(biz)}
	digest := sha256.Sum256(platform.AlipayRequestContent(params))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, digest[:])
	if err != nil {
		return Answer{}, err
	}
	form := url.Values{}
	for k, v := range params {
		form.Set(k, v)
	}
	form.Set("sign", base64.StdEncoding.EncodeToString(sig))
	body, header, err := postForm(ctx, a.http, a.gateway, "application/x-www-form-urlencoded;charset=utf-8", form)
	if err != nil {
		return Answer{}, err
	}
	content, sign, err := platform.AlipaySignedAnswer(body)
	if err != nil {
		// error_response (a bad app_id, a bad request signature) is
		// Alipay refusing the query.
		return Answer{}, fmt.Errorf("%w: %w: %s", ErrRefused, err, truncateAnswer(body))
	}
	code, sub, err := platform.AlipayAnswerCode(content)
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	found, notFound := code == "10000", code == "40004" && sub == platform.AlipayTradeNotExist
	// Alipay does not sign its refusals of a request (a bad request
	// signature, a wrong app_id): such an answer is a refusal, and is
	// believed in nothing.
	if sign == "" && !found && !notFound {
		return Answer{}, fmt.Errorf("%w: code %s %s: %s", ErrRefused, code, sub, truncateAnswer(content))
	}
	if err := a.verifier.VerifyAnswer("", string(content), sign); err != nil {
		return Answer{}, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	switch {
	case notFound:
		return Answer{NotFound: true}, nil
	case !found:
		return Answer{}, fmt.Errorf("%w: code %s %s: %s", ErrRefused, code, sub, truncateAnswer(content))
	}
	return Answer{Body: body, Header: header}, nil
}

// truncateAnswer is a short quote of an answer for a log line.
func truncateAnswer(b []byte) string { return callback.Truncate(string(b), 200) }

// parseRSAPrivateKey reads an RSA private key: PEM (PKCS#8 or PKCS#1), or
// the bare base64 DER of either.
func parseRSAPrivateKey(raw []byte) (*rsa.PrivateKey, error) {
	var der []byte
	if blk, _ := pem.Decode(raw); blk != nil {
		der = blk.Bytes
	} else {
		d, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(raw)), ""))
		if err != nil {
			return nil, errors.New("neither PEM nor base64 DER")
		}
		der = d
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("not an RSA key")
		}
		return rk, nil
	}
	k, err := x509.ParsePKCS1PrivateKey(der)
	if err != nil {
		return nil, errors.New("not an RSA private key (PKCS#8 or PKCS#1)")
	}
	return k, nil
}
