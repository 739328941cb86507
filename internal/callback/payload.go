package callback

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// DecodePayload decodes a stored payload into v, strictly enough that a
// payload which can never be processed fails permanently (wrong types,
// trailing data, a key that differs from v's field only in case) instead
// of being retried. Keys match v's JSON names exactly, as the intake's
// event id and business key lookups do (see CheckJSONKeys): what a
// handler reads is what the intake read. A field of the wrong type is a
// *TypeError naming it and the type v wants there.
//
// The intake (through the handlers' CheckEvent) and the worker both read
// every body with it, so it takes the quick way where it can: a payload
// that is one JSON value, whitespace around it, and decodes without an
// error, decodes the same with json.Unmarshal as with decodeStream (the
// same decoder, without a Decoder's copy of the input): 6.5 against
// 9.2 µs, and 520 against 2,800 bytes allocated, for a 1 KB payment body
// on the bench machine. Every other payload (a syntax error, trailing
// data, a field of the wrong type, an unreadable time) is decoded again
// by decodeStream, whose answer is the one given. json.Unmarshal
// writes nothing to v on a syntax error; otherwise both readings decode
// the same bytes the same way, so the second one leaves v as one reading
// would. TestDecodePayloadAnswersAsTheStream and FuzzDecodePayload
// compare the two.
func DecodePayload(payload []byte, v any) error {
	if err := json.Unmarshal(payload, v); err != nil {
		return decodeStream(payload, v)
	}
	return exactKeys(payload, v)
}

// decodeStream is DecodePayload's reading of any payload: the first JSON
// value, refused when more follows it.
func decodeStream(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(v); err != nil {
		return Permanentf("invalid payload: %w", typeError(payload, reflect.TypeOf(v), err))
	}
	if trailing(payload, dec) {
		return Permanentf("invalid payload: trailing data after the JSON object")
	}
	return exactKeys(payload, v)
}

// trailing reports whether anything but JSON whitespace follows the value
// dec has just decoded from payload: also a '}' or ']', which dec.More()
// stops at, and so would let through. dec reads payload from its first
// byte and has decoded that one value (its InputOffset is then the
// value's end).
func trailing(payload []byte, dec *json.Decoder) bool {
	return len(bytes.TrimLeft(payload[dec.InputOffset():], " \t\r\n")) > 0
}

// exactKeys refuses a payload whose key differs from v's field only in
// case.
func exactKeys(payload []byte, v any) error {
	if err := checkExactKeys(payload, reflect.TypeOf(v)); err != nil {
		return Permanentf("invalid payload: %w", err)
	}
	return nil
}

// TypeError is a payload field whose JSON value cannot become the field's
// type: what the sender got wrong, in the sender's terms.
type TypeError struct {
	Field string // the JSON name, e.g. "amount"
	Want  string // e.g. "an integer"
	Got   string // e.g. "a string", or the number as sent
	Err   error  // the decoder's own error
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("field %q: want %s, got %s", e.Field, e.Want, e.Got)
}

func (e *TypeError) Unwrap() error { return e.Err }

// typeError turns err, the decoder's failure on payload into t, into a
// *TypeError when a top-level field of t is to blame: the field is found by
// decoding each of payload's fields alone into the field's own type, so
// the wanted type is always the struct's, also for a time, whose parse
// errors name no field. Any other error is returned as it is.
func typeError(payload []byte, t reflect.Type, err error) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return err
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(payload, &top) != nil {
		return err
	}
	fields := jsonFields(t)
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// The field the decoder names first, so that of several wrong fields
	// the first in the body is the one reported.
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		keys = slices.Insert(keys, 0, te.Field)
	}
	for _, k := range keys {
		// encoding/json matches keys without regard to case; so does this,
		// to blame the field it filled.
		name, ft, ok := fieldFor(fields, k)
		if !ok {
			continue
		}
		raw, sent := top[k]
		if !sent || json.Unmarshal(raw, reflect.New(ft).Interface()) == nil {
			continue
		}
		return &TypeError{Field: name, Want: wantOf(ft), Got: gotOf(raw, ft), Err: err}
	}
	return err
}

// fieldFor finds the field of fields that key fills, exactly or else
// without regard to case.
func fieldFor(fields map[string]reflect.Type, key string) (string, reflect.Type, bool) {
	if ft, ok := fields[key]; ok {
		return key, ft, true
	}
	for name, ft := range fields {
		if strings.EqualFold(name, key) {
			return name, ft, true
		}
	}
	return "", nil, false
}

// wantOf says what JSON a field of type t takes.
func wantOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "a time in RFC 3339 (2026-01-02T15:04:05Z)"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// gotOf says what raw is: its JSON type, or, for a number or a string
// where a time was wanted, the value itself (shortened).
func gotOf(raw json.RawMessage, want reflect.Type) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		for want.Kind() == reflect.Pointer {
			want = want.Elem()
		}
		if want == reflect.TypeFor[time.Time]() {
			return Truncate(string(raw), 64)
		}
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return Truncate(string(raw), 64)
}
