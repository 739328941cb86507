// Package source describes the platforms that call callgate: a source's
// configuration (its name and kind, how its requests are signed, where its
// event id and business key are, its limits, its answer and its retry
// policy), with defaults and validation. Serving a source is
// internal/intake; verifying signatures is internal/signature.
package source

import (
	"errors"
	"fmt"
	"mime"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"callgate/internal/callback"
	"callgate/internal/platform"
	"callgate/internal/signature"
)

// Config is one platform that calls us: an entry of the file's sources.
type Config struct {
	// Name is the :source path segment. Required, unique.
	Name string `yaml:"name"`
	// Kind selects the worker handler and queue: payment or logistics.
	// A preset supplies it.
	Kind string `yaml:"kind"`
	// Preset names a platform (alipay, wechatpay-v3, stripe, adyen,
	// shopify, kuaidi100; see internal/platform) that supplies the
	// signature, event id, business key, body parsing, normalized event
	// and answers; signature, event_id, business_key and response are then
	// not set. Its keys are in Platform.
	Preset string `yaml:"preset"`
	// Platform holds a preset's keys and options. A preset source whose
	// keys are all empty (unset environment variables) is disabled: it
	// answers 404 and the start-up log lists it.
	Platform platform.Config `yaml:"platform"`
	// Signature says how requests are verified.
	Signature Signature `yaml:"signature"`
	// EventID says where the idempotency key comes from.
	EventID EventID `yaml:"event_id"`
	// BusinessKey is the JSON field (dot path) holding the business key.
	BusinessKey string `yaml:"business_key"`
	// MaxBodyBytes caps the body. Default 1 MiB; at most MaxBodyBytesLimit.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Response is what a platform gets on success.
	Response Response `yaml:"response"`
	// Retry drives the worker's backoff for this source.
	Retry Retry `yaml:"retry"`
	// RateLimit caps this source's requests (token bucket); off when rate
	// is 0. Over it: 429 with Retry-After.
	RateLimit RateLimit `yaml:"rate_limit"`
	// AllowIPs, if set, are the CIDRs (or addresses) allowed to call this
	// source; others get 403. The client address is the TCP peer.
	AllowIPs []string `yaml:"allow_ips"`
	// ContentTypes, if set, are the media types accepted (e.g.
	// application/json); others get 415.
	ContentTypes []string `yaml:"content_types"`
	// MaskFields are JSON fields (dot paths) masked in the admin API and
	// page; the stored payload stays intact for replay.
	MaskFields []string `yaml:"mask_fields"`
	// PaymentCurrency is the ISO 4217 currency of the events of a
	// configured JSON payment source that name none (a preset's events
	// always do). Unset: such an event is FAILED "no currency".
	PaymentCurrency string `yaml:"payment_currency"`
	// Reconcile holds the merchant credentials callgate asks the
	// source's platform with about orders it heard nothing of
	// (internal/reconcile). Unset: the source is never asked.
	Reconcile Reconcile `yaml:"reconcile"`
}

// Reconcile is how callgate signs its queries to a platform: the
// merchant's own credentials, apart from the keys that verify what the
// platform sends (those, in Platform, also verify its answers). Which
// fields a preset reads is internal/reconcile's ForSource.
type Reconcile struct {
	// PrivateKeyFile is the merchant's API private key, PEM: WeChat Pay's
	// merchant API key (WECHATPAY_MCH_PRIVATE_KEY_FILE), Alipay's app
	// private key (ALIPAY_APP_PRIVATE_KEY_FILE).
	PrivateKeyFile string `yaml:"private_key_file"`
	// Serial is the serial number of WeChat Pay's merchant API
	// certificate (WECHATPAY_MCH_SERIAL).
	Serial string `yaml:"serial"`
	// APIKey is Stripe's secret API key (STRIPE_API_KEY, or
	// STRIPE_API_KEY_FILE) or Kuaidi100's key (KUAIDI100_KEY).
	APIKey string `yaml:"api_key"`
	// Customer is Kuaidi100's customer id (KUAIDI100_CUSTOMER).
	Customer string `yaml:"customer"`
	// SilentFor is how long a waybill has been silent before Kuaidi100 is
	// asked about it (KUAIDI100_SILENT_FOR; default 24h).
	SilentFor time.Duration `yaml:"silent_for"`
	// APIBase is the platform's API: WECHATPAY_API_BASE (default
	// https://api.mch.weixin.qq.com), ALIPAY_GATEWAY_URL (default
	// https://openapi.alipay.com/gateway.do), STRIPE_API_BASE (default
	// https://api.stripe.com), KUAIDI100_API_BASE (default
	// https://poll.kuaidi100.com).
	APIBase string `yaml:"api_base"`
	// CertificatesRefresh is how often WeChat Pay's platform certificates
	// are downloaded (internal/wechatcerts; default 12h). Not read from
	// the file: the tests shorten it.
	CertificatesRefresh time.Duration `yaml:"-"`
}

