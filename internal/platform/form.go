package platform

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/simplifiedchinese"

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
	f, _, err := ParseFormCharset(body, "", "")
	return f, err
}

// Charset is a character set a form's escaped bytes may be in.
type Charset struct {
	// Name is the charset as the sender named it ("utf-8", "GBK", ...).
	Name string
	enc  encoding.Encoding // nil: UTF-8
}

// formCharsets are the charsets a form body may be in, by lower-case
// name: the ones Alipay documents for its charset parameter (utf-8, gbk,
// gb2312). GB2312 text is read as GBK, its superset, whose bytes for
// every GB2312 character are the same (EUC-CN).
var formCharsets = map[string]encoding.Encoding{
	"utf-8": nil, "utf8": nil,
	"gbk": simplifiedchinese.GBK, "gb2312": simplifiedchinese.GBK,
}

// FormCharsets lists the charset names a form body may name, sorted.
func FormCharsets() []string {
	out := make([]string, 0, len(formCharsets))
	for n := range formCharsets {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Encode is s in the charset: the bytes a sender that works in it (Java's
// getBytes(charset)) signs. s came from Decode, so every character has a
// byte sequence in it.
func (c Charset) Encode(s string) ([]byte, error) {
	if c.enc == nil {
		return []byte(s), nil
	}
	return c.enc.NewEncoder().Bytes([]byte(s))
}

// decode reads raw bytes in the charset as UTF-8. Bytes that are not
// text in it are refused: they have no one reading the signature covers
// (x/text would put U+FFFD in their place, so a reading that does not
// encode back to the same bytes is one that replaced something).
func (c Charset) decode(raw string) (string, bool) {
	if c.enc == nil {
		return raw, utf8.ValidString(raw)
	}
	s, err := c.enc.NewDecoder().String(raw)
	if err != nil {
		return "", false
	}
	back, err := c.enc.NewEncoder().String(s)
	return s, err == nil && back == raw
}

// ParseFormCharset reads a form body strictly, as ParseForm does, its
// escaped bytes in the charset named by its parameter param (Alipay's
// charset), or when it has none (or param is "") by fallback (the
// Content-Type's charset), or else UTF-8. The values are returned as
// UTF-8. A charset that is not one of [FormCharsets] is refused, naming
// it.
func ParseFormCharset(body []byte, param, fallback string) (Form, Charset, error) {
	if err := checkFormShape(body); err != nil {
		return nil, Charset{}, err
	}
	type pair struct{ k, v string }
	var raw []pair
	name := ""
	for p := range strings.SplitSeq(string(body), "&") {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, Charset{}, fmt.Errorf("form body: parameter %q is not form-encoded", truncate(k))
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, Charset{}, fmt.Errorf("form body: the value of %q is not form-encoded", truncate(key))
		}
		if param != "" && key == param && name == "" {
			name = val
		}
		raw = append(raw, pair{key, val})
	}
	if name == "" {
		name = fallback
	}
	cs := Charset{Name: name}
	if name != "" {
		enc, ok := formCharsets[strings.ToLower(strings.TrimSpace(name))]
		if !ok {
			return nil, Charset{}, fmt.Errorf("form body: charset %q is not supported (supported: %s)", truncate(name), strings.Join(FormCharsets(), ", "))
		}
		cs.enc = enc
	}
	f := Form{}
	for _, p := range raw {
		key, okk := cs.decode(p.k)
		val, okv := cs.decode(p.v)
		if !okk || !okv {
			return nil, Charset{}, fmt.Errorf("form body: parameter %q is not %s", truncate(strings.ToValidUTF8(p.k, "?")), charsetLabel(cs))
		}
		if _, dup := f[key]; dup {
			return nil, Charset{}, fmt.Errorf("form body: parameter %q appears twice", truncate(key))
		}
		f[key] = val
	}
	if len(f) == 0 {
		return nil, Charset{}, fmt.Errorf("form body: no parameters")
	}
	return f, cs, nil
}

// charsetLabel names a charset in an error ("UTF-8" when none was named).
func charsetLabel(c Charset) string {
	if c.Name == "" || c.enc == nil {
		return "UTF-8"
	}
	return truncate(c.Name)
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
