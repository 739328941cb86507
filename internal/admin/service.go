package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/outbox"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Errors the API turns into answers.
var (
	ErrNotFound       = errors.New("not found")
	ErrReasonRequired = errors.New("a reason is required")
	ErrNotReplayable  = errors.New("only a FAILED callback can be replayed (a SUCCESS one with force)")
	ErrTooLarge       = errors.New("the replay matches more callbacks than the cap; confirm_large is required")
	ErrEmptyFilter    = errors.New("the filter must name at least status, source, kind, since, until, error_contains or ids")
	ErrBadFilter      = errors.New("invalid filter")
	ErrJobFinished    = errors.New("the replay job has already finished")
)

// Announcer queues a log id for the workers without blocking.
type Announcer interface {
	Announce(an broker.Announcement) bool
}

// Service holds the operator operations, shared by the API, the page and
// (through the API) the CLI.
type Service struct {
	DB        *gorm.DB
	Announcer Announcer
	// Threshold is the compensation threshold: a replayed callback whose
	// announcement is lost is announced again after it.
	Threshold time.Duration
	// Cap is the largest bulk replay allowed without confirm_large.
	Cap int
	// Masks are the JSON fields masked on display, by source.
	Masks map[string][]string
	// Unrouted reports how many notifications wait in
	// <prefix>.downstream.unrouted; nil or failing shows them as unknown.
	Unrouted func() (int, error)
	Log      *slog.Logger
}

// ListFilter selects callbacks for the list.
type ListFilter struct {
	Status  string
	Source  string
	Kind    string
	Key     string
	EventID string
	Since   *time.Time
	Until   *time.Time
	Cursor  int64 // ids below this; 0 = from the newest
	Limit   int
}

// Summary is a callback in a list.
type Summary struct {
	ID          int64      `json:"id"`
	Source      string     `json:"source"`
	Kind        string     `json:"kind"`
	EventID     string     `json:"event_id"`
	BusinessKey string     `json:"business_key"`
	Status      string     `json:"status"`
	Attempts    int        `json:"attempts"`
	LastError   *string    `json:"last_error,omitempty"`
	TraceID     string     `json:"trace_id"`
	ReceivedAt  time.Time  `json:"received_at"`
	ProcessedAt *time.Time `json:"processed_at,omitempty"`
	NextAttempt *time.Time `json:"next_attempt_at,omitempty"`
}

func summarize(l *callback.Log) Summary {
	return Summary{ID: l.ID, Source: l.Source, Kind: l.Kind, EventID: l.EventID, BusinessKey: l.BusinessKey,
		Status: string(l.Status), Attempts: l.Attempts, LastError: l.LastError, TraceID: l.TraceID,
		ReceivedAt: l.ReceivedAt, ProcessedAt: l.ProcessedAt, NextAttempt: l.NextAttemptAt}
}

// Page is one page of a keyset-paginated list.
type Page struct {
	Items      []Summary `json:"items"`
	NextCursor *int64    `json:"next_cursor"`
}

// List returns callbacks newest first. Pagination is by id (keyset): the
// next page is the ids below the last one shown, never an OFFSET scan.
func (s *Service) List(ctx context.Context, f ListFilter) (Page, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	q := s.DB.WithContext(ctx).Model(&callback.Log{}).
		Omit("payload", "headers") // the list never needs the bodies
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.Source != "" {
		q = q.Where("source = ?", f.Source)
	}
	if f.Kind != "" {
		q = q.Where("kind = ?", f.Kind)
	}
	if f.Key != "" {
		q = q.Where("business_key = ?", f.Key)
	}
	if f.EventID != "" {
		q = q.Where("event_id = ?", f.EventID)
	}
	if f.Since != nil {
		q = q.Where("received_at >= ?", f.Since.UTC())
	}
	if f.Until != nil {
		q = q.Where("received_at < ?", f.Until.UTC())
	}
	if f.Cursor > 0 {
		q = q.Where("id < ?", f.Cursor)
	}
	var rows []callback.Log
	if err := q.Select("id", "source", "kind", "event_id", "business_key", "status", "attempts", "last_error", "trace_id",
		"received_at", "processed_at", "next_attempt_at").Order("id DESC").Limit(f.Limit + 1).Find(&rows).Error; err != nil {
		return Page{}, fmt.Errorf("error listing callbacks: %w", store.Translate(err))
	}
	p := Page{Items: make([]Summary, 0, len(rows))}
	for i := range rows {
		if i == f.Limit {
			next := rows[i-1].ID
			p.NextCursor = &next
			break
		}
		p.Items = append(p.Items, summarize(&rows[i]))
	}
	return p, nil
}

