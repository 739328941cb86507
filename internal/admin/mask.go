package admin

import (
	"bytes"
	"encoding/json"
	"strings"
)

// masked replaces a sensitive value shown to operators.
const masked = "****"

// maskPayload returns payload with the values at paths (dot paths into
// nested objects) replaced, for display only: the stored payload stays
// intact for replay. A payload that is not a JSON object is returned as is.
func maskPayload(payload []byte, paths []string) []byte {
	if len(paths) == 0 {
		return payload
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return payload
	}
	changed := false
	for _, p := range paths {
		changed = maskAt(doc, strings.Split(p, ".")) || changed
	}
	if !changed {
		return payload
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return payload
	}
	return out
}

func maskAt(obj map[string]any, path []string) bool {
	v, ok := obj[path[0]]
	if !ok {
		return false
	}
	if len(path) == 1 {
		obj[path[0]] = maskValue(v)
		return true
	}
	child, ok := v.(map[string]any)
	if !ok {
		return false
	}
	return maskAt(child, path[1:])
}

// maskValue keeps the last four characters of a long string (enough to
// tell two cards apart), nothing of anything else.
func maskValue(v any) any {
	if s, ok := v.(string); ok && len(s) >= 12 {
		return masked + s[len(s)-4:]
	}
	return masked
}
