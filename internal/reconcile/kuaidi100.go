package reconcile

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"callgate/internal/callback"
	"callgate/internal/outbound"
	"callgate/internal/platform"
	"callgate/internal/source"
	"callgate/internal/store"
)

// Kuaidi100APIBase is KUAIDI100_API_BASE's default.
const Kuaidi100APIBase = "https://poll.kuaidi100.com"

// Kuaidi100 asks Kuaidi100's real-time query (实时快递查询): a form POST to
// /poll/query.do with customer, param (JSON: com, num, phone, resultv2 1
// for the area names a push carries, order desc) and sign =
// UPPER(hex(MD5(param + key + customer))). Kuaidi100 signs no answer: the
// answer is believed as the API (HTTPS) gives it, about the waybill asked.
// Kuaidi100's own Go code (github.com/kuaidi100-api/go-demo) is a demo
// (module "go-test", the account in a source file), not a library: the
// request is these few lines.
type Kuaidi100 struct {
	customer, key, url string
	http               *http.Client
}

// Kuaidi100Config is what asking Kuaidi100 takes.
type Kuaidi100Config struct {
	// Customer (KUAIDI100_CUSTOMER) and Key (KUAIDI100_KEY) are the
	// account's 授权信息.
	Customer, Key string
	// APIBase is Kuaidi100's API (default Kuaidi100APIBase).
	APIBase string
	HTTP    *http.Client
}

// NewKuaidi100 builds the Kuaidi100 querier.
func NewKuaidi100(cfg Kuaidi100Config) (*Kuaidi100, error) {
	if cfg.Customer == "" || cfg.Key == "" {
		return nil, errors.New("Kuaidi100 reconciliation needs KUAIDI100_CUSTOMER and KUAIDI100_KEY")
	}
	base, err := apiBase("KUAIDI100_API_BASE", cfg.APIBase, Kuaidi100APIBase)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = outbound.Client(outbound.Options{Timeout: QueryTimeoutDefault, MaxAnswerBytes: maxAnswerBytes})
	}
	return &Kuaidi100{customer: cfg.Customer, key: cfg.Key, url: base + "/poll/query.do", http: hc}, nil
}

func newKuaidi100Source(_ context.Context, s source.Config, _ platform.Platform, hc *http.Client) (*Source, error) {
	q, err := NewKuaidi100(Kuaidi100Config{Customer: s.Reconcile.Customer, Key: s.Reconcile.APIKey, APIBase: s.Reconcile.APIBase, HTTP: hc})
	if err != nil {
		return nil, err
	}
	return &Source{Waybills: q, SilentFor: s.Reconcile.SilentFor}, nil
}

// Kuaidi100Sign is the sign of a request's param.
func Kuaidi100Sign(param, key, customer string) string {
	sum := md5.Sum([]byte(param + key + customer))
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// QueryWaybill asks about w. Kuaidi100's returnCode 500 (查询无结果: no
// checkpoint yet) says nothing happened; any other refusal is counted
// refused.
func (k *Kuaidi100) QueryWaybill(ctx context.Context, w store.SilentWaybill) (Answer, error) {
	param, err := json.Marshal(map[string]string{"com": w.Carrier, "num": w.WaybillNo, "phone": w.Phone, "resultv2": "1", "show": "0", "order": "desc"})
	if err != nil {
		return Answer{}, err
	}
	form := url.Values{"customer": {k.customer}, "param": {string(param)}, "sign": {Kuaidi100Sign(string(param), k.key, k.customer)}}
	body, header, err := postForm(ctx, k.http, k.url, "application/x-www-form-urlencoded", form)
	if err != nil {
		return Answer{}, err
	}
	ok, com, code, msg, err := platform.Kuaidi100AnswerCode(body)
	switch {
	case err != nil:
		return Answer{}, fmt.Errorf("%w: %w", ErrRefused, err)
	case ok && !strings.EqualFold(strings.TrimSpace(com), w.Carrier):
		// Kuaidi100 signs nothing: an answer is about the carrier asked,
		// or it is not ours.
		return Answer{}, fmt.Errorf("%w: the answer is about carrier %q, not %q", ErrNotOurs, callback.Truncate(com, 32), w.Carrier)
	case ok:
		return Answer{Body: body, Header: header}, nil
	case code == platform.Kuaidi100NoResult:
		return Answer{NotFound: true}, nil
	}
	return Answer{}, fmt.Errorf("%w: returnCode %s %s", ErrRefused, code, msg)
}
