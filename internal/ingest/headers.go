package ingest

import (
	"encoding/json"
	"net/http"
)

// commonHeaders are kept with every callback, besides its signature
// scheme's or preset's own headers: what a person reading the row, or a
// trace, wants of where it came from.
var commonHeaders = []string{"Content-Type", "User-Agent", "Traceparent", "Tracestate", "X-Request-Id", "X-Forwarded-For"}

// KeptHeaders names the headers kept with a source's callbacks: the common
// ones and own (the scheme's or the preset's: the signature, the event id
// header), canonical, each once. The same names serve a notification's
// request and a reconciliation answer.
func KeptHeaders(own []string) []string {
	seen := map[string]bool{}
	kept := make([]string, 0, len(commonHeaders)+len(own))
	for _, h := range append(append([]string{}, commonHeaders...), own...) {
		h = http.CanonicalHeaderKey(h)
		if !seen[h] {
			seen[h] = true
			kept = append(kept, h)
		}
	}
	return kept
}

// StoredHeaders is the headers names of h (KeptHeaders) as stored with a
// callback: a JSON object, a header given more than once joined with ", ".
func StoredHeaders(h http.Header, names []string) json.RawMessage {
	m := make(map[string]string, len(names))
	for _, n := range names {
		if v := h.Values(n); len(v) > 0 {
			m[n] = v[0]
			for _, more := range v[1:] {
				m[n] += ", " + more
			}
		}
	}
	b, _ := json.Marshal(m)
	return b
}
