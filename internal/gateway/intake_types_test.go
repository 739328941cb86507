package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/testenv"
)

// TestIntakeRefusesFieldOfWrongType: a configured JSON source's body is
// read at intake as its kind's handler will read it, so a field of the
// wrong type is a 400 naming the field and the type wanted, like a missing
// one, logged with the request's trace id; nothing is stored or announced.
// Before, "amount":"19.99" was answered 200 and FAILED in the worker.
func TestIntakeRefusesFieldOfWrongType(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	url, logs := startLogged(t, cfg)
	now := time.Now()
	paid := now.UTC().Format(time.RFC3339)

	cases := []struct {
		name   string
		source string
		body   string
		want   string
	}{
		{"amount as a string", "paydemo",
			`{"orderCode":"ORD-T1","paymentNo":"PAY-T1","amount":"19.99","status":"SUCCESS"}`,
			`invalid payload: field "amount": want an integer, got a string`},
		{"amount with a fraction", "paydemo",
			`{"orderCode":"ORD-T2","paymentNo":"PAY-T2","amount":19.99,"status":"SUCCESS"}`,
			`invalid payload: field "amount": want an integer, got 19.99`},
		{"time not RFC 3339", "paydemo",
			`{"orderCode":"ORD-T3","paymentNo":"PAY-T3","amount":1999,"status":"SUCCESS","paidAt":"yesterday"}`,
			`invalid payload: field "paidAt": want a time in RFC 3339 (2026-01-02T15:04:05Z), got "yesterday"`},
		{"status as a number", "paydemo",
			`{"orderCode":"ORD-T4","paymentNo":"PAY-T4","amount":1999,"status":1}`,
			`invalid payload: field "status": want a string, got 1`},
		{"seq as a string", "shipdemo",
			`{"waybillNo":"WB-T1","orderCode":"ORD-T5","seq":"1","status":"PICKED_UP","occurredAt":"` + paid + `"}`,
			`invalid payload: field "seq": want an integer, got a string`},
		{"occurredAt as a number", "shipdemo",
			`{"waybillNo":"WB-T2","orderCode":"ORD-T6","seq":1,"status":"PICKED_UP","occurredAt":1767366245}`,
			`invalid payload: field "occurredAt": want a time in RFC 3339 (2026-01-02T15:04:05Z), got 1767366245`},
	}
	traces := map[string]string{}
	for _, tc := range cases {
		body := []byte(tc.body)
		h := testenv.ShipdemoHeaders(t, cfg, body)
		if tc.source == "paydemo" {
			h = testenv.PaydemoHeaders(t, cfg, "msg_"+strings.ReplaceAll(tc.name, " ", "_"), now, body)
		}
		a := testenv.PostRaw(t, url, tc.source, body, h)
		require.Equal(t, http.StatusBadRequest, a.Status, "%s: %s", tc.name, a.Body)
		var answer struct{ Error string }
		require.NoError(t, json.Unmarshal(a.Body, &answer), tc.name)
		require.Equal(t, tc.want, answer.Error, tc.name)
		traces[tc.want] = a.Header.Get("X-Trace-Id")
	}

	logged := map[string]string{}
	for _, l := range strings.Split(logs.String(), "\n") {
		var line struct {
			Msg, Reason string
			TraceID     string `json:"trace_id"`
		}
		if json.Unmarshal([]byte(l), &line) == nil && line.Msg == "intake: request refused" {
			logged[line.Reason] = line.TraceID
		}
	}
	for reason, trace := range traces {
		require.NotEmpty(t, trace)
		require.Equal(t, trace, logged[reason], "the refusal is logged with the request's trace id:\n%s", logs.String())
	}

	st := testenv.Store(t, cfg)
	var n int64
	require.NoError(t, st.DB.Table("callback_log").Count(&n).Error)
	require.Zero(t, n, "nothing refused is stored")

	// Fields the event does not have are the sender's own: any type.
	body := []byte(`{"orderCode":"ORD-T7","paymentNo":"PAY-T7","amount":1999,"status":"SUCCESS","paidAt":"` + paid + `","note":{"any":[1,"x"]}}`)
	a := testenv.Post(t, url, "paydemo", body, testenv.PaydemoHeaders(t, cfg, "msg_extra", now, body))
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
}
