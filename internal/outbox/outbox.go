// Package outbox makes downstream notifications as durable as the business
// change that caused them: a handler's messages are rows in the same
// transaction (Writer), published right after commit by the worker
// (Deliver, the fast path), and otherwise by the Relay, which claims what
// was left PENDING with SELECT ... FOR UPDATE SKIP LOCKED. Delivery is at
// least once; message_id is stable so subscribers can dedupe.
//
// Publishing itself (channels, confirms) is internal/downstream.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/downstream"
	"callgate/internal/tracing"
)

// Statuses of outbox.status.
const (
	StatusPending = "PENDING"
	StatusSent    = "SENT"
)

// Row is one outbox row.
type Row struct {
	ID            int64           `gorm:"column:id;primaryKey;autoIncrement" json:"id"`
	CallbackLogID int64           `gorm:"column:callback_log_id" json:"callback_log_id"`
	Exchange      string          `gorm:"column:exchange" json:"exchange"`
	RoutingKey    string          `gorm:"column:routing_key" json:"routing_key"`
	MessageID     string          `gorm:"column:message_id" json:"message_id"`
	Payload       []byte          `gorm:"column:payload" json:"-"`
	Headers       json.RawMessage `gorm:"column:headers" json:"headers,omitempty"`
	Status        string          `gorm:"column:status" json:"status"`
	Attempts      int             `gorm:"column:attempts" json:"attempts"`
	LastError     *string         `gorm:"column:last_error" json:"last_error,omitempty"`
	CreatedAt     time.Time       `gorm:"column:created_at" json:"created_at"`
	SentAt        *time.Time      `gorm:"column:sent_at" json:"sent_at,omitempty"`
}

// TableName tells gorm the table.
func (Row) TableName() string { return "outbox" }

// MessageID is the stable id of the n-th (from 0) message with routingKey
// that callback logID produced: "cb<logID>.<routingKey>", with ".<n>" added
// from the second one on. A retry or replay that writes the same
// notification again gets the same id (and the unique key refuses a second
// row), so a subscriber can dedupe on it.
func MessageID(logID int64, routingKey string, n int) string {
	id := "cb" + strconv.FormatInt(logID, 10) + "." + routingKey
	if n > 0 {
		id += "." + strconv.Itoa(n)
	}
	return id
}

// Writer adds a handler's messages to its transaction. It remembers what it
// wrote, for the fast path after commit.
type Writer struct {
	tx       *gorm.DB
	exchange string
	cb       *callback.Log
	headers  json.RawMessage
	now      time.Time
	seen     map[string]int
	rows     []Row
}

var _ callback.Outbox = (*Writer)(nil)

// NewWriter returns a Writer for callback cb inside tx. traceparent is put
// on every message.
func NewWriter(tx *gorm.DB, exchange string, cb *callback.Log, traceparent string, now time.Time) *Writer {
	var headers json.RawMessage
	if traceparent != "" {
		headers, _ = json.Marshal(map[string]string{tracing.HeaderTraceParent: traceparent})
	}
	return &Writer{tx: tx, exchange: exchange, cb: cb, headers: headers, now: now, seen: map[string]int{}}
}

// Add writes msg as a PENDING row in the transaction.
func (w *Writer) Add(ctx context.Context, msg callback.Message) error {
	payload, err := json.Marshal(msg.Payload)
	if err != nil {
		return callback.Permanentf("error encoding %s message: %w", msg.RoutingKey, err)
	}
	n := w.seen[msg.RoutingKey]
	w.seen[msg.RoutingKey] = n + 1
	row := Row{
		CallbackLogID: w.cb.ID,
		Exchange:      w.exchange,
		RoutingKey:    msg.RoutingKey,
		MessageID:     MessageID(w.cb.ID, msg.RoutingKey, n),
		Payload:       payload,
		Headers:       w.headers,
		Status:        StatusPending,
		CreatedAt:     w.now,
	}
	if err := w.tx.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("error writing outbox row %s: %w", row.MessageID, err)
	}
	w.rows = append(w.rows, row)
	return nil
}

// Rows returns what was written (valid once the transaction committed).
func (w *Writer) Rows() []Row { return w.rows }

// Message converts a row for the publisher.
func (r Row) Message() downstream.Message {
	m := downstream.Message{
		Exchange:      r.Exchange,
		RoutingKey:    r.RoutingKey,
		MessageID:     r.MessageID,
		CorrelationID: strconv.FormatInt(r.CallbackLogID, 10),
		Payload:       r.Payload,
		Timestamp:     r.CreatedAt,
	}
	if len(r.Headers) > 0 {
		_ = json.Unmarshal(r.Headers, &m.Headers)
	}
	return m
}
