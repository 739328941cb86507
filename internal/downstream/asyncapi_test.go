package downstream_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"callgate/internal/downstream"
	"callgate/internal/testenv"
)

// routingKeys is the public contract: the routing keys callgate publishes.
var routingKeys = []string{
	"order.closed",
	"order.delivered",
	"order.dispute",
	"order.refund_failed",
	"order.refunded",
	"payment.exception",
	"points.add",
	"points.deduct",
	"shipment.updated",
	"warehouse.cancel",
	"warehouse.ship",
}

// asyncAPIDoc is downstream.AsyncAPI decoded as JSON values.
func asyncAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	doc, err := testenv.DecodeYAML(downstream.AsyncAPI)
	require.NoError(t, err)
	m, ok := doc.(map[string]any)
	require.True(t, ok, "asyncapi.yaml is not a mapping")
	return m
}

// obj is the mapping at doc's local pointer ptr, following $refs.
func obj(t *testing.T, doc map[string]any, ptr string) map[string]any {
	t.Helper()
	for range 10 {
		node := at(t, doc, ptr)
		m, ok := node.(map[string]any)
		require.True(t, ok, "%s is not a mapping", ptr)
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		ptr = ref
	}
	t.Fatalf("too many $refs from %s", ptr)
	return nil
}

// deref is node, a mapping, or what its $ref points at.
func deref(t *testing.T, doc map[string]any, node any) map[string]any {
	t.Helper()
	m, ok := node.(map[string]any)
	require.True(t, ok, "%v is not a mapping", node)
	if ref, ok := m["$ref"].(string); ok {
		return obj(t, doc, ref)
	}
	return m
}

// at is the node at doc's local pointer ptr (no $ref followed).
func at(t *testing.T, doc map[string]any, ptr string) any {
	t.Helper()
	p, ok := strings.CutPrefix(ptr, "#/")
	require.True(t, ok, "%s is not a local pointer", ptr)
	node := any(doc)
	for _, tok := range strings.Split(p, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := node.(map[string]any)
		require.True(t, ok, "%s: %q is inside a non-mapping", ptr, tok)
		node, ok = m[tok]
		require.True(t, ok, "%s: nothing at %q", ptr, tok)
	}
	return node
}

func TestAsyncAPIDocumentIsValid(t *testing.T) {
	raw, err := os.ReadFile("testdata/asyncapi-3.0.0.schema.json")
	require.NoError(t, err)
	meta, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(testenv.NoLoader{}) // offline: draft-07 itself is built in
	c.AssertFormat()
	const loc = "https://callgate.invalid/asyncapi-3.0.0.schema.json"
	require.NoError(t, c.AddResource(loc, meta))
	sch, err := c.Compile(loc)
	require.NoError(t, err)

	doc := asyncAPIDoc(t)
	require.Equal(t, "3.0.0", doc["asyncapi"])
	require.NoError(t, sch.Validate(any(doc)))

	// The schema catches what it should (so the pass above means something).
	bad := asyncAPIDoc(t)
	obj(t, bad, "#/components/channelBindings/downstreamExchange/amqp")["exchange"].(map[string]any)["type"] = "tpoic"
	require.Error(t, sch.Validate(any(bad)))
}

