package callback

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
)

// One reader. The event id and business key are read with exact-case
// lookups; encoding/json matches object keys case-insensitively and lets
// the last of two equal keys win. A body that holds the same key twice, or
// two keys that differ only in case, can therefore say one thing to the
// intake and another to the handler ({"orderCode":"A",...,"OrderCode":"B"}
// stored under A, paid B). CheckJSONKeys refuses such a body at intake, and
// DecodePayload decodes with exact-case keys, so the handler reads what
// the intake read.

// ErrAmbiguousKey is a JSON object key given twice, or in two cases.
var ErrAmbiguousKey = fmt.Errorf("ambiguous JSON key")

// CheckJSONKeys refuses a body in which an object, at any level, holds a
// key twice or two keys that differ only in case (as encoding/json folds
// them). It reports nothing about the grammar: a body that does not parse
// is the extractor's to refuse. Run CheckJSONShape first: it bounds the
// nesting this walks.
func CheckJSONKeys(body []byte) error {
	type frame struct {
		object    bool
		expectKey bool
		keys      map[string]string // folded -> as written
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error reported elsewhere
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if top != nil && top.object {
					top.expectKey = true // after this value, a key
				}
				stack = append(stack, frame{object: d == '{', expectKey: d == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if top == nil || !top.object {
			continue
		}
		if !top.expectKey {
			top.expectKey = true // a value
			continue
		}
		key, _ := tok.(string)
		folded := foldKey(key)
		if prev, dup := top.keys[folded]; dup {
			if prev == key {
				return fmt.Errorf("%w: %q appears twice in one object", ErrAmbiguousKey, Truncate(key, 64))
			}
			return fmt.Errorf("%w: %q and %q differ only in case", ErrAmbiguousKey, Truncate(prev, 64), Truncate(key, 64))
		}
		if top.keys == nil {
			top.keys = map[string]string{}
		}
		top.keys[folded] = key
		top.expectKey = false
	}
}

// foldKey maps key to a canonical form under Unicode simple case folding,
// the equivalence encoding/json (and strings.EqualFold) uses: two keys
// fold alike exactly when EqualFold says they are equal.
func foldKey(key string) string {
	ascii := true
	for i := 0; i < len(key); i++ {
		if key[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		// The smallest rune of an ASCII letter's orbit is its upper case
		// (also for k and s, whose orbits hold the Kelvin sign and the
		// long s).
		return strings.ToUpper(key)
	}
	var b strings.Builder
	for _, r := range key {
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

// foldRune is the smallest rune of r's case-folding orbit.
func foldRune(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
}

// checkExactKeys refuses a payload with an object key that differs only in
// case from a field of the struct it decodes into (encoding/json would take
// "OrderCode" or "ORDERCODE" for orderCode), at any level of t.
func checkExactKeys(payload []byte, t reflect.Type) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil // DecodePayload reports it
	}
	return walkExactKeys(v, t, "")
}

func walkExactKeys(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch val := v.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Struct:
			fields := jsonFields(t)
			for k, sub := range val {
				if ft, ok := fields[k]; ok {
					if err := walkExactKeys(sub, ft, path+k+"."); err != nil {
						return err
					}
					continue
				}
				for name := range fields {
					if strings.EqualFold(k, name) {
						return fmt.Errorf("%w: %q differs from the field %q only in case", ErrAmbiguousKey, Truncate(path+k, 64), path+name)
					}
				}
			}
		case reflect.Map:
			for k, sub := range val {
				if err := walkExactKeys(sub, t.Elem(), path+k+"."); err != nil {
					return err
				}
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for _, sub := range val {
				if err := walkExactKeys(sub, t.Elem(), path); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// jsonFieldCache holds each struct type's JSON field names and types.
var jsonFieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields lists the JSON names of t's fields (as encoding/json names
// them, embedded structs' fields included) and their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := jsonFieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n, typ := range jsonFields(ft) {
					if _, shadowed := out[n]; !shadowed {
						out[n] = typ
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	jsonFieldCache.Store(t, out)
	return out
}
