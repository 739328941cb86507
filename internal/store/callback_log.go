package store

import (
	"context"
	"fmt"

	"callgate/internal/callback"
)

// insertCallbackSQL writes a new PENDING row, or, for a (source, event_id)
// already stored, changes nothing and makes LAST_INSERT_ID() the existing
// row's id. With the driver's default clientFoundRows=false the duplicate
// reports 0 rows affected, a new row 1. INSERT IGNORE is avoided: it would
// also turn other errors into warnings.
const insertCallbackSQL = `INSERT INTO callback_log
 (source, kind, event_id, business_key, status, attempts, payload, headers, trace_id, received_at, next_attempt_at)
 VALUES (?, ?, ?, ?, 'PENDING', 0, ?, ?, ?, ?, ?)
 ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)`

// maxStatementRetries bounds re-runs after a deadlock or lock wait timeout,
// which concurrent duplicate inserts can cause.
const maxStatementRetries = 5

// InsertResult is what an intake insert answers.
type InsertResult struct {
	ID        int64
	Duplicate bool
}

// InsertCallback stores l as PENDING and returns its id, or the id of the row
// already stored for the same source and event id (Duplicate). The row is
// committed when it returns without error (autocommit).
func (s *Store) InsertCallback(ctx context.Context, l *callback.Log) (InsertResult, error) {
	var headers any
	if len(l.Headers) > 0 {
		headers = []byte(l.Headers)
	}
	due := l.ReceivedAt
	if l.NextAttemptAt != nil {
		due = *l.NextAttemptAt
	}
	for try := 0; ; try++ {
		res, err := s.SQL.ExecContext(ctx, insertCallbackSQL,
			l.Source, l.Kind, l.EventID, l.BusinessKey, l.Payload, headers, l.TraceID, l.ReceivedAt, due)
		if err != nil {
			if isRetryable(err) && try < maxStatementRetries {
				continue
			}
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
}

// GetCallback loads one callback_log row.
func (s *Store) GetCallback(ctx context.Context, id int64) (*callback.Log, error) {
	var l callback.Log
	if err := s.DB.WithContext(ctx).Take(&l, id).Error; err != nil {
		return nil, fmt.Errorf("error loading callback log %d: %w", id, Translate(err))
	}
	return &l, nil
}
