// Package admin is the operator surface's API and its authentication:
// the JSON API under /admin/api/ (find callbacks, read one, replay one or
// many, the audit trail, the dashboard's figures), the admin tokens, the
// failed-login limiter and the console's server-side sessions. The HTML
// console is internal/console; replays themselves are internal/replay.
package admin

import (
	"container/list"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"callgate/internal/demo"
)

// Token is one admin token, the name that goes into the audit trail and
// the role it grants.
type Token struct {
	Name   string
	Role   Role
	digest [sha256.Size]byte
}

// maxTokenName bounds a token's name (it is the audit's actor).
const maxTokenName = 64

// Tokens are the configured admin tokens. Empty means the admin surface is
// off.
type Tokens []Token

// ParseTokens reads "name:secret[:role][,name:secret[:role]...]" or a bare
// secret (named "admin"). role is exactly viewer or operator; without a
// third field a token is an operator, as every token was before roles
// existed. A third field that is anything else (Viewer, viewers, " viewer",
// an empty one after a trailing colon, a secret with a colon in it) is an
// error naming the token, never its secret: read as part of the secret it
// would silently grant operator.
func ParseTokens(s string) (Tokens, error) {
	var out Tokens
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, ":")
		name, secret, role := "admin", part, RoleOperator
		switch len(fields) {
		case 1:
		case 2:
			name, secret = fields[0], fields[1]
		case 3:
			name, secret = fields[0], fields[1]
			r, err := ParseRole(fields[2])
			if err != nil {
				return nil, fmt.Errorf("admin.token[%d] (%s): the third field must be exactly viewer or operator (a secret cannot hold a colon)", i, printableName(name))
			}
			role = r
		default:
			return nil, fmt.Errorf("admin.token[%d] (%s): want name:secret[:role], a secret cannot hold a colon", i, printableName(fields[0]))
		}
		if name == "" || secret == "" {
			return nil, fmt.Errorf("admin.token[%d]: want name:secret[:role]", i)
		}
		if len(name) > maxTokenName {
			return nil, fmt.Errorf("admin.token[%d]: name longer than %d characters", i, maxTokenName)
		}
		if why := ssoActorForm(name); why != "" {
			return nil, fmt.Errorf("admin.token[%d] (%s): %s", i, printableName(name), why)
		}
		if len(secret) < 12 {
			return nil, fmt.Errorf("admin.token[%d] (%s): secret too short, use at least 12 characters", i, printableName(name))
		}
		if seen[name] {
			return nil, fmt.Errorf("admin.token[%d]: duplicate name %q", i, name)
		}
		seen[name] = true
		out = append(out, Token{Name: name, Role: role, digest: sha256.Sum256([]byte(secret))})
	}
	return out, nil
}

// ssoActorForm says why name cannot be a token's, or "". A token's name is
// its audit actor, and a single sign-on user's actor is their verified
// e-mail or "sso:<subject>" (identify): a token named in either form
// would share a person's actor, and the audit trail could not tell their
// actions apart. (ParseTokens splits on colons, so no name holds "sso:";
// the check stands for whatever else makes tokens.)
func ssoActorForm(name string) string {
	switch {
	case strings.Contains(name, "@"):
		return `a token's name cannot hold "@": the audit trail names a single sign-on user by their e-mail, and a token so named would pass for one; choose a name without "@"`
	case len(name) >= len("sso:") && strings.EqualFold(name[:len("sso:")], "sso:"):
		return `a token's name cannot begin with "sso:": the audit trail names a single sign-on user without a verified e-mail "sso:<subject>"; choose another name`
	}
	return ""
}

// printableName is a token's name for an error message, cut to the
// length a name may have (a name that long is no name but a pasted
// secret).
func printableName(name string) string {
	switch {
	case name == "":
		return "no name"
	case len(name) > maxTokenName:
		return "a name over " + strconv.Itoa(maxTokenName) + " characters"
	case !tokenNameShape.MatchString(name):
		// Perhaps a piece of a secret that holds a colon: not printed.
		return "a name with characters other than letters, digits and ._@-"
	}
	return name
}

// tokenNameShape is what a token's name printed in an error may look like.
var tokenNameShape = regexp.MustCompile(`^[A-Za-z0-9._@-]+$`)

// Summary lists each token's name and role, for the start-up log (never a
// secret).
func (t Tokens) Summary() string {
	parts := make([]string, len(t))
	for i, tok := range t {
		parts[i] = tok.Name + "=" + string(tok.Role)
	}
	return strings.Join(parts, ",")
}

// AcceptDemo reports whether the demo token logs in: only in demo mode
// (config.Validate refuses its secret otherwise), and only while no admin
// token of the operator's own replaces it. The console's login page then
// shows it.
func (t Tokens) AcceptDemo() bool {
	_, err := t.Authenticate(demo.AdminToken)
	return err == nil
}

// Enabled reports whether any token is configured.
func (t Tokens) Enabled() bool { return len(t) > 0 }

