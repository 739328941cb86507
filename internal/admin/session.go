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

	"gorm.io/gorm"

	"callgate/internal/store"
)

// Page sessions live in admin_session. The browser's cookie holds only a
// random session id; the table holds its SHA-256, the actor, the expiry and
// a MAC binding the session to the token that opened it. So the cookie is
// worth nothing once its row is gone (logout, expiry, token rotation), and
// a copy of the table does not let anyone log in. Times are Go's UTC clock
// throughout (the store forces loc=UTC).

const (
	// sessionIDBytes of randomness make a session id unguessable.
	sessionIDBytes = 32
	// sessionPurgeBatch bounds the expired rows one login deletes: each
	// login adds one row and removes up to this many dead ones, so the
	// table stays small without a job of its own.
	sessionPurgeBatch = 100
)

// ErrNoSession is a session cookie that names no live session: malformed,
// unknown, logged out, expired, or opened with a token since rotated.
var ErrNoSession = errors.New("no such admin session")

// sessionID is a session's secret, as random bytes.
type sessionID [sessionIDBytes]byte

// sessionEncoding is strict so that one id has exactly one cookie value.
var sessionEncoding = base64.RawURLEncoding.Strict()

func newSessionID() (sessionID, error) {
	var id sessionID
	if _, err := rand.Read(id[:]); err != nil {
		return id, fmt.Errorf("error generating a session id: %w", err)
	}
	return id, nil
}

// parseSessionID reads a cookie value; anything but base64url of 32 bytes
// is refused without asking the database.
func parseSessionID(v string) (sessionID, bool) {
	var id sessionID
	if sessionEncoding.EncodedLen(sessionIDBytes) != len(v) {
		return id, false
	}
	n, err := sessionEncoding.Decode(id[:], []byte(v))
	return id, err == nil && n == sessionIDBytes
}

// String is the cookie value.
func (id sessionID) String() string { return sessionEncoding.EncodeToString(id[:]) }

// hash is the row's key: the database never sees the id itself.
func (id sessionID) hash() []byte {
	h := sha256.Sum256(id[:])
	return h[:]
}

// csrf is the session's CSRF value: an HMAC keyed by the session id, so it
// cannot be computed without the cookie, changes with every login and says
// nothing about the admin token.
func (id sessionID) csrf() string {
	m := hmac.New(sha256.New, id[:])
	m.Write([]byte("callgate-csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// sessionRow is one row of admin_session.
type sessionRow struct {
	IDHash    []byte    `gorm:"column:id_hash;primaryKey"`
	Actor     string    `gorm:"column:actor"`
	TokenMAC  []byte    `gorm:"column:token_mac"`
	CreatedAt time.Time `gorm:"column:created_at"`
	ExpiresAt time.Time `gorm:"column:expires_at"`
}

// TableName tells gorm the table.
func (sessionRow) TableName() string { return "admin_session" }

// createSession stores a new session of actor, valid until expires.
func (s *Service) createSession(ctx context.Context, id sessionID, actor string, tokenMAC []byte, now, expires time.Time) error {
	// Create rather than a raw INSERT: gorm expands a []byte right after
	// "(" in raw SQL into a list of its bytes.
	row := &sessionRow{IDHash: id.hash(), Actor: actor, TokenMAC: tokenMAC, CreatedAt: now, ExpiresAt: expires}
	if err := s.DB.WithContext(ctx).Create(row).Error; err != nil {
		return fmt.Errorf("error creating admin session: %w", store.Translate(err))
	}
	return nil
}

// loadSession returns the session id names, or ErrNoSession when there is
// none.
func (s *Service) loadSession(ctx context.Context, id sessionID) (*sessionRow, error) {
	var row sessionRow
	err := s.DB.WithContext(ctx).Where("id_hash = ?", id.hash()).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNoSession
	}
	if err != nil {
		return nil, fmt.Errorf("error reading admin session: %w", store.Translate(err))
	}
	return &row, nil
}

// deleteSession ends a session; ending one that is already gone is fine.
func (s *Service) deleteSession(ctx context.Context, id sessionID) error {
	if err := s.DB.WithContext(ctx).Exec(`DELETE FROM admin_session WHERE id_hash = ?`, id.hash()).Error; err != nil {
		return fmt.Errorf("error deleting admin session: %w", store.Translate(err))
	}
	return nil
}

// purgeSessions deletes up to limit sessions that expired before now,
// oldest first, and returns how many went.
func (s *Service) purgeSessions(ctx context.Context, now time.Time, limit int) (int64, error) {
	res := s.DB.WithContext(ctx).Exec(`DELETE FROM admin_session WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`, now, limit)
	if res.Error != nil {
		return 0, fmt.Errorf("error purging expired admin sessions: %w", store.Translate(res.Error))
	}
	return res.RowsAffected, nil
}

// pageSession is the session of the request being served.
type pageSession struct {
	id    sessionID
	actor string
}

// startSession opens a session for actor (who just presented their token),
// purging a batch of expired sessions on the way.
func (h *Handler) startSession(ctx context.Context, actor string) (sessionID, error) {
	id, err := newSessionID()
	if err != nil {
		return id, err
	}
	mac, ok := h.Tokens.sessionMAC(actor, id)
	if !ok {
		return id, fmt.Errorf("error starting session: no token named %q", actor)
	}
	now := time.Now().UTC()
	if err := h.Service.createSession(ctx, id, actor, mac, now, now.Add(sessionMaxAge)); err != nil {
		return id, err
	}
	if n, err := h.Service.purgeSessions(ctx, now, sessionPurgeBatch); err != nil {
		h.Log.WarnContext(ctx, "admin: could not purge expired sessions", "error", err)
	} else if n > 0 {
		h.Log.InfoContext(ctx, "admin: purged expired sessions", "count", n)
	}
	return id, nil
}

// checkSession returns the live session a cookie value names: ErrNoSession
// when it names none, another error when the database could not say.
func (h *Handler) checkSession(ctx context.Context, cookie string) (*pageSession, error) {
	id, ok := parseSessionID(cookie)
	if !ok {
		return nil, ErrNoSession
	}
	row, err := h.Service.loadSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if !time.Now().UTC().Before(row.ExpiresAt) {
		// Expired is logged out; the row goes now rather than at the next
		// login's purge.
		if err := h.Service.deleteSession(ctx, id); err != nil {
			h.Log.WarnContext(ctx, "admin: could not delete an expired session", "error", err)
		}
		return nil, ErrNoSession
	}
	want, ok := h.Tokens.sessionMAC(row.Actor, id)
	if !ok || !hmac.Equal(want, row.TokenMAC) {
		return nil, ErrNoSession // the token that opened it was rotated or removed
	}
	return &pageSession{id: id, actor: row.Actor}, nil
}
