// Package intake is the HTTP edge where platforms deliver callbacks:
// POST /callbacks/:source. It reads the body within the source's limit,
// verifies the signature, finds the event id and business key, has the
// callback stored as PENDING and announced, and answers.
//
// It decides the answers a platform sees (200, duplicate, 400, 401, 404, 413,
// 503). Verification itself is internal/signature; the rows, the headers
// kept with them, storing and announcing them are internal/ingest, the
// step it shares with reconciliation; storage is internal/store,
// announcing internal/broker.
package intake

import (
	"fmt"
	"mime"
	"net/netip"
	"text/template"

	"golang.org/x/time/rate"

	"callgate/internal/callback"
	"callgate/internal/ingest"
	"callgate/internal/platform"
	"callgate/internal/signature"
	"callgate/internal/source"
)

// Source is one configured platform, ready to serve.
type Source struct {
	Config source.Config
	// Platform is the preset, nil for a source configured field by field
	// (then Verifier and Extractor read its requests).
	Platform  platform.Platform
	Verifier  signature.Verifier
	Extractor callback.Extractor
	// body renders a custom success body; nil means the default JSON.
	body *template.Template
	// stored lists the request headers kept with the callback
	// (ingest.KeptHeaders).
	stored []string
	// limiter is nil when the source has no rate limit.
	limiter *rate.Limiter
	// allow is empty when any address may call.
	allow []netip.Prefix
	// contentTypes is empty when any content type is accepted.
	contentTypes map[string]bool
}

// NewSource builds a Source from its config.
func NewSource(cfg source.Config) (*Source, error) {
	s := &Source{Config: cfg}
	var headers []string
	if cfg.Preset != "" {
		p, err := platform.New(cfg.Preset, cfg.Platform)
		if err != nil {
			return nil, err
		}
		s.Platform, headers = p, p.Headers()
	} else {
		v, err := signature.New(cfg.Signature.VerifierConfig())
		if err != nil {
			return nil, err
		}
		s.Verifier, headers = v, v.Headers()
		if cfg.EventID.Header != "" {
			headers = append(headers, cfg.EventID.Header)
		}
		s.Extractor = callback.NewExtractor(cfg.EventID.Fields, cfg.EventID.Separator, cfg.BusinessKey, cfg.EventID.IgnoreScheme)
	}
	var err error
	if cfg.Response.Body != "" {
		if s.body, err = template.New(cfg.Name).Option("missingkey=error").Parse(cfg.Response.Body); err != nil {
			return nil, fmt.Errorf("response.body: %w", err)
		}
	}
	if cfg.RateLimit.Rate > 0 {
		s.limiter = rate.NewLimiter(rate.Limit(cfg.RateLimit.Rate), cfg.RateLimit.Burst)
	}
	for _, c := range cfg.AllowIPs {
		p, err := source.ParseCIDR(c)
		if err != nil {
			return nil, fmt.Errorf("allow_ips: %w", err)
		}
		s.allow = append(s.allow, p)
	}
	if len(cfg.ContentTypes) > 0 {
		s.contentTypes = map[string]bool{}
		for _, ct := range cfg.ContentTypes {
			mt, _, _ := mime.ParseMediaType(ct)
			s.contentTypes[mt] = true
		}
	}
	s.stored = ingest.KeptHeaders(headers)
	return s, nil
}

// Disabled is a configured source left out (it answers 404), and why.
type Disabled struct {
	Name   string
	Reason string
}

// NewSources builds every enabled source; cfgs were validated by
// internal/config. disabled lists the sources left out: presets without
// their keys or merchant identity, and, unless demo, the sources whose
// secret is a documented demo value (see source.Config.DisabledReason).
func NewSources(cfgs []source.Config, demo bool) (sources map[string]*Source, disabled []Disabled, err error) {
	sources = make(map[string]*Source, len(cfgs))
	for i, c := range cfgs {
		if reason := c.DisabledReason(demo); reason != "" {
			disabled = append(disabled, Disabled{Name: c.Name, Reason: reason})
			continue
		}
		s, err := NewSource(c)
		if err != nil {
			return nil, nil, fmt.Errorf("sources[%d] (%s): %w", i, c.Name, err)
		}
		sources[c.Name] = s
	}
	return sources, disabled, nil
}

// allowed reports whether the peer address may call this source.
func (s *Source) allowed(remoteAddr string) bool {
	if len(s.allow) == 0 {
		return true
	}
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range s.allow {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// contentTypeOK reports whether the request's media type is accepted.
func (s *Source) contentTypeOK(header string) bool {
	if s.contentTypes == nil {
		return true
	}
	mt, _, err := mime.ParseMediaType(header)
	return err == nil && s.contentTypes[mt]
}
