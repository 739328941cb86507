package callback

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidJSON is returned for a body that is not a JSON object.
var ErrInvalidJSON = errors.New("body is not a valid JSON object")

// FieldError says which field of the payload is missing or unusable.
type FieldError struct {
	Field  string // dot path, e.g. "orderCode"
	Reason string // e.g. "is missing"
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q %s", e.Field, e.Reason) }

// Extractor finds a callback's event id and business key in its payload, as
// a source's config describes them.
type Extractor struct {
	eventFields  [][]string
	eventNames   []string
	separator    string
	keyPath      []string
	keyName      string
	ignoreScheme bool
}

// NewExtractor builds an Extractor. eventFields are dot paths joined by
// separator to form the event id when the scheme carries none (or when
// ignoreScheme is set); keyField is the dot path of the business key.
func NewExtractor(eventFields []string, separator, keyField string, ignoreScheme bool) Extractor {
	e := Extractor{separator: separator, keyPath: strings.Split(keyField, "."), keyName: keyField, ignoreScheme: ignoreScheme}
	for _, f := range eventFields {
		e.eventFields = append(e.eventFields, strings.Split(f, "."))
		e.eventNames = append(e.eventNames, f)
	}
	return e
}

// Extract parses body and returns the event id and business key.
// schemeEventID is the id the signature scheme carried ("" if none); it wins
// unless the source says to ignore it.
//
// It answers as decoding body into a map[string]json.RawMessage and looking
// the paths up would (exact keys, the last of two equal keys winning), but
// reads only the values it needs: json.Valid checks the grammar, and
// member walks the object's bytes, copying no key that has no escape and
// no value but the id it returns. On every configured source's callback
// that is less than half the CPU of the map (BENCHMARKS.md, issue 40, a
// fourth session). TestExtractAnswersAsTheMap and
// FuzzExtractConfigAnswersAsTheMap compare the two readings.
func (e Extractor) Extract(body []byte, schemeEventID string) (eventID, businessKey string, err error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return "", "", ErrInvalidJSON
	}
	return e.ids(schemeEventID, func(path []string, name string) (string, error) { return scalarAt(body, path, name) })
}

// ids makes the event id and the business key of a callback from the
// values at the configured paths, which scalar reads: the scheme's event
// id or the event fields joined, each within its length.
func (e Extractor) ids(schemeEventID string, scalar func(path []string, name string) (string, error)) (eventID, businessKey string, err error) {
	businessKey, err = scalar(e.keyPath, e.keyName)
	if err != nil {
		return "", "", err
	}
	if len(businessKey) > MaxBusinessKeyLen {
		return "", "", &FieldError{Field: e.keyName, Reason: fmt.Sprintf("is longer than %d characters", MaxBusinessKeyLen)}
	}
	if schemeEventID != "" && !e.ignoreScheme {
		eventID = schemeEventID
	} else {
		parts := make([]string, len(e.eventFields))
		for i, path := range e.eventFields {
			if parts[i], err = scalar(path, e.eventNames[i]); err != nil {
				return "", "", err
			}
		}
		eventID = strings.Join(parts, e.separator)
	}
	if len(eventID) > MaxEventIDLen {
		return "", "", &FieldError{Field: "event id", Reason: fmt.Sprintf("is longer than %d characters", MaxEventIDLen)}
	}
	return eventID, businessKey, nil
}

// scalarAt returns the string or integer at path in obj, a valid JSON
// object, as text. Other types, and empty strings, are refused: an id must
// be something a person can read back.
func scalarAt(obj []byte, path []string, name string) (string, error) {
	for i, p := range path {
		raw, ok := member(obj, p)
		if !ok || isNull(raw) {
			return "", &FieldError{Field: name, Reason: "is missing"}
		}
		if i < len(path)-1 {
			if raw[0] != '{' { // only an object has members
				return "", &FieldError{Field: name, Reason: "is missing"}
			}
			obj = raw
			continue
		}
		switch raw[0] {
		case '"':
			s, err := unquote(raw)
			if err != nil {
				return "", &FieldError{Field: name, Reason: "is not a valid string"}
			}
			if strings.TrimSpace(s) == "" {
				return "", &FieldError{Field: name, Reason: "is empty"}
			}
			return s, nil
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			if bytes.ContainsAny(raw, ".eE") {
				return "", &FieldError{Field: name, Reason: "must be a string or an integer"}
			}
			return string(raw), nil
		default:
			return "", &FieldError{Field: name, Reason: "must be a string or an integer"}
		}
	}
	return "", &FieldError{Field: name, Reason: "is missing"}
}

