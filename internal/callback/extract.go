package callback

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
func (e Extractor) Extract(body []byte, schemeEventID string) (eventID, businessKey string, err error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return "", "", ErrInvalidJSON
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "", "", ErrInvalidJSON
	}
	businessKey, err = scalarAt(top, e.keyPath, e.keyName)
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
			if parts[i], err = scalarAt(top, path, e.eventNames[i]); err != nil {
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

// scalarAt returns the string or integer at path as text. Other types, and
// empty strings, are refused: an id must be something a person can read back.
func scalarAt(top map[string]json.RawMessage, path []string, name string) (string, error) {
	obj := top
	for i, p := range path {
		raw, ok := obj[p]
		if !ok || isNull(raw) {
			return "", &FieldError{Field: name, Reason: "is missing"}
		}
		if i < len(path)-1 {
			obj = nil
			if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
				return "", &FieldError{Field: name, Reason: "is missing"}
			}
			continue
		}
		switch raw[0] {
		case '"':
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
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
	if err := dec.Decode(&top); err != nil || dec.More() {
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
