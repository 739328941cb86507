// Package platform holds the presets: what a real payment or logistics
// platform sends, how it signs, where its event id and business key are,
// how its notification maps to callgate's canonical event, and the answers
// it expects. A source says `preset: <name>` and gives its keys; the preset
// supplies everything else.
//
// One file per platform (alipay.go, wechatpay.go, stripe.go, adyen.go,
// shopify.go, kuaidi100.go). The pieces they share are building blocks:
// signature verification in internal/signature (RSA SHA256withRSA with a
// key ring, HMAC, MD5 with a salt), AES-256-GCM and form bodies here
// (crypto.go, form.go), dotted JSON paths in internal/callback, exact
// decimal amounts in amount.go. Adding a platform of the same shape is one
// small file and one line in [presets].
//
// What it does not own: reading and limiting the body, storing, answering
// on the wire (internal/intake writes the [Answer] a preset renders).
package platform

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// Request is one delivery, as the intake read it.
type Request struct {
	Header http.Header
	// Body is the raw body, exactly as received (it is what was signed).
	Body []byte
	Now  time.Time
}

// Callback is one notification found in a request: most platforms send one
// per request, Adyen may batch several.
type Callback struct {
	EventID     string
	BusinessKey string
	// Event is the canonical event: a callback.PaymentEvent or a
	// callback.CarrierEvent.
	Event any
	// Unreadable, when set, says why a notification whose signature and
	// merchant held could not be read into an event (Event is then nil):
	// it is stored, FAILED with this reason, and read again when replayed
	// (see callback.Unreadable).
	Unreadable string
}

// unreadable is the Callback of a verified notification, bound to our
// merchant, that cannot be read: kept under its event id and, when it has
// a usable one, its business key.
func unreadable(id, key string, err error) Callback {
	if strings.TrimSpace(key) == "" || len(key) > callback.MaxBusinessKeyLen {
		key = id
	}
	return Callback{EventID: id, BusinessKey: key, Unreadable: "the notification could not be read: " + err.Error()}
}

// Stored is what storing one callback gave.
type Stored struct {
	LogID     int64 `json:"log_id"`
	Duplicate bool  `json:"duplicate"`
}

// Answer is an HTTP answer in the platform's own words.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
}

// Platform is a preset, built from a source's keys. Safe for concurrent use.
type Platform interface {
	// Kind is the callback kind the preset's events are (payment or
	// logistics).
	Kind() string
	// Read verifies the request and returns its callbacks. A request that
	// is not authentic returns an error wrapping one of the
	// internal/signature sentinels (the caller answers 401); an authentic
	// one for another merchant than the source's wraps ErrForeignMerchant
	// (403); any other error is a bad request (400). Its text is safe to
	// show the sender.
	// One bad callback refuses the whole request.
	Read(req Request) ([]Callback, error)
	// Reread reads a stored request again without verifying its
	// signature (it held when the request arrived; a signed timestamp's
	// window has passed since): a replay of a notification that could not
	// be read, after a configuration fix. The merchant is checked again.
	Reread(req Request) ([]Callback, error)
	// Headers lists the request headers stored with the callback.
	Headers() []string
	// Accepted is the answer once every callback is stored (duplicates
	// included: the platform must stop resending).
	Accepted(stored []Stored) Answer
	// Refused is the answer to a request that was not taken; status is
	// the HTTP status the intake chose (4xx, or 503), reason says why.
	Refused(status int, reason string) Answer
}

// Answerer is a preset that reads its platform's answers to callgate's
// queries about an order (reconciliation, internal/reconcile) into the
// callbacks a notification of the same fact gives: the same canonical
// event, for the worker's same rules. No callback: the answer says nothing
// happened. An error: the answer is not this source's, or not about order,
// and changes nothing.
type Answerer interface {
	ReadAnswer(order string, answer []byte) ([]Callback, error)
}

// ErrRefundedAnswer is an answer saying the order was paid and refunded
// since, which does not say how much was refunded: applying it as a plain
// payment would ship what may have been paid back in full, so nothing is
// applied and the order is left to on-call.
var ErrRefundedAnswer = errors.New("the platform says the order was paid and refunded since, without the refund's amount")