// TestAsyncAPIStructure checks what the AsyncAPI JSON Schema cannot: the
// references resolve and agree, and every channel describes the exchange.
func TestAsyncAPIStructure(t *testing.T) {
	doc := asyncAPIDoc(t)
	require.Equal(t, "callgate downstream notifications", obj(t, doc, "#/info")["title"])
	require.Equal(t, "1.1.0", obj(t, doc, "#/info")["version"])
	server := obj(t, doc, "#/servers/rabbitmq")
	require.Equal(t, "amqp", server["protocol"])
	require.Equal(t, "0-9-1", server["protocolVersion"])

	// Every $ref is local and points at something.
	var walk func(ptr string, node any)
	walk = func(ptr string, node any) {
		switch n := node.(type) {
		case map[string]any:
			if ref, ok := n["$ref"].(string); ok {
				require.True(t, strings.HasPrefix(ref, "#/"), "%s: $ref %s is not local", ptr, ref)
				at(t, doc, ref)
			}
			for k, v := range n {
				walk(ptr+"/"+k, v)
			}
		case []any:
			for _, v := range n {
				walk(ptr+"/[]", v)
			}
		}
	}
	walk("#", doc)

	channels := obj(t, doc, "#/channels")
	var addresses []string
	for name := range channels {
		ptr := "#/channels/" + name
		ch := obj(t, doc, ptr)
		key, _ := ch["address"].(string)
		addresses = append(addresses, key)

		amqp := obj(t, doc, ptr+"/bindings")["amqp"].(map[string]any)
		require.Equal(t, "routingKey", amqp["is"], key)
		require.Equal(t, map[string]any{
			"name": "callgate.downstream", "type": "topic", "durable": true, "autoDelete": false, "vhost": "/",
		}, amqp["exchange"], key)

		messages := ch["messages"].(map[string]any)
		require.Len(t, messages, 1, key)
		for id := range messages {
			msg := obj(t, doc, ptr+"/messages/"+id)
			require.Equal(t, key, msg["name"], key)
			require.NotEmpty(t, msg["title"], key)
			require.Equal(t, "application/json", msg["contentType"], key)
			mb := deref(t, doc, msg["bindings"])["amqp"].(map[string]any)
			require.Equal(t, key, mb["messageType"], key)
			require.Equal(t, json.Number("2"), mb["x-deliveryMode"], key)
			require.NotEmpty(t, msg["examples"], key)
		}
	}
	slices.Sort(addresses)
	require.Equal(t, routingKeys, addresses)

	// One send operation per channel, with that channel's message.
	operations := obj(t, doc, "#/operations")
	require.Len(t, operations, len(channels))
	seen := map[string]bool{}
	for name := range operations {
		op := obj(t, doc, "#/operations/"+name)
		require.Equal(t, "send", op["action"], name)
		chRef := op["channel"].(map[string]any)["$ref"].(string)
		require.False(t, seen[chRef], "%s: second operation on %s", name, chRef)
		seen[chRef] = true
		msgs := op["messages"].([]any)
		require.Len(t, msgs, 1, name)
		require.True(t, strings.HasPrefix(msgs[0].(map[string]any)["$ref"].(string), chRef+"/messages/"),
			"%s: its message is not one of %s's", name, chRef)
		ob := obj(t, doc, "#/operations/"+name+"/bindings")["amqp"].(map[string]any)
		require.Equal(t, json.Number("2"), ob["deliveryMode"], name)
		require.Equal(t, true, ob["mandatory"], name)
	}
}