// member returns the value of obj's member key, as written: obj is a valid
// JSON object (json.Valid), starting at its '{'. Keys compare as
// encoding/json decodes them into a map (escapes decoded, invalid UTF-8 as
// U+FFFD, exact case), and of two equal keys the last wins, as in the map.
func member(obj []byte, key string) (json.RawMessage, bool) {
	var found json.RawMessage
	ok := false
	i := 1
	for {
		i = skipSpace(obj, i)
		if obj[i] == '}' {
			return found, ok
		}
		end := skipString(obj, i)
		k := obj[i:end]
		i = skipSpace(obj, end) + 1 // the ':'
		i = skipSpace(obj, i)
		vend := skipValue(obj, i)
		if keyIs(k, key) {
			found, ok = obj[i:vend], true
		}
		i = skipSpace(obj, vend)
		if obj[i] == ',' {
			i++
		}
	}
}

// keyIs reports whether the key k, a JSON string as written (quotes
// included), decodes to key.
func keyIs(k []byte, key string) bool {
	if inner := k[1 : len(k)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner) == key // compared without a copy
	}
	s, err := unquote(k)
	return err == nil && s == key
}

// unquote decodes the JSON string raw (quotes included) as encoding/json
// does. One without escapes, in valid UTF-8, is its bytes: the common
// case, which allocates nothing beyond the string.
func unquote(raw []byte) (string, error) {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// skipValue returns the index just past the value starting at b[i], in a
// valid JSON text.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	default: // a number, true, false or null
		for i < len(b) && !strings.ContainsRune(" \t\n\r,]}", rune(b[i])) {
			i++
		}
		return i
	}
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// Object is a JSON object parsed once into a tree, for dotted-path
// lookups ("a.b.c") of several fields: each lookup walks maps instead of
// parsing the body again.
type Object map[string]any

// ParseObject parses body as a JSON object (numbers kept as written).
func ParseObject(body []byte) (Object, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, ErrInvalidJSON
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil || trailing(body, dec) {
		return nil, ErrInvalidJSON
	}
	return top, nil
}

// Scalar returns the non-empty string or the integer at the dotted path,
// as text; anything else is a *FieldError naming path.
func (o Object) Scalar(path string) (string, error) {
	v, ok := o.lookup(path)
	if !ok {
		return "", &FieldError{Field: path, Reason: "is missing"}
	}
	switch v := v.(type) {
	case string:
		if strings.TrimSpace(v) == "" {
			return "", &FieldError{Field: path, Reason: "is empty"}
		}
		return v, nil
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			return "", &FieldError{Field: path, Reason: "must be a string or an integer"}
		}
		return string(v), nil
	default:
		return "", &FieldError{Field: path, Reason: "must be a string or an integer"}
	}
}

// Number returns the JSON number at the dotted path as written, decimals
// included (an amount sent as a number, 10.50); anything else is a
// *FieldError naming path.
func (o Object) Number(path string) (string, error) {
	v, ok := o.lookup(path)
	if !ok {
		return "", &FieldError{Field: path, Reason: "is missing"}
	}
	n, isNumber := v.(json.Number)
	if !isNumber {
		return "", &FieldError{Field: path, Reason: "must be a number"}
	}
	return string(n), nil
}

// Bool returns the JSON boolean at the dotted path; anything else is a
// *FieldError naming path.
func (o Object) Bool(path string) (bool, error) {
	v, ok := o.lookup(path)
	if !ok {
		return false, &FieldError{Field: path, Reason: "is missing"}
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, &FieldError{Field: path, Reason: "must be true or false"}
	}
	return b, nil
}

// Object returns the object at the dotted path.
func (o Object) Object(path string) (Object, bool) {
	v, ok := o.lookup(path)
	m, isMap := v.(map[string]any)
	return m, ok && isMap
}

// Array returns the array at the dotted path.
func (o Object) Array(path string) ([]any, bool) {
	v, ok := o.lookup(path)
	a, isArray := v.([]any)
	return a, ok && isArray
}

// Has reports whether path leads to a value that is not null.
func (o Object) Has(path string) bool {
	_, ok := o.lookup(path)
	return ok
}

// lookup walks the dotted path; null counts as missing.
func (o Object) lookup(path string) (any, bool) {
	var cur any = map[string]any(o)
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok || cur == nil {
			return nil, false
		}
	}
	return cur, true
}