// Detail is everything about one callback.
type Detail struct {
	Summary
	// Payload is the raw body as received (a string; PayloadJSON holds it
	// parsed when it is JSON).
	Payload     string             `json:"payload"`
	PayloadJSON json.RawMessage    `json:"payload_json,omitempty"`
	Headers     map[string]string  `json:"headers"`
	Attempts    []callback.Attempt `json:"attempt_history"`
	Lineage     []outbox.Row       `json:"lineage"`
}

// Get returns one callback with its payload, headers, attempts and the
// outbox messages it produced.
func (s *Service) Get(ctx context.Context, id int64) (*Detail, error) {
	var l callback.Log
	if err := s.DB.WithContext(ctx).Take(&l, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("error loading callback %d: %w", id, store.Translate(err))
	}
	shown := maskPayload(l.Payload, s.Masks[l.Source])
	d := &Detail{Summary: summarize(&l), Payload: string(shown), Headers: map[string]string{}}
	if json.Valid(shown) {
		d.PayloadJSON = json.RawMessage(shown)
	}
	if len(l.Headers) > 0 {
		_ = json.Unmarshal(l.Headers, &d.Headers)
	}
	db := s.DB.WithContext(ctx)
	if err := db.Where("log_id = ?", id).Order("attempt, id").Find(&d.Attempts).Error; err != nil {
		return nil, fmt.Errorf("error loading attempts: %w", store.Translate(err))
	}
	if err := db.Omit("payload").Where("callback_log_id = ?", id).Order("id").Find(&d.Lineage).Error; err != nil {
		return nil, fmt.Errorf("error loading lineage: %w", store.Translate(err))
	}
	return d, nil
}

// Replay makes one FAILED callback (or, with force, a SUCCESS one) PENDING
// again and announces it, and records who did it and why. Replaying a
// SUCCESS callback redoes no effect: the handlers are idempotent.
func (s *Service) Replay(ctx context.Context, actor string, id int64, reason string, force bool) (*Summary, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, ErrReasonRequired
	}
	var l callback.Log
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Omit("payload").Take(&l, id).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return ErrNotFound
			}
			return err
		}
		replayable := l.Status == callback.StatusFailed || force && l.Status == callback.StatusSuccess
		if !replayable {
			return ErrNotReplayable
		}
		if err := makePending(tx, []int64{id}, s.Threshold); err != nil {
			return err
		}
		l.Status = callback.StatusPending
		return audit(tx, actor, "replay", fmt.Sprint(id), reason, nil, 1)
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotReplayable) {
			return nil, err
		}
		return nil, fmt.Errorf("error replaying callback %d: %w", id, store.Translate(err))
	}
	s.Announcer.Announce(broker.Announcement{LogID: l.ID, Kind: l.Kind, TraceParent: tracing.TraceParentFromID(l.TraceID)})
	s.Log.InfoContext(ctx, "admin: callback replayed", "log_id", id, "actor", actor, "reason", reason, "force", force)
	sum := summarize(&l)
	return &sum, nil
}

// makePending turns callbacks back to PENDING with a fresh retry budget.
func makePending(tx *gorm.DB, ids []int64, threshold time.Duration) error {
	return tx.Exec(`UPDATE callback_log SET status = 'PENDING', attempts_base = attempts, next_attempt_at = ?, processed_at = NULL
		WHERE id IN ?`, time.Now().UTC().Add(threshold), ids).Error
}

func audit(tx *gorm.DB, actor, action, target, reason string, filter any, count int) error {
	var f any
	if filter != nil {
		b, err := json.Marshal(filter)
		if err != nil {
			return err
		}
		f = b
	}
	return tx.Exec(`INSERT INTO admin_audit (actor, action, target, reason, filter, count, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		actor, action, target, reason, f, count, time.Now().UTC()).Error
}

// Record puts an action without its own transaction (a login) into the
// audit trail; a failure to write it is logged, not fatal.
func (s *Service) Record(ctx context.Context, actor, action, target string) {
	if err := audit(s.DB.WithContext(ctx), actor, action, target, "", nil, 0); err != nil {
		s.Log.WarnContext(ctx, "admin: could not write the audit trail", "action", action, "actor", actor, "error", err)
	}
}

// AuditEntry is one row of the audit trail.
type AuditEntry struct {
	ID        int64           `json:"id" gorm:"column:id"`
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

// Audit returns the newest entries.
func (s *Service) Audit(ctx context.Context, limit int) ([]AuditEntry, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	var out []AuditEntry
	if err := s.DB.WithContext(ctx).Order("id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("error reading audit trail: %w", store.Translate(err))
	}
	return out, nil
}
