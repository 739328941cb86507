package callback

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// decodeBodies are the seeds of the payload differential: payment and
// carrier bodies as the presets and configured sources send them, and the
// ways a body goes wrong (types, case, nulls, nesting, grammar).
var decodeBodies = []string{
	`{"orderCode":"BO000001234","paymentNo":"PAY-1","amount":4200,"status":"SUCCESS","paidAt":"2026-12-07T16:00:00Z","note":"xxxx"}`,
	`{"type":"refund","orderCode":"A-1","refundNo":"R-1","amount":100,"refundedTotal":300,"currency":"CNY","status":"SUCCESS","occurredAt":"2026-12-07T16:00:00.123456Z"}`,
	`{"type":"dispute","orderCode":"A-2","disputeId":"D-1","amount":5,"reason":"fraud","initiatedAt":"2026-12-07T16:00:00+08:00"}`,
	`{"ignored":"test event"}`,
	`{"waybillNo":"SF123","orderCode":"A-3","status":"DELIVERED","occurredAt":"2026-12-07T16:00:00Z","seq":7,"location":"Shenzhen"}`,
	`{"amount":"4200","orderCode":"A"}`,
	`{"amount":42.5}`,
	`{"amount":1e3}`,
	`{"amount":null,"paidAt":null,"refundedTotal":null}`,
	`{"amount":true}`,
	`{"amount":{"value":1}}`,
	`{"paidAt":"yesterday"}`,
	`{"paidAt":12}`,
	`{"refundedTotal":-1}`,
	`{"Amount":1}`,
	`{"ORDERCODE":"a","orderCode":"b"}`,
	`{"orderCode":"a","orderCode":"b"}`,
	`{"orderCode":"\u0041\n\"q\""}`,
	`{"nested":{"deep":[1,2,{"x":null}]},"orderCode":"a"}`,
	`{"amount":99999999999999999999}`,
	`{}`, `[]`, `null`, `"text"`, `12`, `true`, ``, ` `, `{`, `}`, `{"a":}`, `{"a":1,}`, `{'a':1}`,
}

// decodeTails are what may follow a body.
var decodeTails = []string{"", " ", "\n\t ", "}", "]", "x", " {}", "{", ",", " null", "}}", " ]", "\x00", "/*c*/"}

// answer is a decode's whole outcome: the value and the error's text.
type answer struct {
	v   any
	err string
}

func decodeBoth(body []byte, newV func() any) (quick, stream answer) {
	for i, decode := range []func([]byte, any) error{DecodePayload, decodeStream} {
		v := newV()
		err := decode(body, v)
		a := answer{v: reflect.ValueOf(v).Elem().Interface()}
		if err != nil {
			a.err = err.Error()
		}
		if i == 0 {
			quick = a
		} else {
			stream = a
		}
	}
	return quick, stream
}

// decodeTargets are the handlers' event types.
var decodeTargets = map[string]func() any{
	"payment": func() any { return new(PaymentEvent) },
	"carrier": func() any { return new(CarrierEvent) },
}

func checkDecodeSame(t *testing.T, body []byte) {
	t.Helper()
	for name, newV := range decodeTargets {
		quick, stream := decodeBoth(body, newV)
		if !reflect.DeepEqual(quick, stream) {
			t.Fatalf("%s, body %q:\nDecodePayload %+v\ndecodeStream  %+v", name, body, quick, stream)
		}
	}
}

// TestDecodePayloadAnswersAsTheStream: DecodePayload's quick way
// (json.Unmarshal) answers every payload as decodeStream, its reading of
// any payload, does: the same value and the same error, for each seed
// body with each tail, cut short at every byte, and mutated at random
// (fixed seed: the same inputs every run).
func TestDecodePayloadAnswersAsTheStream(t *testing.T) {
	t.Parallel()
	n := 0
	for _, body := range decodeBodies {
		for _, tail := range decodeTails {
			for _, lead := range []string{"", " \n"} {
				checkDecodeSame(t, []byte(lead+body+tail))
				n++
			}
		}
		for cut := range len(body) {
			checkDecodeSame(t, []byte(body[:cut]))
			n++
		}
	}
	rng := rand.New(rand.NewPCG(40, 2))
	alphabet := []string{`"`, `{`, `}`, `[`, `]`, `:`, `,`, ` `, `1`, `-`, `.`, `e`, `null`, `true`, `"amount"`, `"Amount"`, `"paidAt"`, `"2026-12-07T16:00:00Z"`, `\`, `\u00e9`}
	for range 20000 {
		body := []byte(decodeBodies[rng.IntN(len(decodeBodies))])
		for range 1 + rng.IntN(3) {
			at := rng.IntN(len(body) + 1)
			switch rng.IntN(3) {
			case 0: // insert
				body = append(body[:at:at], append([]byte(alphabet[rng.IntN(len(alphabet))]), body[at:]...)...)
			case 1: // delete
				if at < len(body) {
					body = append(body[:at:at], body[at+1:]...)
				}
			default: // replace a byte
				if at < len(body) {
					body[at] = alphabet[rng.IntN(len(alphabet))][0]
				}
			}
		}
		checkDecodeSame(t, body)
		n++
	}
	if n < 20000 {
		t.Fatalf("only %d bodies compared", n)
	}
	t.Logf("%d bodies, each decoded as both types, answered alike", n)
}

// FuzzDecodePayload: the same differential on whatever the fuzzer finds.
func FuzzDecodePayload(f *testing.F) {
	for _, body := range decodeBodies {
		for _, tail := range decodeTails {
			f.Add([]byte(body + tail))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecodeSame(t, body)
	})
}
