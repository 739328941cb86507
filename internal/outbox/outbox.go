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

	"callgate/internal/callback"
	"callgate/internal/downstream"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Statuses of outbox.status.
const (
	StatusPending = store.OutboxPending
	StatusSent    = store.OutboxSent
)

// Row is one outbox row.
type Row = store.OutboxRow

// MessageID is the stable id of the n-th (from 0) message with routingKey
// that callback logID produced: "cb<logID>.<routingKey>", with ".<n>" added
// from the second one on. A retry or replay that writes the same
// notification again gets the same id, so a subscriber can dedupe on it.
// (The handlers are idempotent: a replay of a settled callback writes no
// notification again. Since migration 025 message_id is a plain key of
// the partitioned outbox, no longer a unique one.)
func MessageID(logID int64, routingKey string, n int) string {
	id := store.MessageIDPrefix(logID) + routingKey
	if n > 0 {
		id += "." + strconv.Itoa(n)
	}
	return id
}

// Writer collects a handler's messages and writes them into its
// transaction with Flush, as the transaction's last rows before the
// callback's status. It remembers what it wrote, for the fast path after
// commit.
type Writer struct {
	st       *store.Store
	tx       *store.Tx
	exchange string
	cb       *callback.Log
	headers  json.RawMessage
	now      time.Time
	seen     map[string]int
	rows     []Row
}

var _ callback.Outbox = (*Writer)(nil)

// NewWriter returns a Writer for callback cb inside tx. traceparent is put
// on every message; now is the messages' timestamp.
func NewWriter(st *store.Store, tx *store.Tx, exchange string, cb *callback.Log, traceparent string, now time.Time) *Writer {
	var headers json.RawMessage
	if traceparent != "" {
		headers, _ = json.Marshal(map[string]string{tracing.HeaderTraceParent: traceparent})
	}
	return &Writer{st: st, tx: tx, exchange: exchange, cb: cb, headers: headers, now: now, seen: map[string]int{}}
}

// Add takes msg for the transaction (written by Flush).
func (w *Writer) Add(_ context.Context, msg callback.Message) error {
	payload, err := json.Marshal(msg.Payload)
	if err != nil {
		return callback.Permanentf("error encoding %s message: %w", msg.RoutingKey, err)
	}
	n := w.seen[msg.RoutingKey]
	w.seen[msg.RoutingKey] = n + 1
	w.rows = append(w.rows, Row{
		CallbackLogID: w.cb.ID,
		Exchange:      w.exchange,
		RoutingKey:    msg.RoutingKey,
		MessageID:     MessageID(w.cb.ID, msg.RoutingKey, n),
		Payload:       payload,
		Headers:       w.headers,
		Status:        StatusPending,
		CreatedAt:     w.now,
	})
	return nil
}

// Flush writes the messages taken so far in one INSERT, stamped with the
// database's clock (see store.InsertOutboxTx): call it right before the
// commit.
func (w *Writer) Flush(ctx context.Context) error {
	if err := w.st.InsertOutboxTx(ctx, w.tx, w.rows); err != nil {
		return fmt.Errorf("error writing the outbox of callback %d: %w", w.cb.ID, err)
	}
	return nil
}

// Rows returns what was written (valid once the transaction committed).
// Their ids are not known; MessageID identifies them.
func (w *Writer) Rows() []Row { return w.rows }

// Message converts a row for the publisher.
func Message(r Row) downstream.Message {
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