// TestAsyncAPISchemasDescribed checks every payload schema and property
// has a one-line description, and every property listed is required unless
// the contract says otherwise.
func TestAsyncAPISchemasDescribed(t *testing.T) {
	doc := asyncAPIDoc(t)
	optional := map[string]bool{"ShipmentUpdated.orderCode": true, "Headers.traceparent": true,
		// Only when the exception is about a refund or a dispute.
		"PaymentException.refundNo": true, "PaymentException.disputeId": true}
	for name, s := range obj(t, doc, "#/components/schemas") {
		s := s.(map[string]any)
		desc, _ := s["description"].(string)
		require.NotEmpty(t, desc, name)
		require.NotContains(t, strings.TrimSpace(desc), "\n", name)
		var required []string
		for _, r := range asSlice(s["required"]) {
			required = append(required, r.(string))
		}
		for prop, p := range s["properties"].(map[string]any) {
			p := p.(map[string]any)
			desc, _ := p["description"].(string)
			require.NotEmpty(t, desc, "%s.%s", name, prop)
			require.NotContains(t, strings.TrimSpace(desc), "\n", "%s.%s", name, prop)
			require.Equal(t, !optional[name+"."+prop], slices.Contains(required, prop), "%s.%s required", name, prop)
			if ed, ok := p["x-enumDescriptions"].(map[string]any); ok {
				var kinds, described []string
				for _, e := range asSlice(p["enum"]) {
					kinds = append(kinds, e.(string))
				}
				for k := range ed {
					described = append(described, k)
				}
				require.ElementsMatch(t, kinds, described, "%s.%s", name, prop)
			}
		}
		if name != "Headers" {
			require.Equal(t, false, s["additionalProperties"], name)
		}
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func TestAsyncAPIExamplesValidate(t *testing.T) {
	doc := asyncAPIDoc(t)
	ct := testenv.MustContract(t)
	n := 0
	for name := range obj(t, doc, "#/channels") {
		ptr := "#/channels/" + name
		key := obj(t, doc, ptr)["address"].(string)
		for id := range obj(t, doc, ptr)["messages"].(map[string]any) {
			for _, ex := range asSlice(obj(t, doc, ptr+"/messages/"+id)["examples"]) {
				body, err := json.Marshal(ex.(map[string]any)["payload"])
				require.NoError(t, err)
				require.NoError(t, ct.Validate(key, body), "example %v", ex.(map[string]any)["name"])
				n++
			}
		}
	}
	require.GreaterOrEqual(t, n, len(routingKeys))
}

func TestContractRoutingKeys(t *testing.T) {
	require.Equal(t, routingKeys, testenv.MustContract(t).RoutingKeys())
}

func TestContractValidate(t *testing.T) {
	type tc struct {
		key, name, body string
		ok              bool
	}
	cases := []tc{
		{"warehouse.ship", "valid", `{"orderCode":"SO-1"}`, true},
		{"warehouse.ship", "missing orderCode", `{}`, false},
		{"warehouse.ship", "empty orderCode", `{"orderCode":""}`, false},
		{"warehouse.ship", "orderCode too long", `{"orderCode":"` + strings.Repeat("x", 192) + `"}`, false},
		{"warehouse.ship", "orderCode at max length", `{"orderCode":"` + strings.Repeat("x", 191) + `"}`, true},
		{"warehouse.ship", "extra field", `{"orderCode":"SO-1","userId":1}`, false},
		{"warehouse.ship", "not an object", `["SO-1"]`, false},

		{"points.add", "valid", `{"orderCode":"SO-1","userId":7,"amount":1999,"currency":"CNY"}`, true},
		{"points.add", "zero amount", `{"orderCode":"SO-1","userId":7,"amount":0,"currency":"JPY"}`, true},
		{"points.add", "missing userId", `{"orderCode":"SO-1","amount":1999,"currency":"CNY"}`, false},
		{"points.add", "lower-case currency", `{"orderCode":"SO-1","userId":7,"amount":1999,"currency":"cny"}`, false},
		{"points.add", "negative amount", `{"orderCode":"SO-1","userId":7,"amount":-1,"currency":"CNY"}`, false},
		{"points.add", "string amount", `{"orderCode":"SO-1","userId":7,"amount":"1999","currency":"CNY"}`, false},
		{"points.add", "fractional amount", `{"orderCode":"SO-1","userId":7,"amount":19.99,"currency":"CNY"}`, false},
		{"points.add", "string userId", `{"orderCode":"SO-1","userId":"7","amount":1999,"currency":"CNY"}`, false},
		{"points.add", "four-letter currency", `{"orderCode":"SO-1","userId":7,"amount":1999,"currency":"CNYY"}`, false},
		{"points.add", "extra field", `{"orderCode":"SO-1","userId":7,"amount":1999,"currency":"CNY","points":19}`, false},

		{"shipment.updated", "valid", `{"waybillNo":"SF1","orderCode":"SO-1","seq":3,"status":"DELIVERED"}`, true},
		{"shipment.updated", "valid without orderCode", `{"waybillNo":"SF1","seq":1,"status":"PICKED_UP"}`, true},
		{"shipment.updated", "status outside enum", `{"waybillNo":"SF1","seq":1,"status":"LOST"}`, false},
		{"shipment.updated", "lower-case status", `{"waybillNo":"SF1","seq":1,"status":"in_transit"}`, false},
		{"shipment.updated", "missing seq", `{"waybillNo":"SF1","status":"IN_TRANSIT"}`, false},
		{"shipment.updated", "string seq", `{"waybillNo":"SF1","seq":"1","status":"IN_TRANSIT"}`, false},
		{"shipment.updated", "waybillNo too long", `{"waybillNo":"` + strings.Repeat("9", 65) + `","seq":1,"status":"IN_TRANSIT"}`, false},
		{"shipment.updated", "extra field", `{"waybillNo":"SF1","seq":1,"status":"IN_TRANSIT","location":"Shenzhen"}`, false},

		{"order.delivered", "valid", `{"orderCode":"SO-1","waybillNo":"SF1"}`, true},
		{"order.delivered", "missing waybillNo", `{"orderCode":"SO-1"}`, false},
		{"order.delivered", "extra field", `{"orderCode":"SO-1","waybillNo":"SF1","seq":4}`, false},

		{"order.refunded", "valid", `{"orderCode":"SO-1","refundNo":"RF-1","amount":500,"currency":"CNY","refundedTotal":500,"full":false}`, true},
		{"order.refunded", "valid running total", `{"orderCode":"SO-1","refundNo":"total:1999","amount":1499,"currency":"CNY","refundedTotal":1999,"full":true}`, true},
		{"order.refunded", "missing full", `{"orderCode":"SO-1","refundNo":"RF-1","amount":500,"currency":"CNY","refundedTotal":500}`, false},
		{"order.refunded", "string full", `{"orderCode":"SO-1","refundNo":"RF-1","amount":500,"currency":"CNY","refundedTotal":500,"full":"false"}`, false},
		{"order.refunded", "empty refundNo", `{"orderCode":"SO-1","refundNo":"","amount":500,"currency":"CNY","refundedTotal":500,"full":false}`, false},
		{"order.refunded", "negative refundedTotal", `{"orderCode":"SO-1","refundNo":"RF-1","amount":500,"currency":"CNY","refundedTotal":-500,"full":false}`, false},
		{"order.refunded", "lower-case currency", `{"orderCode":"SO-1","refundNo":"RF-1","amount":500,"currency":"Cny","refundedTotal":500,"full":false}`, false},

		{"points.deduct", "valid", `{"orderCode":"SO-1","userId":7,"amount":125,"currency":"KWD"}`, true},
		{"points.deduct", "negative amount", `{"orderCode":"SO-1","userId":7,"amount":-125,"currency":"KWD"}`, false},
		{"points.deduct", "missing currency", `{"orderCode":"SO-1","userId":7,"amount":125}`, false},

		{"warehouse.cancel", "valid", `{"orderCode":"SO-1"}`, true},
		{"warehouse.cancel", "extra field", `{"orderCode":"SO-1","reason":"refunded"}`, false},
		{"warehouse.cancel", "number orderCode", `{"orderCode":1}`, false},

		{"order.refund_failed", "valid", `{"orderCode":"SO-1","refundNo":"RF-1","amount":500,"currency":"CNY","reason":"card expired","uncounted":500,"refundedTotal":0}`, true},
		{"order.refund_failed", "empty reason", `{"orderCode":"SO-1","refundNo":"RF-1","amount":500,"currency":"CNY","reason":"","uncounted":0,"refundedTotal":0}`, true},
		{"order.refund_failed", "missing reason", `{"orderCode":"SO-1","refundNo":"RF-1","amount":500,"currency":"CNY"}`, false},
		{"order.refund_failed", "null reason", `{"orderCode":"SO-1","refundNo":"RF-1","amount":500,"currency":"CNY","reason":null}`, false},

		{"order.closed", "valid", `{"orderCode":"SO-1","reason":"timeout","paymentStatus":"CLOSED","refundedTotal":0}`, true},
		{"order.closed", "empty reason", `{"orderCode":"SO-1","reason":"","paymentStatus":"PAID","refundedTotal":0}`, true},
		{"order.closed", "missing reason", `{"orderCode":"SO-1"}`, false},
		{"order.closed", "extra field", `{"orderCode":"SO-1","reason":"","closedAt":"2024-05-01T00:00:00Z"}`, false},

		{"order.dispute", "valid open", `{"orderCode":"SO-1","disputeId":"dp_1","status":"OPEN","amount":1999,"currency":"CNY"}`, true},
		{"order.dispute", "valid won", `{"orderCode":"SO-1","disputeId":"dp_1","status":"WON","amount":1999,"currency":"CNY"}`, true},
		{"order.dispute", "valid lost", `{"orderCode":"SO-1","disputeId":"dp_1","status":"LOST","amount":1999,"currency":"CNY"}`, true},
		{"order.dispute", "status outside enum", `{"orderCode":"SO-1","disputeId":"dp_1","status":"CLOSED","amount":1999,"currency":"CNY"}`, false},
		{"order.dispute", "empty disputeId", `{"orderCode":"SO-1","disputeId":"","status":"OPEN","amount":1999,"currency":"CNY"}`, false},
		{"order.dispute", "string amount", `{"orderCode":"SO-1","disputeId":"dp_1","status":"OPEN","amount":"19.99","currency":"CNY"}`, false},

		{"payment.exception", "valid", `{"orderCode":"SO-1","paymentNo":"PAY-2","kind":"paid_by_another","amount":1999,"currency":"CNY"}`, true},
		{"payment.exception", "kind outside enum", `{"orderCode":"SO-1","paymentNo":"PAY-2","kind":"duplicate","amount":1999,"currency":"CNY"}`, false},
		{"payment.exception", "missing kind", `{"orderCode":"SO-1","paymentNo":"PAY-2","amount":1999,"currency":"CNY"}`, false},
		{"payment.exception", "missing paymentNo", `{"orderCode":"SO-1","kind":"over_refund","amount":1,"currency":"CNY"}`, false},
		{"payment.exception", "lower-case currency", `{"orderCode":"SO-1","paymentNo":"PAY-2","kind":"currency_mismatch","amount":1999,"currency":"usd"}`, false},
		{"payment.exception", "extra field", `{"orderCode":"SO-1","paymentNo":"PAY-2","kind":"amount_mismatch","amount":1999,"currency":"CNY","expected":2999}`, false},
	}
	for _, kind := range []string{"paid_by_another", "amount_mismatch", "currency_mismatch", "over_refund", "reversal_of_paying_payment", "paid_after_close"} {
		cases = append(cases, tc{"payment.exception", "kind " + kind,
			`{"orderCode":"SO-1","paymentNo":"PAY-2","kind":"` + kind + `","amount":1999,"currency":"CNY"}`, true})
	}
	for _, status := range []string{"PICKED_UP", "IN_TRANSIT", "OUT_FOR_DELIVERY", "DELIVERED", "EXCEPTION"} {
		cases = append(cases, tc{"shipment.updated", "status " + status,
			`{"waybillNo":"SF1","seq":1,"status":"` + status + `"}`, true})
	}

	ct := testenv.MustContract(t)
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.key] = true
		t.Run(c.key+"/"+c.name, func(t *testing.T) {
			err := ct.Validate(c.key, []byte(c.body))
			if c.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), c.key)
		})
	}
	for _, key := range routingKeys {
		require.True(t, covered[key], "no case for %s", key)
	}
}