// AnswerVerifier checks a signature the platform put on an answer with
// the keys the source verifies notifications with (WeChat Pay).
type AnswerVerifier interface {
	VerifyAnswer(serial, message, signature string) error
}

// Config is a preset source's keys and options (the `platform:` block of
// a source). Which fields a preset uses is documented on the preset; a
// field it does not use is refused.
type Config struct {
	// Secrets are shared secrets, any of which may match (rotation): the
	// Stripe endpoint secret, the Shopify app secret, the Adyen HMAC key
	// (hex), the Kuaidi100 salt.
	Secrets []string `yaml:"secrets"`
	// PublicKeys are RSA public keys, as PEM or as the bare base64 DER key
	// a platform's console shows (Alipay); ID names the key where the
	// platform does (WeChat Pay's PUB_KEY_ID_...).
	PublicKeys []PublicKey `yaml:"public_keys"`
	// Certificates are PEM bundles of platform certificates, each known by
	// its serial number (WeChat Pay platform certificates).
	Certificates []string `yaml:"certificates"`
	// APIv3Key decrypts WeChat Pay resources: 32 bytes.
	APIv3Key string `yaml:"apiv3_key"`
	// AppID is the merchant's app: Alipay's app_id (required: every
	// notification's must match), WeChat Pay's appid (checked when set).
	AppID string `yaml:"app_id"`
	// SellerID, when set, must match an Alipay notification's seller_id
	// (the merchant's Alipay account, 2088...).
	SellerID string `yaml:"seller_id"`
	// MchID is the WeChat Pay merchant id: required, and every decrypted
	// resource's mchid must match it.
	MchID string `yaml:"mchid"`
	// MerchantAccounts are the Adyen merchant accounts this source takes,
	// comma-separated: required, and every item's merchantAccountCode
	// (signed) must be one of them.
	MerchantAccounts string `yaml:"merchant_accounts"`
	// Livemode is "true" (the default) or "false": a Stripe event's
	// livemode, an Adyen notification's live, must equal it, so a
	// test-mode event never pays a live order.
	Livemode string `yaml:"livemode"`
	// Account, when set, is the Stripe connected account (acct_...) whose
	// events this source takes: an event's account must equal it. When
	// unset, an event carrying an account (about a connected account, not
	// the platform's own) is refused.
	Account string `yaml:"account"`
	// ShopDomains are the Shopify shops (x.myshopify.com) this source
	// takes, comma-separated: required. A delivery's X-Shopify-Shop-Domain
	// must be one of them, and the shop is part of the order's code
	// ("<shop>/<name>"), since one app secret signs for every shop that
	// installs the app and order names repeat across shops.
	ShopDomains string `yaml:"shop_domains"`
	// OrderPath is the dotted JSON path of the merchant's order code
	// (Stripe, Shopify), replacing the preset's default.
	OrderPath string `yaml:"order_path"`
	// Tolerance is the accepted clock difference for platforms that sign
	// a timestamp (Stripe, WeChat Pay). Default 5m.
	Tolerance time.Duration `yaml:"tolerance"`
}

// PublicKey is one RSA public key of a platform.
type PublicKey struct {
	ID  string `yaml:"id"`
	Key string `yaml:"key"`
}

// KeysSet reports whether any key is given. An unset environment variable
// expands to "", so a preset source whose keys are all empty is disabled
// rather than refused: the shipped configuration lists every platform, and
// a deployment enables those whose keys it sets.
func (c Config) KeysSet() bool {
	for _, s := range c.Secrets {
		if s != "" {
			return true
		}
	}
	for _, k := range c.PublicKeys {
		if k.Key != "" {
			return true
		}
	}
	for _, s := range c.Certificates {
		if s != "" {
			return true
		}
	}
	return c.APIv3Key != ""
}