// ErrBadToken is a missing or wrong token.
var ErrBadToken = errors.New("missing or invalid admin token")

// Authenticate returns the identity of the token presented, in any of the
// forms an operator has at hand: the secret alone, or name:secret[:role]
// as it is written in CALLGATE_ADMIN_TOKEN, whose name (and role) must
// then be the secret's (another is refused, not ignored). Every configured
// token is compared, in constant time over equal-length digests, so the
// time taken says nothing about which or how much matched.
func (t Tokens) Authenticate(presented string) (Identity, error) {
	if presented == "" {
		return Identity{}, ErrBadToken
	}
	fields := strings.Split(presented, ":")
	var tok Token
	ok := false
	switch len(fields) {
	case 1:
		tok, ok = t.match(presented)
	case 2:
		tok, ok = t.match(fields[1])
		ok = ok && tok.Name == fields[0]
	case 3:
		tok, ok = t.match(fields[1])
		ok = ok && tok.Name == fields[0] && string(tok.Role) == fields[2]
	}
	if ok {
		return tok.identity(), nil
	}
	return Identity{}, ErrBadToken
}

// identity is who presents the token.
func (tok Token) identity() Identity {
	return Identity{Kind: KindToken, Actor: tok.Name, Role: tok.Role}
}

// match returns the token whose secret is presented.
func (t Tokens) match(presented string) (Token, bool) {
	d := sha256.Sum256([]byte(presented))
	var found Token
	ok := false
	for _, tok := range t {
		if subtle.ConstantTimeCompare(d[:], tok.digest[:]) == 1 {
			found, ok = tok, true
		}
	}
	return found, ok
}

// named returns the token configured under name.
func (t Tokens) named(name string) (Token, bool) {
	for _, tok := range t {
		if tok.Name == name {
			return tok, true
		}
	}
	return Token{}, false
}

// sessionMAC binds a page session to the token that opened it: an HMAC
// keyed by the session id over the digest of the token now configured
// under name. A session whose token was rotated or removed no longer
// matches; without the session id the stored value says nothing about the
// token.
func (t Tokens) sessionMAC(name string, id SessionID) ([]byte, bool) {
	tok, ok := t.named(name)
	if !ok {
		return nil, false
	}
	m := hmac.New(sha256.New, id[:])
	m.Write(tok.digest[:])
	return m.Sum(nil), true
}

// FailureLimiter slows token guessing down: each client address may fail
// Burst times in a row, then once per Every; past that its failures are
// answered 429. Successful logins do not count, and are never refused: the
// limiter is consulted only once a token or session has failed, so ten bad
// tokens from one address (behind a proxy: from everybody) cannot lock the
// valid ones out during an incident. What stops guessing is the tokens'
// length (at least 12 characters; use 32 random ones).
// It remembers at most MaxClients addresses; past that it forgets the one
// seen least recently, so a spray of fresh addresses cannot wipe the record
// of a client that is still guessing (resetting the whole table would hand
// every blocked client a fresh burst).
type FailureLimiter struct {
	Every time.Duration
	Burst int
	// MaxClients bounds the addresses tracked, and so the memory a spray
	// of addresses can take. Default FailureMaxClientsDefault.
	MaxClients int

	mu  sync.Mutex
	m   map[string]*list.Element // values are *trackedClient
	lru *list.List               // front: seen most recently
}

// FailureMaxClientsDefault is FailureLimiter.MaxClients when unset.
const FailureMaxClientsDefault = 10000

type trackedClient struct {
	addr string
	l    *rate.Limiter
}

// limiter returns client's limiter, creating it if needed, and marks the
// client as seen now.
func (f *FailureLimiter) limiter(client string) *rate.Limiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*list.Element{}
		f.lru = list.New()
	}
	if el := f.m[client]; el != nil {
		f.lru.MoveToFront(el)
		return el.Value.(*trackedClient).l
	}
	tc := &trackedClient{addr: client, l: rate.NewLimiter(rate.Every(f.Every), f.Burst)}
	f.m[client] = f.lru.PushFront(tc)
	limit := f.MaxClients
	if limit <= 0 {
		limit = FailureMaxClientsDefault
	}
	for f.lru.Len() > limit {
		oldest := f.lru.Back()
		f.lru.Remove(oldest)
		delete(f.m, oldest.Value.(*trackedClient).addr)
	}
	return tc.l
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

// Take spends one of client's turns if it has one, or reports how long
// until it has: the same bounded table, for what is counted before it is
// done rather than after it failed (single sign-on's starts and token
// endpoint calls per address).
func (f *FailureLimiter) Take(client string) (bool, time.Duration) {
	r := f.limiter(client).Reserve()
	if !r.OK() {
		return false, f.Every // Burst 0: never a turn
	}
	if d := r.Delay(); d > 0 {
		r.Cancel()
		return false, d
	}
	return true, 0
}
