package admin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"callgate/internal/store"
)

// Page sessions live in admin_session. The browser's cookie holds only a
// random session id; the table holds its SHA-256, the actor, the expiry and
// a MAC binding the session to the token that opened it. So the cookie is
// worth nothing once its row is gone (logout, expiry, token rotation), and
// a copy of the table does not let anyone log in. Times are Go's UTC clock
// throughout (the store forces loc=UTC).

const (
	// SessionIDBytes of randomness make a session id unguessable.
	SessionIDBytes = 32
	// sessionPurgeBatch bounds the expired rows one login deletes: each
	// login adds one row and removes up to this many dead ones, so the
	// table stays small without a job of its own.
	sessionPurgeBatch = 100
)

// SessionMaxAge is how long a session opened with a token lives.
const SessionMaxAge = 8 * time.Hour

// ErrNoSession is a session cookie that names no live session: malformed,
// unknown, logged out, expired, or opened with a token since rotated.
var ErrNoSession = errors.New("no such admin session")

// SessionID is a session's secret, as random bytes.
type SessionID [SessionIDBytes]byte

// sessionEncoding is strict so that one id has exactly one cookie value.
var sessionEncoding = base64.RawURLEncoding.Strict()

func newSessionID() (SessionID, error) {
	var id SessionID
	if _, err := rand.Read(id[:]); err != nil {
		return id, fmt.Errorf("error generating a session id: %w", err)
	}
	return id, nil
}

// ParseSessionID reads a cookie value; anything but base64url of 32 bytes
// is refused without asking the database.
func ParseSessionID(v string) (SessionID, bool) {
	var id SessionID
	if sessionEncoding.EncodedLen(SessionIDBytes) != len(v) {
		return id, false
	}
	n, err := sessionEncoding.Decode(id[:], []byte(v))
	return id, err == nil && n == SessionIDBytes
}

// String is the cookie value.
func (id SessionID) String() string { return sessionEncoding.EncodeToString(id[:]) }

// hash is the row's key: the database never sees the id itself.
func (id SessionID) hash() []byte {
	h := sha256.Sum256(id[:])
	return h[:]
}

// CSRF is the session's CSRF value: an HMAC keyed by the session id, so it
// cannot be computed without the cookie, changes with every login and says
// nothing about the admin token.
func (id SessionID) CSRF() string {
	m := hmac.New(sha256.New, id[:])
	m.Write([]byte("callgate-csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// Session is a live console session and who opened it.
type Session struct {
	ID SessionID
	Identity
	// IDToken is the ID token a single sign-on session was opened with
	// (the provider's logout takes it as id_token_hint).
	IDToken string
}

// SessionLifetime is how long a session opened by id lives: a token's
// SessionMaxAge, a single sign-on user's admin.oidc.max_session.
func (h *Handler) SessionLifetime(id Identity) time.Duration {
	if id.SSO() && h.SSO != nil {
		return h.SSO.MaxSession()
	}
	return SessionMaxAge
}

// StartSession opens a session for who (who just presented their token,
// or signed in with idToken), purging a batch of expired sessions on the
// way.
func (h *Handler) StartSession(ctx context.Context, who Identity, idToken string) (SessionID, error) {
	id, err := newSessionID()
	if err != nil {
		return id, err
	}
	now := time.Now().UTC()
	row := &store.AdminSession{IDHash: id.hash(), Actor: who.Actor, Kind: who.Kind, Role: string(who.Role),
		CreatedAt: now, ExpiresAt: now.Add(h.SessionLifetime(who))}
	switch who.Kind {
	case KindSSO:
		if h.SSO == nil || who.Subject == "" {
			return id, errors.New("error starting session: single sign-on without a subject or not configured")
		}
		row.TokenMAC = h.SSO.sessionMAC(id)
		row.Subject, row.Email, row.DisplayName, row.IDToken = &who.Subject, nullable(who.Email), nullable(who.Name), nullable(idToken)
	case KindToken:
		mac, ok := h.Tokens.sessionMAC(who.Actor, id)
		if !ok {
			return id, fmt.Errorf("error starting session: no token named %q", who.Actor)
		}
		row.TokenMAC = mac
	default:
		return id, fmt.Errorf("error starting session: unknown kind %q", who.Kind)
	}
	if err := h.Service.Store.CreateSession(ctx, row); err != nil {
		return id, err
	}
	if n, err := h.Service.Store.PurgeSessions(ctx, now, sessionPurgeBatch); err != nil {
		h.Log.WarnContext(ctx, "admin: could not purge expired sessions", "error", err)
	} else if n > 0 {
		h.Log.InfoContext(ctx, "admin: purged expired sessions", "count", n)
	}
	return id, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// CheckSession returns the live session a cookie value names: ErrNoSession
// when it names none, another error when the database could not say.
func (h *Handler) CheckSession(ctx context.Context, cookie string) (*Session, error) {
	id, ok := ParseSessionID(cookie)
	if !ok {
		return nil, ErrNoSession
	}
	row, err := h.Service.Store.Session(ctx, id.hash())
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNoSession
	}
	if err != nil {
		return nil, err
	}
	// A session ends at the lesser of its stored expiry and its start plus
	// the lifetime configured now: lowering admin.oidc.max_session
	// shortens the sessions already open.
	end := row.ExpiresAt
	if row.Kind == KindSSO && h.SSO != nil {
		if cut := row.CreatedAt.Add(h.SSO.MaxSession()); cut.Before(end) {
			end = cut
		}
	}
	if !time.Now().UTC().Before(end) {
		// Expired is logged out; the row goes now rather than at the next
		// login's purge.
		if err := h.EndSession(ctx, id); err != nil {
			h.Log.WarnContext(ctx, "admin: could not delete an expired session", "error", err)
		}
		return nil, ErrNoSession
	}
	switch row.Kind {
	case KindSSO:
		// A single sign-on session keeps the role it was given at sign-in
		// (a user moved out of the operators' group loses it at the next
		// one; max_session bounds the wait); it ends when single sign-on
		// is switched off or its provider or role mapping changes.
		role, err := ParseRole(row.Role)
		if h.SSO == nil || row.Subject == nil || *row.Subject == "" || err != nil || !hmac.Equal(h.SSO.sessionMAC(id), row.TokenMAC) {
			return nil, ErrNoSession
		}
		return &Session{ID: id, IDToken: deref(row.IDToken), Identity: Identity{Kind: KindSSO, Actor: row.Actor, Role: role,
			Subject: *row.Subject, Email: deref(row.Email), Name: deref(row.DisplayName)}}, nil
	case KindToken:
		want, ok := h.Tokens.sessionMAC(row.Actor, id)
		if !ok || !hmac.Equal(want, row.TokenMAC) {
			return nil, ErrNoSession // the token that opened it was rotated or removed
		}
		// A token's session has the token's role as configured now.
		tok, _ := h.Tokens.named(row.Actor)
		return &Session{ID: id, Identity: tok.identity()}, nil
	}
	return nil, ErrNoSession
}

// EndSession ends a session; ending one that is already gone is fine.
func (h *Handler) EndSession(ctx context.Context, id SessionID) error {
	return h.Service.Store.DeleteSession(ctx, id.hash())
}
