// Package signature verifies that an incoming callback was sent by the
// platform that claims to have sent it.
//
// It is the first thing the intake does with a request: given the request
// headers, the raw body and the current time, a [Verifier] answers "is this
// authentic and fresh?" and, for schemes that carry one, returns the sender's
// event id. Four schemes are supported:
//
//   - [SchemeStandardWebhooks]: the Standard Webhooks spec (webhook-id,
//     webhook-timestamp, webhook-signature; HMAC-SHA256 keyed with the
//     base64-decoded whsec_ secret), with a timestamp tolerance window.
//   - [SchemeHMACSHA256]: a bare HMAC-SHA256 of the body in one header, hex or
//     base64, with an optional prefix (GitHub X-Hub-Signature-256, Shopify
//     X-Shopify-Hmac-Sha256 and many others).
//   - [SchemeStripe]: Stripe-Signature (t=...,v1=...), with a tolerance window.
//   - [SchemeNone]: accepts everything; only built when explicitly allowed.
//
// Besides these header schemes, two building blocks serve platform presets
// whose signature sits inside the payload (internal/platform reads it out
// and hands over the signed values): [FieldHMAC], a base64 HMAC-SHA256 over
// fields joined by a separator with hex keys (Adyen), and [MD5Salt], the
// upper-case hex MD5 of a payload followed by a salt (Kuaidi100). They use
// the same sentinels.
//
// What this package owns: parsing and validating the signature part of the
// configuration ([New]), precomputing keys, secret rotation (any configured
// secret may match), constant-time comparison, the timestamp freshness window
// and the error taxonomy (ErrMissing, ErrMalformed, ErrMismatch, ErrExpired,
// all meaning "401" to the caller, with messages safe to show).
//
// What it does not own: reading or size-limiting the body, loading secrets
// from files or the environment, deduplicating by event id (replay inside the
// tolerance window is the caller's idempotency problem), parsing the payload
// (so Stripe's event id, which lives in the body, is not returned), mapping
// errors to HTTP responses, and asymmetric Standard Webhooks signatures (v1a,
// ed25519), which are ignored.
//
// Verifiers are safe for concurrent use and cheap to call: keys are derived
// once in New and per-request HMAC state is pooled.
package signature

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Verifier checks one request. h are the request headers, body the raw body,
// now the current time. On success it returns the event id the scheme carries
// ("" when the scheme carries none).
//
// Implementations are safe for concurrent use.
type Verifier interface {
	Verify(h http.Header, body []byte, now time.Time) (Result, error)
	// Headers lists the request header names (canonical form) the scheme
	// reads, so the caller can store them with the callback. The returned
	// slice is a fresh copy.
	Headers() []string
}

// Result is what a successful verification learned about the request.
type Result struct {
	// EventID is the sender's event id when the scheme authenticates one
	// (standard-webhooks: webhook-id), "" otherwise.
	EventID string
}

// Sentinel errors returned (wrapped, with detail such as the header name) by
// Verify. All of them mean the request is not authentic and map to HTTP 401.
// Their texts, wrapped or not, never contain secrets or expected signatures
// and are safe to show to the sender.
var (
	// ErrMissing: a header the scheme needs is absent or empty.
	ErrMissing = errors.New("missing signature header")
	// ErrMalformed: the header is present but cannot be parsed.
	ErrMalformed = errors.New("malformed signature header")
	// ErrMismatch: no signature in the request matched any configured secret.
	ErrMismatch = errors.New("no signature matched")
	// ErrExpired: the signed timestamp is outside the tolerance window, in
	// either direction.
	ErrExpired = errors.New("timestamp outside the tolerance window")
)

// Scheme names accepted in Config.Scheme.
const (
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeHMACSHA256       = "hmac-sha256"
	SchemeStripe           = "stripe"
	SchemeNone             = "none"
)

// Encodings accepted in Config.Encoding (hmac-sha256 only).
const (
	EncodingHex    = "hex"
	EncodingBase64 = "base64"
)

// Defaults applied by New when the corresponding Config field is zero.
const (
	DefaultTolerance    = 5 * time.Minute
	DefaultHMACHeader   = "X-Signature"
	DefaultStripeHeader = "Stripe-Signature"
)

const schemeList = SchemeStandardWebhooks + ", " + SchemeHMACSHA256 + ", " + SchemeStripe + ", " + SchemeNone

// Config is the signature block of a source's configuration. Field names in
// validation errors use the configuration's snake_case keys (scheme, secrets,
// header, encoding, prefix, tolerance, allow_unsigned).
type Config struct {
	// Scheme is one of the Scheme* constants.
	Scheme string
	// Secrets holds one or more secrets; any of them may match, which is how
	// rotation works. Empty strings are refused (an unset environment
	// variable expands to "").
	Secrets []string
	// Header names the header holding the signature. hmac-sha256: default
	// "X-Signature"; stripe: default "Stripe-Signature". Not used otherwise.
	Header string
	// Encoding of the hmac-sha256 signature: "hex" (default) or "base64".
	Encoding string
	// Prefix that must precede the hmac-sha256 signature value and is
	// stripped before decoding, e.g. "sha256=" (GitHub).
	Prefix string
	// Tolerance is the accepted clock distance between the signed timestamp
	// and now, in both directions (standard-webhooks and stripe; default 5m).
	Tolerance time.Duration
	// AllowUnsigned must be true for scheme none, and only for it.
	AllowUnsigned bool
}

