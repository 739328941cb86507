package callback

import (
	"bytes"
	"encoding/json"
)

// DecodePayload decodes a stored payload into v, strictly enough that a
// payload which can never be processed fails permanently (wrong types,
// trailing data) instead of being retried.
func DecodePayload(payload []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(v); err != nil {
		return Permanentf("invalid payload: %w", err)
	}
	if dec.More() {
		return Permanentf("invalid payload: trailing data after the JSON object")
	}
	return nil
}
