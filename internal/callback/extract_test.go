package callback_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
)

func TestExtract(t *testing.T) {
	t.Parallel()
	pay := callback.NewExtractor([]string{"paymentNo"}, ":", "orderCode", false)
	ship := callback.NewExtractor([]string{"waybillNo", "seq"}, ":", "waybillNo", false)
	nested := callback.NewExtractor([]string{"data.id"}, ":", "data.order.code", false)
	ignore := callback.NewExtractor([]string{"paymentNo"}, ":", "orderCode", true)

	cases := []struct {
		name      string
		ex        callback.Extractor
		body      string
		schemeID  string
		wantEvent string
		wantKey   string
		wantErr   string
	}{
		{"payment", pay, `{"orderCode":"O1","paymentNo":"P1","amount":5}`, "", "P1", "O1", ""},
		{"scheme id wins", pay, `{"orderCode":"O1","paymentNo":"P1"}`, "msg_1", "msg_1", "O1", ""},
		{"ignore scheme id", ignore, `{"orderCode":"O1","paymentNo":"P1"}`, "msg_1", "P1", "O1", ""},
		{"composite with integer", ship, `{"waybillNo":"WB","seq":12}`, "", "WB:12", "WB", ""},
		{"nested paths", nested, `{"data":{"id":"E","order":{"code":"C"}}}`, "", "E", "C", ""},
		{"leading whitespace", pay, "  \n{\"orderCode\":\"O\",\"paymentNo\":\"P\"}", "", "P", "O", ""},
		{"not json", pay, `hello`, "", "", "", "not a valid JSON object"},
		{"empty body", pay, ``, "", "", "", "not a valid JSON object"},
		{"array", pay, `[{"orderCode":"O"}]`, "", "", "", "not a valid JSON object"},
		{"trailing garbage", pay, `{"orderCode":"O","paymentNo":"P"} x`, "", "", "", "not a valid JSON object"},
		{"missing key", pay, `{"paymentNo":"P"}`, "", "", "", `field "orderCode" is missing`},
		{"null key", pay, `{"orderCode":null,"paymentNo":"P"}`, "", "", "", `field "orderCode" is missing`},
		{"blank key", pay, `{"orderCode":"  ","paymentNo":"P"}`, "", "", "", `field "orderCode" is empty`},
		{"float id", ship, `{"waybillNo":"WB","seq":1.5}`, "", "", "", `field "seq" must be a string or an integer`},
		{"bool key", pay, `{"orderCode":true}`, "", "", "", `field "orderCode" must be a string or an integer`},
		{"missing event field", ship, `{"waybillNo":"WB"}`, "", "", "", `field "seq" is missing`},
		{"nested missing", nested, `{"data":"x"}`, "", "", "", `field "data.order.code" is missing`},
		{"key too long", pay, `{"orderCode":"` + strings.Repeat("k", 192) + `","paymentNo":"P"}`, "", "", "", "longer than 191"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev, key, err := tc.ex.Extract([]byte(tc.body), tc.schemeID)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantEvent, ev)
			require.Equal(t, tc.wantKey, key)
		})
	}
}

func FuzzExtract(f *testing.F) {
	f.Add([]byte(`{"orderCode":"O1","paymentNo":"P1","amount":5}`), "")
	f.Add([]byte(`{"waybillNo":"WB","seq":12,"data":{"id":1}}`), "msg")
	f.Add([]byte(`{"orderCode":{"x":[1,2,{"y":null}]}}`), "")
	f.Add([]byte(`{"orderCode":"\ud800"}`), "")
	f.Add([]byte(`{`), "")
	ex := callback.NewExtractor([]string{"waybillNo", "data.id"}, ":", "orderCode", false)
	f.Fuzz(func(t *testing.T, body []byte, schemeID string) {
		ev, key, err := ex.Extract(body, schemeID)
		if err != nil {
			return
		}
		require.NotEmpty(t, key)
		require.NotEmpty(t, ev)
		require.LessOrEqual(t, len(ev), callback.MaxEventIDLen)
		require.LessOrEqual(t, len(key), callback.MaxBusinessKeyLen)
	})
}

func BenchmarkExtract(b *testing.B) {
	ex := callback.NewExtractor([]string{"paymentNo"}, ":", "orderCode", false)
	body := []byte(`{"orderCode":"ORD-000123","paymentNo":"PAY-000123","amount":1999,"status":"SUCCESS","paidAt":"2026-11-30T12:00:00Z","meta":"` + strings.Repeat("x", 900) + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ex.Extract(body, ""); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCheckJSONShape(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		body string
		want error
	}{
		"ok":                               {`{"a":[1,2,{"b":"c"}],"n":-12.5e3}`, nil},
		"invalid utf-8":                    {"{\"a\":\"\xff\xfe\"}", callback.ErrInvalidUTF8},
		"deep":                             {strings.Repeat("[", 65) + strings.Repeat("]", 65), callback.ErrTooDeep},
		"deep at the limit":                {strings.Repeat("[", 64) + strings.Repeat("]", 64), nil},
		"huge number":                      {`{"amount":` + strings.Repeat("9", 41) + `}`, callback.ErrNumberTooLong},
		"long digits in a string are fine": {`{"id":"` + strings.Repeat("9", 100) + `"}`, nil},
		"brackets in strings do not count": {`{"s":"` + strings.Repeat("[", 100) + `"}`, nil},
		"escaped quote":                    {`{"s":"a\"[[["}`, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, callback.CheckJSONShape([]byte(tc.body)), tc.want)
			if tc.want == nil {
				require.NoError(t, callback.CheckJSONShape([]byte(tc.body)))
			}
		})
	}
}

func FuzzCheckJSONShape(f *testing.F) {
	f.Add([]byte(`{"a":[1,2,{"b":"c"}]}`))
	f.Add([]byte("{\"a\":\"\xff\"}"))
	f.Add([]byte(`[[[[[[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if callback.CheckJSONShape(body) == nil {
			// Whatever passes must not break the extractor.
			_, _, _ = callback.NewExtractor([]string{"id"}, ":", "key", false).Extract(body, "")
		}
	})
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456…"},
		{"ééééé", 6, "é…"}, // é is 2 bytes, … is 3: never half a character
		{"abc", 2, "…"},
	}
	for _, tc := range cases {
		got := callback.Truncate(tc.s, tc.n)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Truncate(%q, %d) (-want +got):\n%s", tc.s, tc.n, diff)
		}
		require.True(t, utf8.ValidString(got))
		require.LessOrEqual(t, len(got), max(tc.n, len("…")))
	}
}

// TestParseObjectRefusesAClosingBracketAfterTheObject: a '}' or ']' after
// the object is trailing data, as anything else is.
func TestParseObjectRefusesAClosingBracketAfterTheObject(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"id":"evt_1"}}`, `{"id":"evt_1"}]`, "{\"id\":\"evt_1\"} ]\n", `{"id":"evt_1"} {}`} {
		_, err := callback.ParseObject([]byte(body))
		require.ErrorIs(t, err, callback.ErrInvalidJSON, "%q", body)
	}
	obj, err := callback.ParseObject([]byte("{\"id\":\"evt_1\"} \n"))
	require.NoError(t, err)
	id, err := obj.Scalar("id")
	require.NoError(t, err)
	require.Equal(t, "evt_1", id)
}