// Configured reports whether any credential is set.
func (r Reconcile) Configured() bool {
	return r.PrivateKeyFile != "" || r.Serial != "" || r.APIKey != "" || r.Customer != ""
}

// RateLimit is a token bucket.
type RateLimit struct {
	// Rate is requests per second; 0 switches the limit off.
	Rate float64 `yaml:"rate"`
	// Burst is the bucket size. Default: max(1, rate).
	Burst int `yaml:"burst"`
}

// Signature is a source's verification scheme and its options.
type Signature struct {
	// Scheme is standard-webhooks, hmac-sha256, stripe or none.
	Scheme string `yaml:"scheme"`
	// Secrets are tried in order; several allow rotation.
	Secrets []string `yaml:"secrets"`
	// Header holds the signature (hmac-sha256: default X-Signature; stripe:
	// default Stripe-Signature).
	Header string `yaml:"header"`
	// Encoding is hex (default) or base64 (hmac-sha256).
	Encoding string `yaml:"encoding"`
	// Prefix is stripped from the header value, e.g. "sha256=" (hmac-sha256).
	Prefix string `yaml:"prefix"`
	// Tolerance is the accepted clock difference (standard-webhooks,
	// stripe). Default 5m (applied by internal/signature).
	Tolerance time.Duration `yaml:"tolerance"`
	// AllowUnsigned must be true for scheme none.
	AllowUnsigned bool `yaml:"allow_unsigned"`
}

// EventID says how to find a callback's idempotency key.
type EventID struct {
	// Fields are JSON fields (dot paths) whose values, joined by Separator,
	// form the event id when the scheme provides none.
	Fields []string `yaml:"fields"`
	// Separator joins Fields. Default ":".
	Separator string `yaml:"separator"`
	// Header names a request header holding the event id. It wins over
	// Fields and over the scheme's id; a request without it is refused
	// (400). Only a header the signature covers may be one (with scheme
	// none, where nothing is signed, any): an event id from an unsigned
	// header (GitHub's X-GitHub-Delivery under hmac-sha256, which signs
	// the body only) would make a captured request re-sent with another
	// value a new callback, stored and processed again, so such a source
	// is refused at start (use BodyDigest or Fields).
	Header string `yaml:"header"`
	// BodyDigest makes the event id "sha256:<hex digest of the raw
	// body>": for a platform that signs only the body and carries no id
	// in it (GitHub), a re-sent delivery is then a duplicate whatever its
	// headers say. It wins over Fields and the scheme's id.
	BodyDigest bool `yaml:"body_digest"`
	// IgnoreScheme uses Fields even when the scheme carries an id (such as
	// Standard Webhooks' webhook-id). Default false.
	IgnoreScheme bool `yaml:"ignore_scheme"`
}

// Response is the success answer a platform expects.
type Response struct {
	// ContentType of Body. Default application/json.
	ContentType string `yaml:"content_type"`
	// Body is a Go text/template with .LogID, .Duplicate, .EventID. Empty:
	// {"status":"accepted","log_id":N,"duplicate":false}.
	Body string `yaml:"body"`
}

// Retry is a source's retry policy.
type Retry struct {
	// MaxAttempts before FAILED. Default 8.
	MaxAttempts int `yaml:"max_attempts"`
	// Initial delay before the second attempt. Default 5s.
	Initial time.Duration `yaml:"initial"`
	// Max caps the delay. Default 10m.
	Max time.Duration `yaml:"max"`
}

// Config defaults and limits.
const (
	MaxBodyBytesDefault     = 1 << 20
	MaxBodyBytesLimit       = 1<<24 - 1 // what callback_log.payload (MEDIUMBLOB) holds
	SeparatorDefault        = ":"
	ContentTypeDefault      = "application/json"
	RetryMaxAttemptsDefault = 8
	RetryInitialDefault     = 5 * time.Second
	RetryMaxDefault         = 10 * time.Minute
	maxNameLen              = 64
	schemeStandardWebhooks  = "standard-webhooks"
)

// signsHeader reports whether scheme's signature covers request header
// name: Standard Webhooks signs webhook-id (with the timestamp and the
// body); hmac-sha256 and stripe sign the body (and Stripe its t) only;
// none signs nothing, so any header is as good as any other byte.
func signsHeader(scheme, name string) bool {
	switch scheme {
	case schemeStandardWebhooks:
		return strings.EqualFold(name, "webhook-id")
	case signature.SchemeNone:
		return true
	}
	return false
}

