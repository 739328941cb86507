package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks header names, in canonical form so http.Header.Get does
// not have to canonicalize (and allocate) on every request.
const (
	headerWebhookID        = "Webhook-Id"
	headerWebhookTimestamp = "Webhook-Timestamp"
	headerWebhookSignature = "Webhook-Signature"
)

// whsecPrefix marks a Standard Webhooks symmetric secret.
const whsecPrefix = "whsec_"

// Errors are built once: the header names are fixed.
var (
	errSWMissingID        = fmt.Errorf("webhook-id: %w", ErrMissing)
	errSWMissingTimestamp = fmt.Errorf("webhook-timestamp: %w", ErrMissing)
	errSWMissingSignature = fmt.Errorf("webhook-signature: %w", ErrMissing)
	errSWBadTimestamp     = fmt.Errorf("webhook-timestamp is not a unix timestamp in seconds: %w", ErrMalformed)
	errSWBadSignature     = fmt.Errorf("webhook-signature has no <version>,<signature> entry: %w", ErrMalformed)
	errSWBadV1            = fmt.Errorf("webhook-signature v1 entries are not base64 HMAC-SHA256 values: %w", ErrMalformed)
	errSWNoV1             = fmt.Errorf("webhook-signature has no v1 entry: %w", ErrMismatch)
	errSWMismatch         = fmt.Errorf("webhook-signature: %w", ErrMismatch)
	errSWTooOld           = fmt.Errorf("webhook-timestamp too old: %w", ErrExpired)
	errSWTooNew           = fmt.Errorf("webhook-timestamp too far in the future: %w", ErrExpired)
)

// standardWebhooks verifies the Standard Webhooks symmetric scheme:
// HMAC-SHA256 over "{webhook-id}.{webhook-timestamp}.{body}", sent as
// space-separated "v1,<base64>" entries in webhook-signature.
type standardWebhooks struct {
	macs      *macSet
	tolerance time.Duration
}

var _ Verifier = (*standardWebhooks)(nil)

func newStandardWebhooks(keys [][]byte, tolerance time.Duration) *standardWebhooks {
	return &standardWebhooks{macs: newMACSet(keys), tolerance: tolerance}
}

// standardWebhooksKey turns a "whsec_<base64>" secret (or bare base64, as the
// reference libraries also accept) into the HMAC key.
func standardWebhooksKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, whsecPrefix))
	if err != nil {
		return nil, err
	}
	if len(key) == 0 {
		return nil, errors.New("empty key")
	}
	return key, nil
}

func (v *standardWebhooks) Headers() []string {
	return []string{headerWebhookID, headerWebhookTimestamp, headerWebhookSignature}
}

func (v *standardWebhooks) Verify(h http.Header, body []byte, now time.Time) (Result, error) {
	id := h.Get(headerWebhookID)
	ts := h.Get(headerWebhookTimestamp)
	sigs := h.Get(headerWebhookSignature)
	switch {
	case id == "":
		return Result{}, errSWMissingID
	case ts == "":
		return Result{}, errSWMissingTimestamp
	case sigs == "":
		return Result{}, errSWMissingSignature
	}

	sec, ok := parseUnix(ts)
	if !ok {
		return Result{}, errSWBadTimestamp
	}
	switch window(sec, now, v.tolerance) {
	case -1:
		return Result{}, errSWTooOld
	case 1:
		return Result{}, errSWTooNew
	}

	// Cheap structural pass first, so garbage never costs an HMAC.
	wellFormed, sawV1, candidate := false, false, false
	for rest := sigs; rest != ""; {
		var entry string
		entry, rest, _ = strings.Cut(rest, " ")
		version, value, ok := strings.Cut(entry, ",")
		if !ok {
			continue
		}
		wellFormed = true
		if version != "v1" {
			continue // other versions (v1a: ed25519) are not ours to check
		}
		sawV1 = true
		if len(value) == b64Len {
			candidate = true
		}
	}
	switch {
	case !wellFormed:
		return Result{}, errSWBadSignature
	case !sawV1:
		return Result{}, errSWNoV1
	case !candidate:
		return Result{}, errSWBadV1
	}

	st := v.macs.get()
	defer v.macs.put(st)
	st.buf = append(st.buf[:0], id...)
	st.buf = append(st.buf, '.')
	st.buf = append(st.buf, ts...)
	st.buf = append(st.buf, '.')
	st.sum(st.buf, body)

	decoded := false
	for rest := sigs; rest != ""; {
		var entry string
		entry, rest, _ = strings.Cut(rest, " ")
		value, ok := strings.CutPrefix(entry, "v1,")
		if !ok {
			continue
		}
		sig, ok := st.decodeStdBase64(value)
		if !ok {
			continue
		}
		decoded = true
		if st.match(sig) {
			return Result{EventID: id}, nil
		}
	}
	if !decoded {
		return Result{}, errSWBadV1
	}
	return Result{}, errSWMismatch
}

// SignStandardWebhooks returns the webhook-signature value ("v1,<base64>")
// for a message, using a "whsec_<base64>" (or bare base64) secret. The
// matching headers are webhook-id: id and webhook-timestamp: ts.Unix().
func SignStandardWebhooks(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := standardWebhooksKey(secret)
	if err != nil {
		return "", errors.New("standard-webhooks secret must look like whsec_<base64>")
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, ts.Unix(), 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}