// New validates cfg and builds the verifier. Every problem found is reported
// at once (errors.Join), each naming the offending field, e.g.
// `secrets[1]: standard-webhooks secret must look like whsec_<base64>`.
func New(cfg Config) (Verifier, error) {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf(field+": "+format, args...))
	}

	scheme := cfg.Scheme
	known := false
	switch scheme {
	case SchemeStandardWebhooks, SchemeHMACSHA256, SchemeStripe, SchemeNone:
		known = true
	case "":
		add("scheme", "is required (want one of %s)", schemeList)
	default:
		add("scheme", "unknown scheme %q (want one of %s)", scheme, schemeList)
	}

	// Fields that do not apply to the chosen scheme are refused rather than
	// silently ignored: a tolerance on hmac-sha256 would suggest a replay
	// protection that does not exist.
	if known {
		usesHeader := scheme == SchemeHMACSHA256 || scheme == SchemeStripe
		if cfg.Header != "" && !usesHeader {
			add("header", "does not apply to scheme %s", scheme)
		}
		if cfg.Encoding != "" && scheme != SchemeHMACSHA256 {
			add("encoding", "does not apply to scheme %s", scheme)
		}
		if cfg.Prefix != "" && scheme != SchemeHMACSHA256 {
			add("prefix", "does not apply to scheme %s", scheme)
		}
		usesTolerance := scheme == SchemeStandardWebhooks || scheme == SchemeStripe
		if cfg.Tolerance != 0 && !usesTolerance {
			add("tolerance", "does not apply to scheme %s (it carries no timestamp)", scheme)
		}
		if scheme == SchemeNone && !cfg.AllowUnsigned {
			add("allow_unsigned", "scheme none needs allow_unsigned: true")
		}
		if scheme != SchemeNone && cfg.AllowUnsigned {
			add("allow_unsigned", "only applies to scheme none")
		}
		if scheme == SchemeNone && len(cfg.Secrets) > 0 {
			add("secrets", "scheme none takes no secrets")
		}
	}
	if cfg.Header != "" && !validHeaderName(cfg.Header) {
		add("header", "%q is not a valid HTTP header name", cfg.Header)
	}
	if cfg.Encoding != "" && cfg.Encoding != EncodingHex && cfg.Encoding != EncodingBase64 {
		add("encoding", "want hex or base64, got %q", cfg.Encoding)
	}
	if cfg.Tolerance < 0 {
		add("tolerance", "must not be negative")
	}

	var keys [][]byte
	if scheme != SchemeNone {
		if len(cfg.Secrets) == 0 {
			add("secrets", "at least one secret is required")
		}
		for i, s := range cfg.Secrets {
			field := fmt.Sprintf("secrets[%d]", i)
			switch {
			case s == "":
				add(field, "secret is empty (unset environment variable?)")
				continue
			case strings.TrimSpace(s) != s:
				add(field, "secret has leading or trailing whitespace")
				continue
			}
			if scheme == SchemeStandardWebhooks {
				key, err := standardWebhooksKey(s)
				if err != nil {
					add(field, "standard-webhooks secret must look like whsec_<base64>")
					continue
				}
				keys = append(keys, key)
				continue
			}
			keys = append(keys, []byte(s))
		}
	}

	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	tolerance := cfg.Tolerance
	if tolerance == 0 {
		tolerance = DefaultTolerance
	}
	switch scheme {
	case SchemeStandardWebhooks:
		return newStandardWebhooks(keys, tolerance), nil
	case SchemeHMACSHA256:
		header := cfg.Header
		if header == "" {
			header = DefaultHMACHeader
		}
		return newHMAC(keys, header, cfg.Encoding == EncodingBase64, cfg.Prefix), nil
	case SchemeStripe:
		header := cfg.Header
		if header == "" {
			header = DefaultStripeHeader
		}
		return newStripe(keys, header, tolerance), nil
	default: // SchemeNone, validated above
		return unsigned{}, nil
	}
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// parseUnix parses a unix-seconds timestamp made only of ASCII digits (no
// sign, no spaces). Up to 18 digits, so it cannot overflow int64.
func parseUnix(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// window classifies a signed timestamp against now: 0 inside the tolerance
// window, -1 too old, +1 too far in the future.
func window(sec int64, now time.Time, tolerance time.Duration) int {
	d := now.Sub(time.Unix(sec, 0)) // saturates instead of overflowing
	switch {
	case d > tolerance:
		return -1
	case d < -tolerance:
		return 1
	default:
		return 0
	}
}
