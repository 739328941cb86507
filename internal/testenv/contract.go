package testenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/stretchr/testify/require"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"

	"callgate/internal/downstream"
)

// contractURL is the location downstream.AsyncAPI is compiled under. It
// only names the document for the schema compiler: nothing is fetched.
const contractURL = "https://callgate.invalid/downstream/asyncapi.yaml"

// Contract validates notification bodies against the downstream contract
// (downstream.AsyncAPI): one JSON Schema per routing key, taken from the
// channel with that address, its message and the message's payload.
type Contract struct {
	schemas map[string]*jsonschema.Schema
}

var (
	contractOnce sync.Once
	contract     *Contract
	contractErr  error
)

// MustContract returns the downstream contract, compiled once per test
// binary; it fails t if the document does not compile.
func MustContract(t testing.TB) *Contract {
	t.Helper()
	contractOnce.Do(func() { contract, contractErr = LoadContract() })
	if contractErr != nil {
		t.Fatalf("downstream contract: %v", contractErr)
	}
	return contract
}

// LoadContract compiles downstream.AsyncAPI.
func LoadContract() (*Contract, error) {
	doc, err := DecodeYAML(downstream.AsyncAPI)
	if err != nil {
		return nil, fmt.Errorf("error reading asyncapi.yaml: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(NoLoader{})
	if err := c.AddResource(contractURL, doc); err != nil {
		return nil, fmt.Errorf("error adding asyncapi.yaml: %w", err)
	}
	channels, ok := lookup(doc, "#/channels").(map[string]any)
	if !ok {
		return nil, errors.New("asyncapi.yaml has no channels")
	}
	ct := &Contract{schemas: map[string]*jsonschema.Schema{}}
	for name := range channels {
		ptr, channel, err := resolve(doc, "#/channels/"+escape(name))
		if err != nil {
			return nil, fmt.Errorf("channel %s: %w", name, err)
		}
		key, ok := channel.(map[string]any)["address"].(string)
		if !ok || key == "" {
			return nil, fmt.Errorf("channel %s has no address (routing key)", name)
		}
		if _, dup := ct.schemas[key]; dup {
			return nil, fmt.Errorf("routing key %s: more than one channel", key)
		}
		messages, _ := channel.(map[string]any)["messages"].(map[string]any)
		if len(messages) != 1 {
			return nil, fmt.Errorf("routing key %s: %d messages, want 1", key, len(messages))
		}
		var payload string
		for id := range messages {
			mptr, _, err := resolve(doc, ptr+"/messages/"+escape(id))
			if err != nil {
				return nil, fmt.Errorf("routing key %s, message %s: %w", key, id, err)
			}
			if payload, err = payloadSchema(doc, mptr+"/payload"); err != nil {
				return nil, fmt.Errorf("routing key %s, message %s: %w", key, id, err)
			}
		}
		sch, err := c.Compile(contractURL + payload)
		if err != nil {
			return nil, fmt.Errorf("routing key %s: error compiling %s: %w", key, payload, err)
		}
		ct.schemas[key] = sch
	}
	return ct, nil
}

// RoutingKeys returns the routing keys of the contract, sorted.
func (c *Contract) RoutingKeys() []string {
	keys := make([]string, 0, len(c.schemas))
	for k := range c.schemas {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Validate reports whether payload is a valid body of a routingKey
// notification.
func (c *Contract) Validate(routingKey string, payload []byte) error {
	sch, ok := c.schemas[routingKey]
	if !ok {
		return fmt.Errorf("%s: routing key not in the downstream contract", routingKey)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("%s: body is not JSON: %w", routingKey, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s: body %s violates the downstream contract: %w", routingKey, payload, err)
	}
	return nil
}

// Check fails t (without stopping it) if payload is not a valid body of a
// routingKey notification.
func (c *Contract) Check(t testing.TB, routingKey string, payload []byte) {
	t.Helper()
	if err := c.Validate(routingKey, payload); err != nil {
		t.Errorf("%v", err)
	}
}

// DecodeYAML decodes a YAML document into the values encoding/json would
// give for the same document as JSON (map[string]any, []any, json.Number,
// string, bool, nil), the form JSON Schema validators take.
func DecodeYAML(data []byte) (any, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	v, err := jsonValue(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// jsonValue turns what yaml.v3 decodes into something json.Marshal takes:
// mappings with keys other than strings become map[string]any.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			je, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			v[k] = je
		}
		return v, nil
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			je, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			m[fmt.Sprint(k)] = je
		}
		return m, nil
	case []any:
		for i, e := range v {
			je, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			v[i] = je
		}
		return v, nil
	case nil, string, bool, int, int64, uint64, float64:
		return v, nil
	default:
		return nil, fmt.Errorf("unsupported YAML value %v (%T)", v, v)
	}
}

// NoLoader is a jsonschema.URLLoader that loads nothing: a schema that
// refers to a document not added to the compiler fails to compile instead
// of being fetched (the meta-schemas of the JSON Schema drafts are built
// into the library and need no loader).
type NoLoader struct{}

// Load refuses url.
func (NoLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("not loading %s: only documents added to the compiler are used", url)
}

// payloadSchema returns the local pointer ("#/...") of the JSON Schema a
// message payload at ptr stands for, following $refs and unwrapping a
// Multi Format Schema Object of a JSON Schema format.
func payloadSchema(doc any, ptr string) (string, error) {
	ptr, node, err := resolve(doc, ptr)
	if err != nil {
		return "", fmt.Errorf("payload: %w", err)
	}
	m, ok := node.(map[string]any)
	if !ok {
		return "", fmt.Errorf("payload at %s is not a schema object", ptr)
	}
	if _, multi := m["schema"]; !multi {
		return ptr, nil
	}
	format, _ := m["schemaFormat"].(string)
	if format != "" && !strings.HasPrefix(format, "application/schema+") && !strings.HasPrefix(format, "application/vnd.aai.asyncapi") {
		return "", fmt.Errorf("payload at %s has schemaFormat %s, not JSON Schema", ptr, format)
	}
	return payloadSchema(doc, ptr+"/schema")
}

// resolve returns the node at the local pointer ptr, following a chain of
// local $refs (a Reference Object), and the pointer it ends at.
func resolve(doc any, ptr string) (string, any, error) {
	for range 32 {
		node := lookup(doc, ptr)
		if node == nil {
			return "", nil, fmt.Errorf("nothing at %s", ptr)
		}
		m, ok := node.(map[string]any)
		if !ok {
			return ptr, node, nil
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return ptr, node, nil
		}
		if !strings.HasPrefix(ref, "#") {
			return "", nil, fmt.Errorf("%s refers to %s, outside the document", ptr, ref)
		}
		ptr = ref
	}
	return "", nil, fmt.Errorf("too many $refs from %s", ptr)
}

// lookup returns the node at the local JSON pointer ptr ("#/a/b"), or nil.
func lookup(doc any, ptr string) any {
	p, ok := strings.CutPrefix(ptr, "#")
	if !ok {
		return nil
	}
	node := doc
	if p == "" {
		return node
	}
	if !strings.HasPrefix(p, "/") {
		return nil
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := node.(type) {
		case map[string]any:
			node, ok = n[tok]
			if !ok {
				return nil
			}
		case []any:
			var i int
			if _, err := fmt.Sscan(tok, &i); err != nil || i < 0 || i >= len(n) {
				return nil
			}
			node = n[i]
		default:
			return nil
		}
	}
	return node
}

// escape makes name one token of a JSON pointer.
func escape(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

// Notifications is what callback logID wrote to the outbox, as
// "routing.key payload" in the order written, each payload checked
// against the downstream contract.
func (st *TestStore) Notifications(t testing.TB, logID int64) []string {
	t.Helper()
	var rows []struct {
		RoutingKey string
		Payload    string
	}
	require.NoError(t, st.DB.Raw(`SELECT routing_key, payload FROM outbox WHERE callback_log_id = ? ORDER BY id`, logID).Scan(&rows).Error)
	out := []string{}
	for _, r := range rows {
		MustContract(t).Check(t, r.RoutingKey, []byte(r.Payload))
		out = append(out, r.RoutingKey+" "+r.Payload)
	}
	return out
}
