package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stripe verifies Stripe's scheme: a header "t=<unix>,v1=<hex>[,v1=<hex>...]"
// (other keys such as v0 are ignored), HMAC-SHA256 over "{t}.{body}" keyed
// with the raw bytes of the whole secret string (whsec_... is NOT decoded).
// Any v1 entry may match any secret. Stripe's event id lives in the body, so
// Result.EventID stays "".
type stripe struct {
	macs      *macSet
	header    string // canonical
	tolerance time.Duration

	errMissing    error
	errEntry      error
	errNoT        error
	errDupT       error
	errTimestamp  error
	errNoV1       error
	errBadV1      error
	errMismatch   error
	errTooOld     error
	errTooNew     error
	headersSingle []string
}

var _ Verifier = (*stripe)(nil)

func newStripe(keys [][]byte, header string, tolerance time.Duration) *stripe {
	header = http.CanonicalHeaderKey(header)
	return &stripe{
		macs:          newMACSet(keys),
		header:        header,
		tolerance:     tolerance,
		errMissing:    fmt.Errorf("%s: %w", header, ErrMissing),
		errEntry:      fmt.Errorf("%s has an entry that is not key=value: %w", header, ErrMalformed),
		errNoT:        fmt.Errorf("%s has no t= timestamp: %w", header, ErrMalformed),
		errDupT:       fmt.Errorf("%s has more than one t= timestamp: %w", header, ErrMalformed),
		errTimestamp:  fmt.Errorf("%s t= is not a unix timestamp in seconds: %w", header, ErrMalformed),
		errNoV1:       fmt.Errorf("%s has no v1 signature: %w", header, ErrMismatch),
		errBadV1:      fmt.Errorf("%s v1 entries are not hex HMAC-SHA256 values: %w", header, ErrMalformed),
		errMismatch:   fmt.Errorf("%s: %w", header, ErrMismatch),
		errTooOld:     fmt.Errorf("%s t= too old: %w", header, ErrExpired),
		errTooNew:     fmt.Errorf("%s t= too far in the future: %w", header, ErrExpired),
		headersSingle: []string{header},
	}
}

func (v *stripe) Headers() []string {
	return append([]string(nil), v.headersSingle...)
}

// nextItem splits the next comma-separated, space-trimmed item off s.
func nextItem(s string) (item, rest string) {
	item, rest, _ = strings.Cut(s, ",")
	return strings.TrimSpace(item), rest
}

func (v *stripe) Verify(h http.Header, body []byte, now time.Time) (Result, error) {
	value := strings.TrimSpace(h.Get(v.header))
	if value == "" {
		return Result{}, v.errMissing
	}

	// Pass 1: structure, timestamp, and whether any v1 could be a MAC.
	var ts string
	haveT, sawV1, candidate := false, false, false
	for rest := value; rest != ""; {
		var item string
		item, rest = nextItem(rest)
		if item == "" {
			continue // tolerate ",," and a trailing comma
		}
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			return Result{}, v.errEntry
		}
		switch key {
		case "t":
			if haveT {
				return Result{}, v.errDupT
			}
			haveT, ts = true, val
		case "v1":
			sawV1 = true
			if len(val) == 2*sha256.Size {
				candidate = true
			}
		}
	}
	if !haveT {
		return Result{}, v.errNoT
	}
	sec, ok := parseUnix(ts)
	if !ok {
		return Result{}, v.errTimestamp
	}
	switch window(sec, now, v.tolerance) {
	case -1:
		return Result{}, v.errTooOld
	case 1:
		return Result{}, v.errTooNew
	}
	switch {
	case !sawV1:
		return Result{}, v.errNoV1
	case !candidate:
		return Result{}, v.errBadV1
	}

	st := v.macs.get()
	defer v.macs.put(st)
	st.buf = append(st.buf[:0], ts...)
	st.buf = append(st.buf, '.')
	st.sum(st.buf, body)

	// Pass 2: compare every v1 entry.
	decoded := false
	for rest := value; rest != ""; {
		var item string
		item, rest = nextItem(rest)
		sigHex, ok := strings.CutPrefix(item, "v1=")
		if !ok {
			continue
		}
		sig, ok := st.decodeHex(sigHex)
		if !ok {
			continue
		}
		decoded = true
		if st.match(sig) {
			return Result{}, nil
		}
	}
	if !decoded {
		return Result{}, v.errBadV1
	}
	return Result{}, v.errMismatch
}

// SignStripe returns a full Stripe-Signature header value
// ("t=<unix>,v1=<hex>") for body at ts, keyed with the raw secret string.
func SignStripe(secret string, ts time.Time, body []byte) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return "t=" + t + ",v1=" + hex.EncodeToString(m.Sum(nil))
}
