package callback

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// extractByMap is Extract as it was written before it read values in
// place: the whole body decoded into a map[string]json.RawMessage, each
// path looked up in maps, each string decoded by json.Unmarshal. It is the
// reference of the differential below; how the values found make the ids
// (Extractor.ids) is shared.
func extractByMap(e Extractor, body []byte, schemeEventID string) (eventID, businessKey string, err error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return "", "", ErrInvalidJSON
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "", "", ErrInvalidJSON
	}
	return e.ids(schemeEventID, func(path []string, name string) (string, error) { return mapScalarAt(top, path, name) })
}

func mapScalarAt(top map[string]json.RawMessage, path []string, name string) (string, error) {
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

// extractors are configured sources' readings: flat, composite, nested,
// a path through an array, a scheme id ignored.
var extractors = []Extractor{
	NewExtractor([]string{"paymentNo"}, ":", "orderCode", false),
	NewExtractor([]string{"waybillNo", "seq"}, ":", "waybillNo", false),
	NewExtractor([]string{"data.id"}, ":", "data.order.code", false),
	NewExtractor([]string{"data.items.id", "é"}, "|", "data.order", true),
	NewExtractor([]string{"a b", "\u00e9"}, "-", "k\u0000", false),
	// Keys only a decoded comparison finds: U+FFFD (what invalid UTF-8 and
	// a lone surrogate decode to), bytes that are not UTF-8, an escaped
	// '/', a character written as a surrogate pair, a quote, a backslash.
	NewExtractor([]string{"\ufffd", "a/b"}, "", "\xff", false),
	NewExtractor([]string{"\U0001d11e", `a"b`}, ".", `a\b`, true),
	// Empty path segments, and no event fields at all.
	NewExtractor([]string{"a..b", ""}, ":", "a.", false),
	NewExtractor(nil, "", ".", true),
}

// extractBodies are the seeds: bodies as configured sources send them,
// and the ways one goes wrong.
var extractBodies = []string{
	`{"orderCode":"O1","paymentNo":"P1","amount":5}`,
	`{"waybillNo":"WB","seq":12,"status":"DELIVERED"}`,
	`{"data":{"id":"E","order":{"code":"C"},"items":[{"id":1}]}}`,
	`{"data":{"id":7,"order":"x"},"é":"acute"}`,
	`{"orderCode":"O","orderCode":"P","paymentNo":"a","paymentNo":null}`,
	`{"order\u0043ode":"escaped key","payment\u004eo":"\u0050\n"}`,
	`{"ORDERCODE":"case","OrderCode":"case2","orderCode":"exact","paymentNo":-3}`,
	`{"orderCode":" \t ","paymentNo":"P"}`,
	`{"orderCode":"O","paymentNo":1.5}`, `{"orderCode":"O","paymentNo":1e3}`, `{"orderCode":"O","paymentNo":-0}`,
	`{"orderCode":true,"paymentNo":false}`, `{"orderCode":[],"paymentNo":{}}`,
	`{"data":null}`, `{"data":[{"order":{"code":"C"}}]}`, `{"data":"{\"id\":1}"}`,
	`{"a b":"sp","é":"e","k\u0000":"nul"}`,
	"{\"k\\u0000\":\"nul\",\"a b\":1,\"\u00e9\":2}",
	"{\"orderCode\":\"\xff\",\"paymentNo\":\"\xfe\"}",
	"{\"\xffrderCode\":\"bad key\",\"paymentNo\":\"P\"}",
	"{\"\ufffd\":\"replacement\",\"orderCode\":\"O\",\"paymentNo\":\"P\"}",
	`{"orderCode":"\ud800","paymentNo":"\udc00x"}`,
	` {"orderCode" : "O" , "paymentNo" : "P" } `,
	"\t\n{\n\"orderCode\"\n:\n\"O\"\n,\n\"paymentNo\"\n:\n2\n}\n",
	`{"orderCode":"` + strings.Repeat("k", 191) + `","paymentNo":"P"}`,
	`{"orderCode":"` + strings.Repeat("k", 192) + `","paymentNo":"P"}`,
	`{"orderCode":"O","paymentNo":"` + strings.Repeat("p", 300) + `"}`,
	`{"x":"\\","y":"a\\","z":"\\\"","orderCode":"O","paymentNo":"P"}`,
	`{"\ud800":"lone","a\/b":"slash","\uD834\uDD1E":"pair","a\"b":"quote","a\\b":"backslash","":{"":"empty"}}`,
	"{\"\xff\":\"bad\",\"\ufffd\":\"replacement\",\"a\":{\"\":{\"b\":\"deep\"}},\"\":\"e\"}",
	`{}`, `[]`, `null`, `"text"`, `12`, ``, ` `, `{`, `}`, `{"a":}`, `{"a":1,}`, `{'a':1}`, `{"a" 1}`,
}

// extractTails are what may follow a body.
var extractTails = []string{"", " ", "\n\t ", "}", "]", "x", " {}", ",", " null", "\x00"}

// answerOf is an Extract's whole outcome.
func answerOf(ev, key string, err error) string {
	if err != nil {
		return fmt.Sprintf("error %T %q", err, err.Error())
	}
	return fmt.Sprintf("event %q key %q", ev, key)
}

func checkExtractSame(t *testing.T, body []byte) (succeeded int) {
	t.Helper()
	for i, e := range extractors {
		for _, scheme := range []string{"", "msg_1"} {
			got := answerOf(e.Extract(body, scheme))
			want := answerOf(extractByMap(e, body, scheme))
			if got != want {
				t.Fatalf("extractor %d, scheme id %q, body %q:\nExtract %s\nthe map %s", i, scheme, body, got, want)
			}
			if strings.HasPrefix(got, "event") {
				succeeded++
			}
		}
	}
	return succeeded
}

// randomObject writes a JSON object of keys the extractors look for (and
// near misses: case, escapes, bad UTF-8), values of every JSON type, and
// whitespace anywhere JSON allows it.
func randomObject(rng *rand.Rand, depth int) string {
	keys := []string{`"orderCode"`, `"paymentNo"`, `"waybillNo"`, `"seq"`, `"data"`, `"id"`, `"order"`, `"code"`, `"items"`,
		`"é"`, `"\u00e9"`, `"a b"`, `"k\u0000"`, `"OrderCode"`, `"order\u0043ode"`, "\"\xffx\"", `"x"`, `""`,
		"\"\xff\"", `"\ufffd"`, `"\ud800"`, `"a/b"`, `"a\/b"`, `"𝄞"`, `"\ud834\udd1e"`, `"\uD834\uDD1E"`, `"a\"b"`, `"a\\b"`, `"a"`, `"b"`}
	ws := []string{"", "", " ", "\n", "\t ", "\r\n"}
	var b strings.Builder
	b.WriteString("{")
	for i := range rng.IntN(6) {
		if i > 0 {
			b.WriteString(ws[rng.IntN(len(ws))] + ",")
		}
		b.WriteString(ws[rng.IntN(len(ws))] + keys[rng.IntN(len(keys))] + ws[rng.IntN(len(ws))] + ":" + ws[rng.IntN(len(ws))])
		b.WriteString(randomValue(rng, depth))
	}
	b.WriteString(ws[rng.IntN(len(ws))] + "}")
	return b.String()
}

func randomValue(rng *rand.Rand, depth int) string {
	scalars := []string{`"O1"`, `"P\"1"`, `"\u0041\\b"`, `"  "`, `""`, `"\ud800"`, "\"\xfe\"", `"é"`, `"` + strings.Repeat("z", 200) + `"`,
		`0`, `-12`, `7`, `1.5`, `2e3`, `-0.0E-1`, `99999999999999999999`, `true`, `false`, `null`, `"}]{["`,
		`"\\"`, `"a\\"`, `"\\\""`, `"\/"`}
	if depth > 0 {
		switch rng.IntN(5) {
		case 0:
			return randomObject(rng, depth-1)
		case 1:
			var b strings.Builder
			b.WriteString("[")
			for i := range rng.IntN(3) {
				if i > 0 {
					b.WriteString(",")
				}
				b.WriteString(randomValue(rng, depth-1))
			}
			b.WriteString(" ]")
			return b.String()
		}
	}
	return scalars[rng.IntN(len(scalars))]
}

// TestExtractAnswersAsTheMap: Extract, reading values in place, answers
// every body as the map reading (extractByMap) does, the same event id
// and key or the same error, for each extractor with and without a
// scheme id: the seeds with each tail, cut short at every byte, mutated
// at random, and random objects (fixed seed: the same inputs every run).
func TestExtractAnswersAsTheMap(t *testing.T) {
	t.Parallel()
	n, ok := 0, 0
	for _, body := range extractBodies {
		for _, tail := range extractTails {
			ok += checkExtractSame(t, []byte(body+tail))
			n++
		}
		for cut := range len(body) {
			ok += checkExtractSame(t, []byte(body[:cut]))
			n++
		}
	}
	rng := rand.New(rand.NewPCG(40, 3))
	alphabet := []string{`"`, `{`, `}`, `[`, `]`, `:`, `,`, ` `, `1`, `-`, `.`, `e`, `null`, `"orderCode"`, `"paymentNo"`, `\`, `\u0043`, "\xff"}
	for range 20000 {
		body := []byte(extractBodies[rng.IntN(len(extractBodies))])
		for range 1 + rng.IntN(3) {
			at := rng.IntN(len(body) + 1)
			switch rng.IntN(3) {
			case 0:
				body = append(body[:at:at], append([]byte(alphabet[rng.IntN(len(alphabet))]), body[at:]...)...)
			case 1:
				if at < len(body) {
					body = append(body[:at:at], body[at+1:]...)
				}
			default:
				if at < len(body) {
					body[at] = alphabet[rng.IntN(len(alphabet))][0]
				}
			}
		}
		ok += checkExtractSame(t, body)
		n++
	}
	for range 20000 {
		ok += checkExtractSame(t, []byte(randomObject(rng, 3)))
		n++
	}
	// Enough of them must get through to an id for the comparison to
	// cover the values, not only the refusals.
	if n < 40000 || ok < 4000 {
		t.Fatalf("%d bodies compared, %d extractions succeeded", n, ok)
	}
	t.Logf("%d bodies, each read by %d extractors with and without a scheme id, answered alike (%d found their ids)", n, len(extractors), ok)
}

// FuzzExtractAnswersAsTheMap: the same differential on whatever the
// fuzzer finds.
func FuzzExtractAnswersAsTheMap(f *testing.F) {
	for _, body := range extractBodies {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkExtractSame(t, body)
	})
}

// FuzzExtractConfigAnswersAsTheMap: the same differential with the
// configuration fuzzed too (the key path, two event fields, the
// separator, ignoring the scheme id, the scheme id).
func FuzzExtractConfigAnswersAsTheMap(f *testing.F) {
	for _, body := range extractBodies {
		f.Add([]byte(body), "orderCode", "paymentNo", "data.id", ":", false, "")
	}
	f.Add([]byte(`{"":{"":"x"},"\ud800":"y"}`), ".", "\ufffd", "", "", true, "s")
	f.Fuzz(func(t *testing.T, body []byte, key, field1, field2, sep string, ignore bool, scheme string) {
		for _, e := range []Extractor{NewExtractor([]string{field1, field2}, sep, key, ignore), NewExtractor([]string{field1}, sep, key, ignore)} {
			got, want := answerOf(e.Extract(body, scheme)), answerOf(extractByMap(e, body, scheme))
			if got != want {
				t.Fatalf("extractor %+v, scheme id %q, body %q:\nExtract %s\nthe map %s", e, scheme, body, got, want)
			}
		}
	})
}
