package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// AuditEntry is one row of admin_audit: an operator's action.
type AuditEntry struct {
	ID        int64           `json:"id" gorm:"column:id;primaryKey"`
	Actor     string          `json:"actor" gorm:"column:actor"`
	Action    string          `json:"action" gorm:"column:action"`
	Target    string          `json:"target" gorm:"column:target"`
	Reason    *string         `json:"reason,omitempty" gorm:"column:reason"`
	Filter    json.RawMessage `json:"filter,omitempty" gorm:"column:filter"`
	Count     int             `json:"count" gorm:"column:count"`
	CreatedAt time.Time       `json:"created_at" gorm:"column:created_at"`
}

// TableName tells gorm the table.
func (AuditEntry) TableName() string { return "admin_audit" }

// InsertAuditTx records e in tx (tx nil: on its own); filter, when not nil,
// is stored as JSON and created_at is now.
func (s *Store) InsertAuditTx(ctx context.Context, tx *Tx, e AuditEntry, filter any) error {
	if filter != nil {
		b, err := json.Marshal(filter)
		if err != nil {
			return fmt.Errorf("error encoding the audit filter: %w", err)
		}
		e.Filter = b
	}
	var reason any
	if e.Reason != nil {
		reason = *e.Reason
	}
	var f any
	if len(e.Filter) > 0 {
		f = []byte(e.Filter)
	}
	err := s.q(ctx, tx).Exec(`INSERT INTO admin_audit (actor, action, target, reason, filter, count, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		e.Actor, e.Action, e.Target, reason, f, e.Count, time.Now().UTC()).Error
	if err != nil {
		return fmt.Errorf("error writing the audit trail: %w", translate(err))
	}
	return nil
}

// Audit returns the newest limit entries, newest first.
func (s *Store) Audit(ctx context.Context, limit int) ([]AuditEntry, error) {
	var out []AuditEntry
	if err := s.q(ctx, nil).Order("id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("error reading the audit trail: %w", translate(err))
	}
	return out, nil
}

// AuditOf returns the newest limit entries whose action is one of actions
// and whose target is target (a callback's id: who replayed it, and why),
// newest first.
func (s *Store) AuditOf(ctx context.Context, target string, actions []string, limit int) ([]AuditEntry, error) {
	var out []AuditEntry
	if err := s.q(ctx, nil).Where("target = ? AND action IN ?", target, actions).Order("id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("error reading the audit trail: %w", translate(err))
	}
	return out, nil
}