// Empty reports whether no key, option or identity is set (what a source
// without a preset must have).
func (c Config) Empty() bool {
	if c.KeysSet() || c.OrderPath != "" || c.Tolerance != 0 {
		return false
	}
	for _, f := range identityFields {
		if c.field(f) != "" {
			return false
		}
	}
	return true
}

// Missing lists what preset name still needs before it can serve: its
// keys (when none is set) and its merchant identity (the fields it
// requires), each as "platform.<field>", with the environment variable
// the shipped configuration reads it from. Empty: the source is enabled.
func Missing(name string, cfg Config) []string {
	p, ok := presets[name]
	if !ok {
		return nil
	}
	var out []string
	if !cfg.KeysSet() {
		out = append(out, p.keysHint)
	}
	for _, f := range p.requires {
		if len(splitList(cfg.field(f.name))) == 0 { // "", or a list of blanks (",")
			out = append(out, "platform."+f.name+" ("+f.env+")")
		}
	}
	return out
}

// field is the value of a merchant identity field, by yaml name.
func (c Config) field(name string) string {
	switch name {
	case "app_id":
		return c.AppID
	case "seller_id":
		return c.SellerID
	case "mchid":
		return c.MchID
	case "merchant_accounts":
		return c.MerchantAccounts
	case "livemode":
		return c.Livemode
	case "account":
		return c.Account
	case "shop_domains":
		return c.ShopDomains
	}
	return ""
}

