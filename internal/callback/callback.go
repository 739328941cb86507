// Package callback defines what a callback is once it has been accepted: the
// callback_log row, its statuses, and how its event id and business key are
// found in a platform's payload. The worker's handler contract lives here too.
//
// It does not verify signatures (internal/signature), talk to MySQL
// (internal/store) or to RabbitMQ (internal/broker).
package callback

import (
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Status is where a callback stands.
type Status string

// The statuses of callback_log.status. PENDING is the only non-terminal one:
// a PENDING row is waiting for (another) attempt at next_attempt_at.
const (
	StatusPending Status = "PENDING"
	StatusSuccess Status = "SUCCESS"
	StatusFailed  Status = "FAILED"
)

// Terminal reports whether no worker will touch the callback again (short of
// an operator's replay).
func (s Status) Terminal() bool { return s == StatusSuccess || s == StatusFailed }

// Log is one callback_log row.
type Log struct {
	ID           int64   `gorm:"column:id;primaryKey;autoIncrement"`
	Source       string  `gorm:"column:source"`
	Kind         string  `gorm:"column:kind"`
	EventID      string  `gorm:"column:event_id"`
	BusinessKey  string  `gorm:"column:business_key"`
	Status       Status  `gorm:"column:status"`
	Attempts     int     `gorm:"column:attempts"`
	AttemptsBase int     `gorm:"column:attempts_base"`
	LastError    *string `gorm:"column:last_error"`
	Payload      []byte  `gorm:"column:payload"`
	// Normalized is the canonical event a platform preset made of Payload
	// (see event.go); nil without a preset.
	Normalized    json.RawMessage `gorm:"column:normalized"`
	Headers       json.RawMessage `gorm:"column:headers"`
	TraceID       string          `gorm:"column:trace_id"`
	ReceivedAt    time.Time       `gorm:"column:received_at"`
	ProcessedAt   *time.Time      `gorm:"column:processed_at"`
	NextAttemptAt *time.Time      `gorm:"column:next_attempt_at"`
	// RetryAfter is the earliest the next attempt of a retrying callback
	// may start (nil: any time); see Due.
	RetryAfter *time.Time `gorm:"column:retry_after"`
	// Awaiting: the last attempt failed because the callback came before
	// what it depends on (callback.NotYet); it does not hold up its key's
	// later callbacks meanwhile.
	Awaiting bool `gorm:"column:awaiting"`
	// Origin is where the callback came from: OriginNotify (a platform
	// sent it; "" when writing) or OriginReconcile (callgate asked).
	Origin string `gorm:"column:origin"`
	// RetainDay is the row's day partition (retain_day, migration 025),
	// as read: the worker names it in the statements that settle the row
	// (a lookup by id alone reads every partition). The database sets it
	// on INSERT (CURRENT_DATE); gorm writes it only in an update that
	// names it (a test placing a row on a past day).
	RetainDay time.Time `gorm:"column:retain_day;<-:update"`
}

// Origins of a callback (callback_log.origin).
const (
	OriginNotify    = "notify"
	OriginReconcile = "reconcile"
)

// KnownOrigin reports whether s is one of the origins.
func KnownOrigin(s string) bool { return s == OriginNotify || s == OriginReconcile }

// Due reports whether a PENDING callback may run at now: not before the
// backoff its last failed attempt set (an operator's replay clears it).
func (l *Log) Due(now time.Time) bool { return l.RetryAfter == nil || !l.RetryAfter.After(now) }

// TableName tells gorm the table.
func (Log) TableName() string { return "callback_log" }

// Limits of the columns, checked at intake so that an over-long value is a
// clear 400 rather than a truncation or a database error.
const (
	MaxEventIDLen     = 191
	MaxBusinessKeyLen = 191
	// MaxNormalizedBytes bounds a preset's canonical event (a few short
	// fields); larger is refused at intake.
	MaxNormalizedBytes = 16 << 10
)

// Summary is a callback as lists show it: everything but the bodies.
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
	// Origin is OriginNotify or OriginReconcile.
	Origin string `json:"origin"`
}

// Summarize returns l's summary.
func Summarize(l *Log) Summary {
	return Summary{ID: l.ID, Source: l.Source, Kind: l.Kind, EventID: l.EventID, BusinessKey: l.BusinessKey,
		Status: string(l.Status), Attempts: l.Attempts, LastError: l.LastError, TraceID: l.TraceID,
		ReceivedAt: l.ReceivedAt, ProcessedAt: l.ProcessedAt, NextAttempt: l.NextAttemptAt, Origin: l.Origin}
}

// Truncate shortens s to at most n bytes, never splitting a UTF-8
// character, and marks a cut with "…" (within the n bytes): for error
// messages stored in text columns and for display.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := max(0, n-len(mark))
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
