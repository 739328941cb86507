// Package intake is the HTTP edge where platforms deliver callbacks:
// POST /callbacks/:source. It reads the body within the source's limit,
// verifies the signature, finds the event id and business key, stores the
// callback as PENDING, answers, and hands the log id to the announcer.
//
// It decides the answers a platform sees (200, duplicate, 400, 401, 404, 413,
// 503). Verification itself is internal/signature, storage internal/store,
// announcing internal/broker.
package intake

import (
	"fmt"
	"net/http"
	"text/template"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/signature"
)

// Source is one configured platform, ready to serve.
type Source struct {
	Config    config.Source
	Verifier  signature.Verifier
	Extractor callback.Extractor
	// body renders a custom success body; nil means the default JSON.
	body *template.Template
	// stored lists the request headers kept with the callback.
	stored []string
}

// commonStoredHeaders are kept with every callback, besides the signature
// scheme's own headers.
var commonStoredHeaders = []string{"Content-Type", "User-Agent", "Traceparent", "Tracestate", "X-Request-Id", "X-Forwarded-For"}

// NewSource builds a Source from its config.
func NewSource(cfg config.Source) (*Source, error) {
	v, err := signature.New(cfg.Signature.VerifierConfig())
	if err != nil {
		return nil, err
	}
	s := &Source{
		Config:    cfg,
		Verifier:  v,
		Extractor: callback.NewExtractor(cfg.EventID.Fields, cfg.EventID.Separator, cfg.BusinessKey, cfg.EventID.IgnoreScheme),
	}
	if cfg.Response.Body != "" {
		if s.body, err = template.New(cfg.Name).Option("missingkey=error").Parse(cfg.Response.Body); err != nil {
			return nil, fmt.Errorf("response.body: %w", err)
		}
	}
	seen := map[string]bool{}
	for _, h := range append(append([]string{}, commonStoredHeaders...), v.Headers()...) {
		h = http.CanonicalHeaderKey(h)
		if !seen[h] {
			seen[h] = true
			s.stored = append(s.stored, h)
		}
	}
	return s, nil
}

// NewSources builds every source; cfgs were validated by internal/config.
func NewSources(cfgs []config.Source) (map[string]*Source, error) {
	out := make(map[string]*Source, len(cfgs))
	for i, c := range cfgs {
		s, err := NewSource(c)
		if err != nil {
			return nil, fmt.Errorf("sources[%d]: %w", i, err)
		}
		out[c.Name] = s
	}
	return out, nil
}
