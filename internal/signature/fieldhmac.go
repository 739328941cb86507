package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// FieldHMAC verifies a base64 HMAC-SHA256 computed over a list of fields
// joined by a separator, keyed with hex-decoded keys. The fields are
// whatever the platform signs, read by the caller from its payload in the
// platform's order; the block only joins, MACs and compares. Adyen's
// standard webhook is one configuration of it: the eight fields of a
// NotificationRequestItem (pspReference, originalReference,
// merchantAccountCode, merchantReference, amount.value, amount.currency,
// eventCode, success), ":" as separator, the signature in
// additionalData.hmacSignature.
//
// No escaping is applied: a field holding the separator is signed as it
// is (Adyen's notification form does not escape either). Any key may
// match (rotation), each comparison is constant-time. Safe for concurrent
// use; a verification allocates nothing in the steady state.
type FieldHMAC struct {
	macs *macSet
	sep  string

	errMissing  error
	errEncoding error
	errMismatch error
}

// NewFieldHMAC builds the verifier for keys (raw bytes, see [HexKey]),
// joining fields with sep. name says where the signature sits
// ("additionalData.hmacSignature"); errors name it.
func NewFieldHMAC(name, sep string, keys [][]byte) (*FieldHMAC, error) {
	if len(keys) == 0 {
		return nil, errors.New("at least one key is required")
	}
	for i, k := range keys {
		if len(k) == 0 {
			return nil, fmt.Errorf("key %d is empty", i)
		}
	}
	return &FieldHMAC{
		macs:        newMACSet(keys),
		sep:         sep,
		errMissing:  fmt.Errorf("%s: %w", name, ErrMissing),
		errEncoding: fmt.Errorf("%s is not a base64 HMAC-SHA256: %w", name, ErrMalformed),
		errMismatch: fmt.Errorf("%s: %w", name, ErrMismatch),
	}, nil
}

// HexKey decodes a key given in hex (either case), as Adyen's Customer
// Area shows it. The error is safe to show: it never repeats the key.
func HexKey(s string) ([]byte, error) {
	switch {
	case s == "":
		return nil, errors.New("key is empty (unset environment variable?)")
	case strings.TrimSpace(s) != s:
		return nil, errors.New("key has leading or trailing whitespace")
	case len(s)%2 != 0:
		return nil, fmt.Errorf("key is not hex: %d digits, an odd number", len(s))
	}
	k, err := hex.DecodeString(s)
	if err != nil {
		return nil, errors.New("key is not hex (want digits 0-9 and A-F only)")
	}
	return k, nil
}

// Verify checks sig (base64, standard or URL-safe, padded or not) against
// the fields. Errors wrap ErrMissing (no signature), ErrMalformed (not a
// base64 32-byte value) or ErrMismatch (no key matched).
func (v *FieldHMAC) Verify(fields []string, sig string) error {
	sig = strings.TrimSpace(sig)
	if sig == "" {
		return v.errMissing
	}
	st := v.macs.get()
	defer v.macs.put(st)
	got, ok := st.decodeAnyBase64(sig)
	if !ok {
		return v.errEncoding
	}
	// The decoded signature is in st.sig; st.buf is free again.
	st.buf = st.buf[:0]
	for i, f := range fields {
		if i > 0 {
			st.buf = append(st.buf, v.sep...)
		}
		st.buf = append(st.buf, f...)
	}
	st.sum(nil, st.buf)
	if !st.match(got) {
		return v.errMismatch
	}
	return nil
}

// SignFields returns base64(HMAC-SHA256(key, fields joined by sep)), key
// in hex: what the platform puts in the payload (for tests and tools).
func SignFields(hexKey, sep string, fields ...string) (string, error) {
	k, err := HexKey(hexKey)
	if err != nil {
		return "", err
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(strings.Join(fields, sep)))
	return base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}
