package platform

import (
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

// ParseForm reads a form body strictly: a parameter given twice, a
// malformed escape or a value that is not UTF-8 is refused, since the
// signature covers exactly one reading of the body.
func ParseForm(body []byte) (Form, error) {
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
