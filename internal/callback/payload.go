package callback

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// DecodePayload decodes a stored payload into v, strictly enough that a
// payload which can never be processed fails permanently (wrong types,
// trailing data, a key that differs from v's field only in case) instead
// of being retried. Keys match v's JSON names exactly, as the intake's
// event id and business key lookups do (see CheckJSONKeys): what a
// handler reads is what the intake read.
func DecodePayload(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(v); err != nil {
		return Permanentf("invalid payload: %w", err)
	}
	if dec.More() {
		return Permanentf("invalid payload: trailing data after the JSON object")
	}
	if err := checkExactKeys(payload, reflect.TypeOf(v)); err != nil {
		return Permanentf("invalid payload: %w", err)
	}
	return nil
}
