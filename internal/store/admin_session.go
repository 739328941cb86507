package store

import (
	"context"
	"fmt"
	"time"
)

// AdminSession is one row of admin_session: a console login. The id is
// never stored, only its hash.
type AdminSession struct {
	IDHash []byte `gorm:"column:id_hash;primaryKey"`
	Actor  string `gorm:"column:actor"`
	// Kind is how the session was opened: "token" or "sso".
	Kind string `gorm:"column:kind"`
	// TokenMAC binds a token's session to the token, a single sign-on
	// session to the provider and role mapping it was opened under.
	TokenMAC []byte `gorm:"column:token_mac"`
	// Role is the role given at sign-in (a token's session takes its
	// token's role as configured now instead).
	Role string `gorm:"column:role"`
	// Subject, Email, DisplayName and IDToken are the ID token's sub,
	// email and name claims and the token itself (single sign-on only).
	Subject     *string   `gorm:"column:subject"`
	Email       *string   `gorm:"column:email"`
	DisplayName *string   `gorm:"column:display_name"`
	IDToken     *string   `gorm:"column:id_token"`
	CreatedAt   time.Time `gorm:"column:created_at"`
	ExpiresAt   time.Time `gorm:"column:expires_at"`
}

// TableName tells gorm the table.
func (AdminSession) TableName() string { return "admin_session" }

// CreateSession stores a new console session.
func (s *Store) CreateSession(ctx context.Context, row *AdminSession) error {
	// Create rather than a raw INSERT: gorm expands a []byte right after
	// "(" in raw SQL into a list of its bytes.
	if err := s.q(ctx, nil).Create(row).Error; err != nil {
		return fmt.Errorf("error creating admin session: %w", translate(err))
	}
	return nil
}

// Session returns the session whose id hashes to idHash (ErrNotFound when
// there is none).
func (s *Store) Session(ctx context.Context, idHash []byte) (*AdminSession, error) {
	var row AdminSession
	if err := s.q(ctx, nil).Where("id_hash = ?", idHash).Take(&row).Error; err != nil {
		return nil, fmt.Errorf("error reading admin session: %w", translate(err))
	}
	return &row, nil
}

// DeleteSession ends a session; ending one that is already gone is fine.
func (s *Store) DeleteSession(ctx context.Context, idHash []byte) error {
	if err := s.q(ctx, nil).Exec(`DELETE FROM admin_session WHERE id_hash = ?`, idHash).Error; err != nil {
		return fmt.Errorf("error deleting admin session: %w", translate(err))
	}
	return nil
}

// PurgeSessions deletes up to limit sessions that expired before now,
// oldest first, and returns how many went.
func (s *Store) PurgeSessions(ctx context.Context, now time.Time, limit int) (int64, error) {
	res := s.q(ctx, nil).Exec(`DELETE FROM admin_session WHERE expires_at <= ? ORDER BY expires_at LIMIT ?`, now, limit)
	if res.Error != nil {
		return 0, fmt.Errorf("error purging expired admin sessions: %w", translate(res.Error))
	}
	return res.RowsAffected, nil
}