func TestContractValidateErrors(t *testing.T) {
	ct := testenv.MustContract(t)

	err := ct.Validate("warehouse.shipped", []byte(`{"orderCode":"SO-1"}`))
	require.ErrorContains(t, err, "warehouse.shipped")
	require.ErrorContains(t, err, "not in the downstream contract")

	err = ct.Validate("warehouse.ship", []byte(`{"orderCode":`))
	require.ErrorContains(t, err, "warehouse.ship")
	require.ErrorContains(t, err, "not JSON")

	err = ct.Validate("warehouse.ship", []byte(`{"orderCode":"SO-1"} {}`))
	require.ErrorContains(t, err, "not JSON")

	// The library's message says what is wrong.
	err = ct.Validate("points.add", []byte(`{"orderCode":"SO-1","userId":7,"amount":1999,"currency":"cny"}`))
	require.ErrorContains(t, err, "points.add")
	require.ErrorContains(t, err, "currency")

	// Check reports through t.Errorf.
	rec := &recorder{TB: t}
	ct.Check(rec, "warehouse.ship", []byte(`{}`))
	ct.Check(rec, "warehouse.ship", []byte(`{"orderCode":"SO-1"}`))
	require.Len(t, rec.errors, 1)
	require.Contains(t, rec.errors[0], "warehouse.ship")
}

// recorder is a testing.TB that collects Errorf calls.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, strings.TrimSpace(fmt.Sprintf(format, args...)))
}
