package callback

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
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
	return scanKeys(body, func(_ int, f *keyFrame, key []byte) error {
		if prev, dup := f.find(key); dup {
			if bytes.Equal(prev, key) {
				return fmt.Errorf("%w: %q appears twice in one object", ErrAmbiguousKey, Truncate(string(key), 64))
			}
			return fmt.Errorf("%w: %q and %q differ only in case", ErrAmbiguousKey, Truncate(string(prev), 64), Truncate(string(key), 64))
		}
		return nil
	})
}

// keyFrame is an open object or array of a scan.
type keyFrame struct {
	object    bool
	expectKey bool
	keys      [][]byte          // the object's keys so far, decoded
	folded    map[string][]byte // foldKey(key) -> key, once keys are many
}

// foldedFrom is how many keys an object holds before find uses a map
// rather than comparing with each.
const foldedFrom = 16

// find returns the key of f that key equals under case folding, if any,
// and records key.
func (f *keyFrame) find(key []byte) ([]byte, bool) {
	if f.folded == nil && len(f.keys) >= foldedFrom {
		f.folded = make(map[string][]byte, 2*foldedFrom)
		for _, k := range f.keys {
			f.folded[foldKey(string(k))] = k
		}
	}
	if f.folded != nil {
		fk := foldKey(string(key))
		if prev, ok := f.folded[fk]; ok {
			return prev, true
		}
		f.folded[fk] = key
	} else {
		for _, prev := range f.keys {
			if bytes.EqualFold(prev, key) {
				return prev, true
			}
		}
	}
	f.keys = append(f.keys, key)
	return nil, false
}

// scanKeys calls visit for every object key of body, in order, with the
// depth of its object (1: the top level) and the object's frame (the keys
// before it). It stops at visit's first error, or quietly at a body that
// is not JSON. One pass over the bytes; a key is copied only when it holds
// an escape.
func scanKeys(body []byte, visit func(depth int, f *keyFrame, key []byte) error) error {
	var stack []keyFrame
	top := func() *keyFrame {
		if len(stack) == 0 {
			return nil
		}
		return &stack[len(stack)-1]
	}
	// afterValue: a value ended inside the top frame.
	afterValue := func() {
		if t := top(); t != nil && t.object {
			t.expectKey = true
		}
	}
	for i := 0; i < len(body); {
		switch c := body[i]; c {
		case ' ', '\t', '\n', '\r', ':', ',':
			i++
		case '{', '[':
			afterValue()
			stack = append(stack, keyFrame{object: c == '{', expectKey: c == '{'})
			i++
		case '}', ']':
			if len(stack) == 0 {
				return nil
			}
			stack = stack[:len(stack)-1]
			i++
		case '"':
			j, escaped := i+1, false
			for j < len(body) && body[j] != '"' {
				if body[j] == '\\' {
					escaped = true
					j++
				}
				j++
			}
			if j >= len(body) {
				return nil // unterminated
			}
			t := top()
			if t == nil || !t.object || !t.expectKey {
				afterValue()
				i = j + 1
				continue
			}
			key := body[i+1 : j]
			if escaped {
				var s string
				if json.Unmarshal(body[i:j+1], &s) != nil {
					return nil
				}
				key = []byte(s)
			}
			t.expectKey = false
			if err := visit(len(stack), t, key); err != nil {
				return err
			}
			i = j + 1
		default: // a number, true, false or null
			for i < len(body) && !strings.ContainsRune(" \t\n\r,:]}", rune(body[i])) {
				i++
			}
			afterValue()
		}
	}
	return nil
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
// "OrderCode" or "ORDERCODE" for orderCode), at any level of t. For a flat
// struct (the canonical events) only the top level's keys matter, and one
// scan of the bytes reads them.
func checkExactKeys(payload []byte, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && flatStruct(t) {
		fields := jsonFields(t)
		return scanKeys(payload, func(depth int, _ *keyFrame, key []byte) error {
			if depth != 1 {
				return nil
			}
			if _, exact := fields[string(key)]; exact {
				return nil
			}
			for name := range fields {
				if strings.EqualFold(string(key), name) {
					return fmt.Errorf("%w: %q differs from the field %q only in case", ErrAmbiguousKey, Truncate(string(key), 64), name)
				}
			}
			return nil
		})
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil // DecodePayload reports it
	}
	return walkExactKeys(v, t, "")
}

// flatStruct reports a struct whose fields decode from scalars (strings,
// numbers, booleans, times): no object of its payload but the top one
// names fields.
func flatStruct(t reflect.Type) bool {
	for _, ft := range jsonFields(t) {
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch ft.Kind() {
		case reflect.Struct:
			if ft != reflect.TypeFor[time.Time]() {
				return false
			}
		case reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
			return false
		}
	}
	return true
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