// WithDefaults returns a copy with the retry policy's unset fields at
// their defaults.
func (r Retry) WithDefaults() Retry {
	if r.MaxAttempts == 0 {
		r.MaxAttempts = RetryMaxAttemptsDefault
	}
	if r.Initial == 0 {
		r.Initial = RetryInitialDefault
	}
	if r.Max == 0 {
		r.Max = RetryMaxDefault
	}
	return r
}

// Disabled reports whether this is a preset source without its keys or
// its merchant identity (see DisabledReason).
func (c Config) Disabled() bool {
	return c.Preset != "" && len(platform.Missing(c.Preset, c.Platform)) > 0
}

// DemoSecrets are the secrets docs/getting-started.md and configs/callgate.yaml
// publish for the demo sources: anyone can sign with them, so a source
// that accepts one serves only in demo mode (config demo, CALLGATE_DEMO=1).
var DemoSecrets = []string{
	"whsec_Y2FsbGdhdGUtcGF5ZGVtby1kZW1vLWtleS0zMmJ5dGU=", // paydemo
	"shipdemo-demo-secret",                               // shipdemo
}

// HasDemoSecret reports whether the source accepts a documented demo
// secret, also written without its whsec_ prefix (Standard Webhooks takes
// the base64 key either way).
func (c Config) HasDemoSecret() bool {
	for _, s := range append(slices.Clone(c.Signature.Secrets), c.Platform.Secrets...) {
		for _, d := range DemoSecrets {
			if strings.TrimPrefix(strings.TrimSpace(s), "whsec_") == strings.TrimPrefix(d, "whsec_") {
				return true
			}
		}
	}
	return false
}

// DisabledReason says why the source does not serve (it answers 404), or
// "" when it does: a preset without its keys or merchant identity, or,
// outside demo mode, a source that accepts a documented demo secret.
func (c Config) DisabledReason(demo bool) string {
	if c.Preset != "" {
		if missing := platform.Missing(c.Preset, c.Platform); len(missing) > 0 {
			return strings.Join(missing, " and ") + " not set"
		}
	}
	if !demo && c.HasDemoSecret() {
		return "its secret is the README's demo value: set its own secret, or CALLGATE_DEMO=1 for the demo"
	}
	return ""
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Preset != "" && c.Kind == "" {
		c.Kind = platform.KindOf(c.Preset)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = MaxBodyBytesDefault
	}
	if c.EventID.Separator == "" {
		c.EventID.Separator = SeparatorDefault
	}
	if c.Response.ContentType == "" {
		c.Response.ContentType = ContentTypeDefault
	}
	if c.RateLimit.Rate > 0 && c.RateLimit.Burst == 0 {
		c.RateLimit.Burst = max(1, int(c.RateLimit.Rate))
	}
	c.Retry = c.Retry.WithDefaults()
	return c
}

// Validate reports every problem at once, each naming its field. kinds are
// the callback kinds this build knows. The signature block is checked by
// building its verifier, so a scheme's rules live in internal/signature.
func (c Config) Validate(kinds []string) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	switch {
	case c.Name == "":
		bad("name", "is required")
	case !ValidName(c.Name) || len(c.Name) > maxNameLen:
		bad("name", "%q: use at most %d letters, digits, '-', '_' and '.'", c.Name, maxNameLen)
	}
	known := false
	for _, k := range kinds {
		known = known || k == c.Kind
	}
	if !known {
		bad("kind", "unknown kind %q (want one of %s)", c.Kind, strings.Join(kinds, ", "))
	}
	if c.Preset != "" {
		errs = append(errs, c.validatePreset()...)
	} else {
		errs = append(errs, c.validateGeneric()...)
	}
	if c.RateLimit.Rate < 0 || c.RateLimit.Burst < 0 {
		bad("rate_limit", "rate and burst must not be negative")
	}
	for j, cidr := range c.AllowIPs {
		if _, err := ParseCIDR(cidr); err != nil {
			bad(fmt.Sprintf("allow_ips[%d]", j), "%q is not an address or CIDR", cidr)
		}
	}
	for j, ct := range c.ContentTypes {
		if _, _, err := mime.ParseMediaType(ct); err != nil {
			bad(fmt.Sprintf("content_types[%d]", j), "%q is not a media type", ct)
		}
	}
	if c.MaxBodyBytes < 1 {
		bad("max_body_bytes", "must be positive")
	}
	if c.MaxBodyBytes > MaxBodyBytesLimit {
		bad("max_body_bytes", "%d is more than callback_log.payload (MEDIUMBLOB) holds: at most %d", c.MaxBodyBytes, MaxBodyBytesLimit)
	}
	if c.Retry.MaxAttempts < 1 {
		bad("retry.max_attempts", "must be at least 1")
	}
	if c.Retry.Initial < 0 || c.Retry.Max < c.Retry.Initial {
		bad("retry", "want 0 < initial <= max")
	}
	return errors.Join(errs...)
}

