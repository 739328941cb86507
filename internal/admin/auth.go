// Package admin is the operator surface of callgate: finding callbacks,
// reading why they failed, and replaying one or many safely, with every
// action in an audit trail. It serves the JSON API under /admin/api/ and
// the web page under /admin/ from the gateway; bulk replays are worked off
// by the worker (ReplayRunner) at a bounded rate.
package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Token is one admin token and the name that goes into the audit trail.
type Token struct {
	Name   string
	digest [sha256.Size]byte
}

// Tokens are the configured admin tokens. Empty means the admin surface is
// off.
type Tokens []Token

// ParseTokens reads "name:secret[,name:secret...]" or a bare secret (named
// "admin").
func ParseTokens(s string) (Tokens, error) {
	var out Tokens
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, secret, ok := strings.Cut(part, ":")
		if !ok {
			name, secret = "admin", part
		}
		if name == "" || secret == "" {
			return nil, fmt.Errorf("admin.token[%d]: want name:secret", i)
		}
		if len(secret) < 12 {
			return nil, fmt.Errorf("admin.token[%d] (%s): secret too short, use at least 12 characters", i, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("admin.token[%d]: duplicate name %q", i, name)
		}
		seen[name] = true
		out = append(out, Token{Name: name, digest: sha256.Sum256([]byte(secret))})
	}
	return out, nil
}

// Enabled reports whether any token is configured.
func (t Tokens) Enabled() bool { return len(t) > 0 }

// ErrBadToken is a missing or wrong token.
var ErrBadToken = errors.New("missing or invalid admin token")

// Authenticate returns the name of the token presented. Every configured
// token is compared, in constant time over equal-length digests, so the
// time taken says nothing about which or how much matched.
func (t Tokens) Authenticate(presented string) (string, error) {
	if presented == "" {
		return "", ErrBadToken
	}
	d := sha256.Sum256([]byte(presented))
	name := ""
	for _, tok := range t {
		if subtle.ConstantTimeCompare(d[:], tok.digest[:]) == 1 {
			name = tok.Name
		}
	}
	if name == "" {
		return "", ErrBadToken
	}
	return name, nil
}

// FailureLimiter slows token guessing down: each client address may fail
// Burst times in a row, then once per Every. Successful logins do not count.
type FailureLimiter struct {
	Every time.Duration
	Burst int
	mu    sync.Mutex
	m     map[string]*rate.Limiter
}

// maxTrackedClients bounds the limiter's memory under a spray of
// addresses; past it the table starts afresh.
const maxTrackedClients = 10000

func (f *FailureLimiter) limiter(client string) *rate.Limiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) > maxTrackedClients {
		f.m = map[string]*rate.Limiter{}
	}
	l := f.m[client]
	if l == nil {
		l = rate.NewLimiter(rate.Every(f.Every), f.Burst)
		f.m[client] = l
	}
	return l
}

// Blocked reports whether client has used up its failures, and how long it
// must wait.
func (f *FailureLimiter) Blocked(client string) (bool, time.Duration) {
	l := f.limiter(client)
	if l.Tokens() >= 1 {
		return false, 0
	}
	r := l.Reserve()
	d := r.Delay()
	r.Cancel()
	return true, d
}

// Fail records a failed attempt by client.
func (f *FailureLimiter) Fail(client string) { f.limiter(client).Allow() }
