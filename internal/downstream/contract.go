package downstream

import _ "embed"

// AsyncAPI is the downstream contract: the AsyncAPI 3.0 document
// (asyncapi.yaml) describing the exchange, the routing keys and the JSON
// body of every notification callgate publishes. Subscribers read it, and
// tests validate the messages callgate publishes against it.
//
//go:embed asyncapi.yaml
var AsyncAPI []byte
