package platform

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"callgate/internal/callback"
)

// Form is an application/x-www-form-urlencoded body, each value decoded
// exactly once (as every form parser does: a second decoding would break
// values holding '%').
type Form map[string]string

// Limits on a form body, checked by one pass over its bytes before
// anything is decoded, sorted or verified: a body within the size limit can
// still hold a hundred thousand empty fields, each a map entry and a
// sorted key before its signature can be checked. Real notifications have
// a few dozen fields (Alipay) or two (Kuaidi100, whose param holds the
// waybill's whole history as JSON).
const (
	MaxFormFields   = 200
	MaxFormKeyLen   = 128
	MaxFormValueLen = 512 << 10 // as sent, still escaped
)

// checkFormShape refuses a body over the form limits, naming the limit.
func checkFormShape(body []byte) error {
	if t := bytes.TrimSpace(body); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return fmt.Errorf("form body: the body is JSON, not a form (application/x-www-form-urlencoded)")
	}
	fields, start, eq := 0, 0, -1
	for i := 0; i <= len(body); i++ {
		if i < len(body) && body[i] != '&' {
			if body[i] == '=' && eq < 0 {
				eq = i
			}
			continue
		}
		if i > start {
			fields++
			if fields > MaxFormFields {
				return fmt.Errorf("form body: more than %d parameters (the limit)", MaxFormFields)
			}
			keyEnd := i
			if eq >= 0 {
				keyEnd = eq
			}
			if keyEnd-start > MaxFormKeyLen {
				return fmt.Errorf("form body: a parameter name is longer than %d bytes (the limit)", MaxFormKeyLen)
			}
			if eq >= 0 && i-eq-1 > MaxFormValueLen {
				return fmt.Errorf("form body: the value of %q is longer than %d bytes (the limit)", truncate(string(body[start:keyEnd])), MaxFormValueLen)
			}
		}
		start, eq = i+1, -1
	}
	return nil
}

// ParseForm reads a form body strictly: a parameter given twice, a
// malformed escape or a value that is not UTF-8 is refused, since the
// signature covers exactly one reading of the body. A body over the form
// limits is refused before any of it is decoded.
func ParseForm(body []byte) (Form, error) {
	if err := checkFormShape(body); err != nil {
		return nil, err
	}
	f := Form{}
	for pair := range strings.SplitSeq(string(body), "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("form body: parameter %q is not form-encoded", truncate(k))
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("form body: the value of %q is not form-encoded", truncate(key))
		}
		if !utf8.ValidString(key) || !utf8.ValidString(val) {
			return nil, fmt.Errorf("form body: parameter %q is not UTF-8", truncate(key))
		}
		if _, dup := f[key]; dup {
			return nil, fmt.Errorf("form body: parameter %q appears twice", truncate(key))
		}
		f[key] = val
	}
	if len(f) == 0 {
		return nil, fmt.Errorf("form body: no parameters")
	}
	return f, nil
}

// Need returns the non-empty value of key, or an error naming it.
func (f Form) Need(key string) (string, error) {
	if v := f[key]; strings.TrimSpace(v) != "" {
		return v, nil
	}
	return "", fmt.Errorf("parameter %s is missing", key)
}

// truncate keeps an attacker-chosen value short in an error, never
// splitting a UTF-8 character.
func truncate(s string) string { return callback.Truncate(s, 40) }
