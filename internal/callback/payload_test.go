package callback_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
)

// TestDecodePayloadNamesTheWrongField: a field of the wrong type is a
// permanent failure that names the field as sent and the type the event
// wants there, taken from the event's own struct (a time too, whose parse
// errors name no field); of two wrong fields the first in the body.
func TestDecodePayloadNamesTheWrongField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		body string
		want string
	}{
		{`{"orderCode":"O","amount":"19.99"}`, `field "amount": want an integer, got a string`},
		{`{"orderCode":"O","amount":19.99}`, `field "amount": want an integer, got 19.99`},
		{`{"orderCode":"O","amount":1e40}`, `field "amount": want an integer, got 1e40`},
		{`{"orderCode":"O","refundedTotal":true}`, `field "refundedTotal": want an integer, got a boolean`},
		{`{"orderCode":7}`, `field "orderCode": want a string, got 7`},
		{`{"orderCode":{"id":"O"}}`, `field "orderCode": want a string, got an object`},
		{`{"orderCode":"O","paidAt":"2026-01-02"}`, `field "paidAt": want a time in RFC 3339 (2026-01-02T15:04:05Z), got "2026-01-02"`},
		{`{"orderCode":"O","occurredAt":[1]}`, `field "occurredAt": want a time in RFC 3339 (2026-01-02T15:04:05Z), got an array`},
		{`{"status":5,"amount":"x"}`, `field "status": want a string, got 5`},
		{`{"amount":"x","status":5}`, `field "amount": want an integer, got a string`},
	}
	for _, tc := range cases {
		var p callback.PaymentEvent
		err := callback.DecodePayload([]byte(tc.body), &p)
		require.Error(t, err, tc.body)
		require.True(t, callback.IsPermanent(err), tc.body)
		var te *callback.TypeError
		require.True(t, errors.As(err, &te), "%s: %v", tc.body, err)
		if diff := cmp.Diff("invalid payload: "+tc.want, err.Error()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.body, diff)
		}
	}

	var e callback.CarrierEvent
	err := callback.DecodePayload([]byte(`{"waybillNo":"W","seq":"3"}`), &e)
	require.EqualError(t, err, `invalid payload: field "seq": want an integer, got a string`)

	// Not a type error: reported as it was.
	var p callback.PaymentEvent
	err = callback.DecodePayload([]byte(`{"orderCode":"O"} {}`), &p)
	require.EqualError(t, err, "invalid payload: trailing data after the JSON object")
}

// TestDecodePayloadRefusesAClosingBracketAfterTheObject: a stored payload
// followed by a stray '}' or ']' is trailing data like any other, and
// fails permanently (the stream decode's More() stops at a closing
// bracket, and let such a payload through as the object before it).
func TestDecodePayloadRefusesAClosingBracketAfterTheObject(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"orderCode":"O"}}`, `{"orderCode":"O"}]`, `{"orderCode":"O"} ] `, "{\"orderCode\":\"O\"}\n}\n"} {
		var p callback.PaymentEvent
		err := callback.DecodePayload([]byte(body), &p)
		require.EqualError(t, err, "invalid payload: trailing data after the JSON object", "%q", body)
		require.True(t, callback.IsPermanent(err), body)
	}
	// Whitespace after the object is not data.
	var p callback.PaymentEvent
	require.NoError(t, callback.DecodePayload([]byte("{\"orderCode\":\"O\"} \t\r\n"), &p))
	require.Equal(t, "O", p.OrderCode)
}
