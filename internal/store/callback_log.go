package store

import (
	"context"
	"fmt"
	"strings"

	"callgate/internal/callback"
)

// insertColumns and insertValues are one callback_log row as the intake
// writes it, shared by the one-row INSERT and the group-committed multi-row
// one (insertArgs fills the placeholders in this order).
const (
	insertColumns = `INSERT INTO callback_log
 (source, kind, event_id, business_key, status, attempts, payload, headers, trace_id, received_at, next_attempt_at) VALUES `
	insertValues = `(?, ?, ?, ?, 'PENDING', 0, ?, ?, ?, ?, ?)`
)

// insertCallbackSQL writes a new PENDING row, or, for a (source, event_id)
// already stored, changes nothing and makes LAST_INSERT_ID() the existing
// row's id. With the driver's default clientFoundRows=false the duplicate
// reports 0 rows affected, a new row 1. INSERT IGNORE is avoided: it would
// also turn other errors into warnings.
//
// Assigning id in the duplicate clause is safe here only because the
// statement has one row: in a multi-row INSERT it moves the statement's
// next auto-increment value (see insertBatchSQL).
const insertCallbackSQL = insertColumns + insertValues + ` ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`

// insertBatchSQL is the group-committed form: n rows, duplicates left as
// they are. Its duplicate clause must not touch id: assigning the
// AUTO_INCREMENT column makes MariaDB continue the statement's later rows
// from the duplicate's id + 1, ids that a concurrent statement may already
// have used, and the PRIMARY KEY clashes that follow are absorbed by the
// same clause, so rows go missing while the statement returns OK.
func insertBatchSQL(n int) string {
	var q strings.Builder
	q.Grow(len(insertColumns) + n*(len(insertValues)+1) + 48)
	q.WriteString(insertColumns)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(insertValues)
	}
	q.WriteString(` ON DUPLICATE KEY UPDATE event_id = event_id`)
	return q.String()
}

// insertArgs appends l's values in the order of insertValues.
func insertArgs(args []any, l *callback.Log) []any {
	var headers any
	if len(l.Headers) > 0 {
		headers = []byte(l.Headers)
	}
	due := l.ReceivedAt
	if l.NextAttemptAt != nil {
		due = *l.NextAttemptAt
	}
	return append(args, l.Source, l.Kind, l.EventID, l.BusinessKey, l.Payload, headers, l.TraceID, l.ReceivedAt, due)
}

// InsertResult is what an intake insert answers.
type InsertResult struct {
	ID        int64
	Duplicate bool
}

// InsertCallback stores l as PENDING and returns its id, or the id of the row
// already stored for the same source and event id (Duplicate). The row is
// committed when it returns without error (autocommit).
func (s *Store) InsertCallback(ctx context.Context, l *callback.Log) (InsertResult, error) {
	res, err := s.execRetrying(ctx, insertCallbackSQL, insertArgs(make([]any, 0, 9), l)...)
	if err != nil {
		return InsertResult{}, fmt.Errorf("error inserting callback log: %w", Translate(err))
	}
	id, err := res.LastInsertId()
	if err != nil {
		return InsertResult{}, fmt.Errorf("error reading callback log id: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return InsertResult{}, fmt.Errorf("error reading callback log insert result: %w", err)
	}
	return InsertResult{ID: id, Duplicate: n == 0}, nil
}

// GetCallback loads one callback_log row.
func (s *Store) GetCallback(ctx context.Context, id int64) (*callback.Log, error) {
	var l callback.Log
	if err := s.DB.WithContext(ctx).Take(&l, id).Error; err != nil {
		return nil, fmt.Errorf("error loading callback log %d: %w", id, Translate(err))
	}
	return &l, nil
}