// splitList reads a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// nonEmpty drops the entries an unset variable left empty, so one set key
// of a rotation pair is enough.
func nonEmpty(list []string) []string {
	var out []string
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// preset is one platform: its kind and its constructor.
type preset struct {
	kind string
	// uses lists the Config fields (yaml names) the preset reads.
	uses []string
	// keysHint names the keys, as Missing reports them when none is set.
	keysHint string
	// requires lists the merchant identity without which the preset
	// stays disabled: a validly signed notification for another merchant
	// must never pay one of ours.
	requires []required
	make     func(Config) (Platform, error)
}

// required is a field a preset needs, and the environment variable the
// shipped configuration reads it from.
type required struct{ name, env string }

// presets are the platforms callgate knows, by preset name.
var presets = map[string]preset{
	"alipay": {callback.KindPayment, []string{"public_keys", "app_id", "seller_id"},
		"platform.public_keys (ALIPAY_PUBLIC_KEY)", []required{{"app_id", "ALIPAY_APP_ID"}}, newAlipay},
	"wechatpay-v3": {callback.KindPayment, []string{"public_keys", "certificates", "apiv3_key", "tolerance", "mchid", "app_id"},
		"platform.apiv3_key and public_keys or certificates (WECHATPAY_APIV3_KEY, WECHATPAY_PUBLIC_KEY, WECHATPAY_PLATFORM_CERTS)",
		[]required{{"mchid", "WECHATPAY_MCHID"}}, newWeChatPay},
	"stripe": {callback.KindPayment, []string{"secrets", "order_path", "tolerance", "livemode", "account"},
		"platform.secrets (STRIPE_WEBHOOK_SECRET)", nil, newStripe},
	"shopify": {callback.KindPayment, []string{"secrets", "order_path", "shop_domains"},
		"platform.secrets (SHOPIFY_WEBHOOK_SECRET)", []required{{"shop_domains", "SHOPIFY_SHOP_DOMAINS"}}, newShopify},
	"adyen": {callback.KindPayment, []string{"secrets", "merchant_accounts", "livemode"},
		"platform.secrets (ADYEN_HMAC_KEY)", []required{{"merchant_accounts", "ADYEN_MERCHANT_ACCOUNTS"}}, newAdyen},
	"kuaidi100": {callback.KindLogistics, []string{"secrets"}, "platform.secrets (KUAIDI100_SALT)", nil, newKuaidi100},
}

// Names lists the presets, sorted.
func Names() []string {
	out := make([]string, 0, len(presets))
	for n := range presets {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// KindOf returns the kind of preset name ("" if unknown).
func KindOf(name string) string { return presets[name].kind }

// New builds preset name from cfg. Every problem is reported at once, each
// naming its field (e.g. "platform.apiv3_key: must be 32 bytes").
func New(name string, cfg Config) (Platform, error) {
	p, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("preset: unknown preset %q (want one of %s)", name, strings.Join(Names(), ", "))
	}
	var errs []error
	set := map[string]bool{
		"secrets":      len(cfg.Secrets) > 0,
		"public_keys":  len(cfg.PublicKeys) > 0,
		"certificates": len(cfg.Certificates) > 0,
		"apiv3_key":    cfg.APIv3Key != "",
		"order_path":   cfg.OrderPath != "",
		"tolerance":    cfg.Tolerance != 0,
	}
	for _, f := range identityFields {
		set[f] = cfg.field(f) != ""
	}
	for _, f := range append([]string{"secrets", "public_keys", "certificates", "apiv3_key", "order_path", "tolerance"}, identityFields...) {
		if set[f] && !slices.Contains(p.uses, f) {
			errs = append(errs, fmt.Errorf("platform.%s: does not apply to preset %s", f, name))
		}
	}
	if cfg.Tolerance < 0 {
		errs = append(errs, errors.New("platform.tolerance: must not be negative"))
	}
	for _, f := range p.requires {
		if len(splitList(cfg.field(f.name))) == 0 {
			errs = append(errs, fmt.Errorf("platform.%s: is required (%s): the merchant this source takes notifications for", f.name, f.env))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p.make(cfg)
}

// identityFields are the merchant identity fields of Config, by yaml name.
var identityFields = []string{"app_id", "seller_id", "mchid", "merchant_accounts", "livemode", "account", "shop_domains"}

// ErrForeignMerchant refuses a validly signed notification for a merchant
// other than the one the source is configured for (403): it is never
// stored.
var ErrForeignMerchant = errors.New("the notification is for another merchant")

// IsForeignMerchant reports a request refused by ErrForeignMerchant.
func IsForeignMerchant(err error) bool { return errors.Is(err, ErrForeignMerchant) }

// foreign is an ErrForeignMerchant naming what did not match; the values
// are the sender's and are truncated.
func foreign(field, got string) error {
	return fmt.Errorf("%w: %s %q is not this source's", ErrForeignMerchant, field, truncate(got))
}

// fieldErr names a platform block field in a configuration error.
func fieldErr(field string, err error) error { return fmt.Errorf("platform.%s: %w", field, err) }

// signatureErr names the signature sentinel of a request error, so the
// intake can tell 401 from 400.
func IsUnauthenticated(err error) bool {
	for _, s := range []error{signature.ErrMissing, signature.ErrMalformed, signature.ErrMismatch, signature.ErrExpired} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// chinaTime is the clock of the Chinese platforms (Alipay, Kuaidi100),
// which write local times without a zone: UTC+8, no daylight saving.
var chinaTime = time.FixedZone("UTC+8", 8*3600)

// chinaTimeLayout is how they write those times.
const chinaTimeLayout = "2006-01-02 15:04:05"

// toleranceOr is t, or the default window.
func toleranceOr(t time.Duration) time.Duration {
	if t == 0 {
		return signature.DefaultTolerance
	}
	return t
}

// badRequest is a request error that is not about authenticity.
func badRequest(format string, args ...any) error { return fmt.Errorf(format, args...) }

// acceptedJSON is callgate's own success body, for platforms that take any
// 2xx: {"status":"accepted","callbacks":[{"log_id":N,"duplicate":false}]}.
func acceptedJSON(stored []Stored) Answer {
	b, _ := json.Marshal(struct {
		Status    string   `json:"status"`
		Callbacks []Stored `json:"callbacks"`
	}{"accepted", stored})
	return jsonAnswer(http.StatusOK, b)
}

// refusedJSON is callgate's own error body: {"error": reason}.
func refusedJSON(status int, reason string) Answer {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{reason})
	return jsonAnswer(status, b)
}

// jsonAnswer is an Answer with a JSON body.
func jsonAnswer(status int, body []byte) Answer {
	return Answer{Status: status, ContentType: "application/json", Body: body}
}
