package admin

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// ssoProvider is what discovery found.
type ssoProvider struct {
	verifier   *oidc.IDTokenVerifier
	oauth      oauth2.Config
	endSession string
}

// Run reads the flow cookie's key, then discovers the provider, each
// retried with backoff while the database or the provider cannot be
// reached (a warning each time, never a crash), until both succeeded or
// ctx ends.
func (s *SSO) Run(ctx context.Context) {
	wait := time.Second
	for {
		err := s.LoadFlowKey(ctx)
		if err == nil {
			break
		}
		s.log.WarnContext(ctx, "admin: single sign-on's flow cookie key not read yet, retrying (sign-ins answer 503 meanwhile)",
			"retry_in", wait.String(), "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, ssoKeyRetryMax)
	}
	wait = time.Second
	for {
		_, err := s.discover(ctx, true)
		if err == nil {
			return
		}
		s.log.WarnContext(ctx, "admin: single sign-on provider not reachable yet, retrying",
			"issuer", s.cfg.Issuer, "retry_in", wait.String(), "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// ErrSSOUnavailable is a provider that cannot be reached or discovered.
var ErrSSOUnavailable = errors.New("the single sign-on provider cannot be reached")

// discover returns the provider, discovering it now if that has not
// succeeded yet (at most once per ssoRediscoverEvery unless force).
func (s *SSO) discover(ctx context.Context, force bool) (*ssoProvider, error) {
	if p, known, err := s.known(force); known {
		return p, err
	}
	s.tryMutex.Lock()
	defer s.tryMutex.Unlock()
	// Those who waited for the attempt just made share its outcome.
	if p, known, err := s.known(force); known {
		return p, err
	}
	found, err := s.discoverNow(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastTry = time.Now()
	if err != nil {
		s.lastErr = fmt.Errorf("%w (%s): %w", ErrSSOUnavailable, s.cfg.Issuer, err)
		return nil, s.lastErr
	}
	s.found, s.lastErr = found, nil
	s.log.InfoContext(ctx, "admin: single sign-on provider discovered", "issuer", s.cfg.Issuer, "end_session", found.endSession != "")
	return found, nil
}

// known is the provider found, or a failure recent enough to share
// (unless force); known is false when an attempt is due.
func (s *SSO) known(force bool) (p *ssoProvider, known bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.found != nil {
		return s.found, true, nil
	}
	if !force && time.Since(s.lastTry) < ssoRediscoverEvery && s.lastErr != nil {
		return nil, true, s.lastErr
	}
	return nil, false, nil
}

func (s *SSO) discoverNow(ctx context.Context) (*ssoProvider, error) {
	// Not the request's cancellation: one client going away must not
	// fail discovery for everybody waiting on it.
	ctx, cancel := context.WithTimeout(oidc.ClientContext(context.WithoutCancel(ctx), s.client), ssoHTTPTimeout)
	defer cancel()
	p, err := oidc.NewProvider(ctx, s.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&extra); err != nil {
		return nil, fmt.Errorf("reading the discovery document: %w", err)
	}
	if extra.EndSession != "" {
		if u, err := url.Parse(extra.EndSession); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("end_session_endpoint %q is not an http(s) URL", extra.EndSession)
		}
	}
	return &ssoProvider{
		verifier: p.Verifier(&oidc.Config{ClientID: s.cfg.ClientID}),
		oauth: oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: p.Endpoint(),
			RedirectURL: s.cfg.RedirectURL, Scopes: s.cfg.Scopes},
		endSession: extra.EndSession,
	}, nil
}
