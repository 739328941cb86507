package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// hmacSHA256 verifies a bare HMAC-SHA256 of the raw body carried in one
// header, hex or base64, optionally behind a fixed prefix:
//
//	GitHub:  X-Hub-Signature-256: sha256=<hex>   (prefix "sha256=", hex)
//	Shopify: X-Shopify-Hmac-Sha256: <base64>     (no prefix, base64)
//
// The key is the secret's raw bytes. There is no timestamp, so no replay
// window, and no event id.
type hmacSHA256 struct {
	macs   *macSet
	header string // canonical
	base64 bool
	prefix string

	errMissing   error
	errNoPrefix  error
	errEncoding  error
	errMismatch  error
	headersSlice []string
}

var _ Verifier = (*hmacSHA256)(nil)

func newHMAC(keys [][]byte, header string, useBase64 bool, prefix string) *hmacSHA256 {
	header = http.CanonicalHeaderKey(header)
	enc := "hex"
	if useBase64 {
		enc = "base64"
	}
	return &hmacSHA256{
		macs:         newMACSet(keys),
		header:       header,
		base64:       useBase64,
		prefix:       prefix,
		errMissing:   fmt.Errorf("%s: %w", header, ErrMissing),
		errNoPrefix:  fmt.Errorf("%s value does not start with %q: %w", header, prefix, ErrMalformed),
		errEncoding:  fmt.Errorf("%s value is not a %s HMAC-SHA256: %w", header, enc, ErrMalformed),
		errMismatch:  fmt.Errorf("%s: %w", header, ErrMismatch),
		headersSlice: []string{header},
	}
}

func (v *hmacSHA256) Headers() []string {
	return append([]string(nil), v.headersSlice...)
}

func (v *hmacSHA256) Verify(h http.Header, body []byte, _ time.Time) (Result, error) {
	value := strings.TrimSpace(h.Get(v.header))
	if value == "" {
		return Result{}, v.errMissing
	}
	if v.prefix != "" {
		if len(value) < len(v.prefix) || !strings.EqualFold(value[:len(v.prefix)], v.prefix) {
			return Result{}, v.errNoPrefix
		}
		value = value[len(v.prefix):]
	}

	st := v.macs.get()
	defer v.macs.put(st)
	var (
		sig []byte
		ok  bool
	)
	if v.base64 {
		sig, ok = st.decodeAnyBase64(value)
	} else {
		sig, ok = st.decodeHex(value)
	}
	if !ok {
		return Result{}, v.errEncoding
	}
	st.sum(nil, body)
	if !st.match(sig) {
		return Result{}, v.errMismatch
	}
	return Result{}, nil
}

// SignHMAC returns the header value for the hmac-sha256 scheme: prefix
// followed by HMAC-SHA256(secret, body) in the given encoding ("base64" for
// standard base64; "hex" or anything else for lowercase hex).
func SignHMAC(secret string, body []byte, encoding, prefix string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	sum := m.Sum(nil)
	if encoding == EncodingBase64 {
		return prefix + base64.StdEncoding.EncodeToString(sum)
	}
	return prefix + hex.EncodeToString(sum)
}