// validateGeneric checks a source without a preset: its signature,
// event id, business key and response come from its own configuration.
func (c Config) validateGeneric() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.BusinessKey == "" {
		bad("business_key", "is required (the JSON field holding the business key)")
	}
	if len(c.EventID.Fields) == 0 && c.EventID.Header == "" && !c.EventID.BodyDigest && (c.Signature.Scheme != schemeStandardWebhooks || c.EventID.IgnoreScheme) {
		bad("event_id.fields", "is required unless event_id.body_digest, event_id.header or the scheme provides the event id")
	}
	if c.EventID.Header != "" && !validHeader.MatchString(c.EventID.Header) {
		bad("event_id.header", "%q is not an HTTP header name", c.EventID.Header)
	}
	if h := c.EventID.Header; h != "" && validHeader.MatchString(h) && !signsHeader(c.Signature.Scheme, h) {
		bad("event_id.header", "%s is not covered by the %s signature (it signs the body only): a captured request re-sent with another %s would be stored and processed again; take the event id from signed bytes instead: event_id.body_digest: true (a digest of the body), or event_id.fields (docs/security.md, \"Replays\")",
			h, c.Signature.Scheme, h)
	}
	if c.EventID.BodyDigest && (c.EventID.Header != "" || len(c.EventID.Fields) > 0 || c.EventID.IgnoreScheme) {
		bad("event_id.body_digest", "does not go with event_id.header, event_id.fields or event_id.ignore_scheme (the digest is the event id)")
	}
	if c.EventID.Header != "" && c.EventID.IgnoreScheme {
		bad("event_id.ignore_scheme", "does not go with event_id.header (the header is the event id)")
	}
	for j, f := range c.EventID.Fields {
		if f == "" {
			bad(fmt.Sprintf("event_id.fields[%d]", j), "must not be empty")
		}
	}
	if _, err := signature.New(c.Signature.VerifierConfig()); err != nil {
		// The scheme reports each bad field; name them under signature.
		for _, e := range unjoin(err) {
			errs = append(errs, fmt.Errorf("signature.%w", e))
		}
	}
	if c.Response.Body != "" {
		if _, err := template.New(c.Name).Parse(c.Response.Body); err != nil {
			bad("response.body", "invalid template: %v", err)
		}
	}
	if !c.Platform.Empty() {
		bad("platform", "applies only to a source with a preset")
	}
	if c.PaymentCurrency != "" {
		if c.Kind != callback.KindPayment {
			bad("payment_currency", "applies only to a payment source")
		} else if _, err := callback.Currency(c.PaymentCurrency); err != nil {
			bad("payment_currency", "%v", err)
		}
	}
	return errs
}

// validatePreset checks a preset source: the preset supplies what a
// generic source configures, and its keys are checked by building it
// (unless none is set: the source is then disabled).
func (c Config) validatePreset() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	kind := platform.KindOf(c.Preset)
	if kind == "" {
		bad("preset", "unknown preset %q (want one of %s)", c.Preset, strings.Join(platform.Names(), ", "))
		return errs
	}
	if c.Kind != kind {
		bad("kind", "preset %s sends %s callbacks, not %s", c.Preset, kind, c.Kind)
	}
	if c.Signature.Scheme != "" || len(c.Signature.Secrets) > 0 {
		bad("signature", "is set by preset %s; put its keys under platform", c.Preset)
	}
	if len(c.EventID.Fields) > 0 || c.EventID.Header != "" || c.BusinessKey != "" {
		bad("event_id", "and business_key are set by preset %s", c.Preset)
	}
	if c.Response.Body != "" {
		bad("response", "is set by preset %s (the answers the platform expects)", c.Preset)
	}
	if c.PaymentCurrency != "" {
		bad("payment_currency", "is set by preset %s (its events name their currency)", c.Preset)
	}
	if c.Disabled() {
		return errs
	}
	if _, err := platform.New(c.Preset, c.Platform); err != nil {
		errs = append(errs, unjoin(err)...)
	}
	return errs
}

// unjoin lists the errors an errors.Join holds (or err alone).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// ValidName reports whether s is a usable name: letters, digits, '-', '_'
// and '.'.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// VerifierConfig converts the signature block for internal/signature.
func (s Signature) VerifierConfig() signature.Config {
	return signature.Config{
		Scheme:        s.Scheme,
		Secrets:       s.Secrets,
		Header:        s.Header,
		Encoding:      s.Encoding,
		Prefix:        s.Prefix,
		Tolerance:     s.Tolerance,
		AllowUnsigned: s.AllowUnsigned,
	}
}

// ParseCIDR reads "10.0.0.0/8" or a bare address ("192.0.2.7", "::1").
func ParseCIDR(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

var (
	namePattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	validHeader = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)
