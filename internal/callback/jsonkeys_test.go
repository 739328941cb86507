package callback_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
)

func TestCheckJSONKeys(t *testing.T) {
	refused := map[string]string{
		`{"orderCode":"ORD-X1","amount":1,"OrderCode":"ORD-X2"}`: `"orderCode" and "OrderCode" differ only in case`,
		`{"orderCode":"A","orderCode":"B"}`:                      `"orderCode" appears twice`,
		`{"a":{"b":1,"B":2}}`:                                    `"b" and "B" differ only in case`,
		`{"a":[{"x":1},{"y":1,"Y":2}]}`:                          `"y" and "Y" differ only in case`,
		"{\"k\":1,\"\u212a\":2}":                                 `differ only in case`, // KELVIN SIGN folds to k
		"{\"s\":1,\"\u017f\":2}":                                 `differ only in case`, // LONG S folds to s
		`{"a":{"x":{"y":1}},"b":1,"B":2}`:                        `"b" and "B"`,
	}
	var many strings.Builder // an object of 40 keys, past the point where a map takes over
	many.WriteString(`{`)
	for i := range 40 {
		fmt.Fprintf(&many, `"key%d":%d,`, i, i)
	}
	refused[many.String()+`"KEY7":1}`] = `"key7" and "KEY7" differ only in case`
	refused[many.String()+`"key39":1}`] = `"key39" appears twice`
	require.NoError(t, callback.CheckJSONKeys([]byte(many.String()+`"key40":1}`)))
	for body, want := range refused {
		err := callback.CheckJSONKeys([]byte(body))
		require.ErrorIs(t, err, callback.ErrAmbiguousKey, body)
		require.ErrorContains(t, err, want, body)
	}
	for _, body := range []string{
		`{"orderCode":"A","paymentNo":"P","amount":1,"nested":{"orderCode":"B"}}`, // the same key in two objects
		`{"a":[{"x":1},{"x":2}]}`,
		`{"a":"orderCode","OrderCode2":1}`,
		`[{"a":1},{"a":1}]`,
		`{"a":{}, "b":[], "c":[[{"d":1}]], "d":null}`,
		`not json`, // the extractor's to refuse
	} {
		require.NoError(t, callback.CheckJSONKeys([]byte(body)), body)
	}
}

// FuzzCheckJSONKeys: whatever the bytes, CheckJSONKeys neither panics nor
// lets through an object whose keys encoding/json would fold together.
func FuzzCheckJSONKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"a":{"b":[1,{"c":2,"C":3}]}}`, `[{"x":{"y":1,"Y":1}}]`, `{"k":1,"` + "\u212a" + `":2}`, `[]`, `{"a":1,"a":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if callback.CheckJSONShape([]byte(s)) != nil {
			return
		}
		err := callback.CheckJSONKeys([]byte(s))
		if json.Valid([]byte(s)) {
			require.Equal(t, referenceAmbiguous([]byte(s)), err != nil, "%q: CheckJSONKeys says %v", s, err)
		}
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		requireNoFoldedKeys(t, v, s)
	})
}

// requireNoFoldedKeys walks a decoded JSON value: no object, at any level,
// may hold two keys that strings.EqualFold says are equal. (Exact
// duplicates collapse in decoding; TestCheckJSONKeys covers those.)
func requireNoFoldedKeys(t *testing.T, v any, body string) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k, sub := range v {
			keys = append(keys, k)
			requireNoFoldedKeys(t, sub, body)
		}
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				require.False(t, strings.EqualFold(keys[i], keys[j]), "%q and %q passed in %q", keys[i], keys[j], body)
			}
		}
	case []any:
		for _, sub := range v {
			requireNoFoldedKeys(t, sub, body)
		}
	}
}

func TestDecodePayloadIsExactCase(t *testing.T) {
	var p callback.PaymentEvent
	err := callback.DecodePayload([]byte(`{"orderCode":"A","paymentNo":"P","AMOUNT":5,"status":"SUCCESS"}`), &p)
	require.True(t, callback.IsPermanent(err))
	require.ErrorContains(t, err, `"AMOUNT" differs from the field "amount" only in case`)
	require.NoError(t, callback.DecodePayload([]byte(`{"orderCode":"A","paymentNo":"P","amount":5,"status":"SUCCESS","extra":{"Amount":1}}`), &p))
	require.EqualValues(t, 5, p.Amount)
}

// referenceAmbiguous is the rule written plainly, on encoding/json's own
// tokens: does an object hold two keys that strings.EqualFold says are
// equal (an exact duplicate included)?
func referenceAmbiguous(body []byte) bool {
	type frame struct {
		object, expectKey bool
		keys              []string
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				if top != nil && top.object {
					top.expectKey = true
				}
				stack = append(stack, frame{object: d == '{', expectKey: d == '{'})
			} else {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if top == nil || !top.object {
			continue
		}
		if !top.expectKey {
			top.expectKey = true
			continue
		}
		key := tok.(string)
		for _, k := range top.keys {
			if strings.EqualFold(k, key) {
				return true
			}
		}
		top.keys = append(top.keys, key)
		top.expectKey = false
	}
}
