package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
	"time"

	"callgate/internal/callback"
)

// The intake's dedupe outlives the payloads: each accepted callback's
// (source, event_id) and log_id are also a row of callback_event (migration
// 024), written in the same transaction as its callback_log row and kept
// for scheduler.retention.dedupe_max_age, long after retention dropped the
// callback_log row with its day. writeIntake is the one way the intake writes: the
// group-committed batch (with RETURNING, or with a read-back), its
// row-by-row fallback and Store.InsertCallback all go through it.
//
// One transaction per batch:
//
//  1. the callback_log rows, as one multi-row INSERT: callback_log has
//     no unique key on (source, event_id) (migration 025: a partitioned
//     table's unique keys must hold its partitioning column), so every
//     row is new;
//  2. the events of the new rows into callback_event, in (source,
//     event_id) order, leaving an event already there as it is, and
//     learning each one's stored log_id (RETURNING on MariaDB; elsewhere
//     a locking read-back): callback_event's primary key is the dedupe,
//     and its lock serializes the requests of one event (the second waits
//     for the first's transaction to end);
//  3. a new row whose event already held another log_id is a duplicate
//     (of a callback still stored, or of one whose day retention
//     dropped): its callback_log row is deleted again, and its request
//     answered Duplicate with the stored log_id (never announced).
//
// The common case (no duplicate) is BEGIN, two INSERTs and a COMMIT with
// RETURNING. A deadlock or lock wait timeout re-runs the whole
// transaction, and so does an id already in use (writeIntake).

// insertEventSQL writes n events: (source, event_id, log_id, received_at).
// An event already there keeps its log_id, which RETURNING answers.
func insertEventSQL(n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO callback_event (source, event_id, log_id, received_at) VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(`(?, ?, ?, ?)`)
	}
	q.WriteString(` ON DUPLICATE KEY UPDATE log_id = log_id RETURNING source, event_id, log_id`)
	return q.String()
}

// writeIntake writes rows, at most one per (source, event_id), with their
// events in one transaction, and answers each row (p.res): its id and
// whether it is new. returning says whether the server answers INSERT ...
// RETURNING. inserted is how many rows it added to callback_log in the
// end, -1 where the server does not say (RETURNING). An error of the
// transaction, rolled back whole, is a *statementError; a COMMIT that
// failed is not (it may have committed).
//
// idsInUse counts the tries the database refused because it gave the
// callback_log INSERT an id already in use (a duplicate key: the table's
// only unique key is (id, retain_day)), each written again whole with new
// ids, up to idInUseTries times. MariaDB's partition handler keeps the
// partitioned table's AUTO_INCREMENT itself, and has been seen here to
// hand out an id in use (issue 40); the next statement's ids are past it.
func (s *Store) writeIntake(ctx context.Context, rows []*pendingInsert, returning bool) (inserted int64, idsInUse int, err error) {
	return s.writeIntakeThen(ctx, rows, returning, nil)
}

// writeIntakeThen is writeIntake that calls beforeCommit (if set) once the
// transaction's statements succeeded, just before its COMMIT, on every
// try that reaches it: the Batcher's pipeline waits there for the previous
// batch (Batcher.writer).
func (s *Store) writeIntakeThen(ctx context.Context, rows []*pendingInsert, returning bool, beforeCommit func()) (inserted int64, idsInUse int, err error) {
	for {
		err = retryTransient(ctx, func() error {
			for _, p := range rows {
				p.res = InsertResult{}
			}
			return s.inOwnTx(ctx, beforeCommit, func(tx *sql.Tx) error {
				var gone []int64
				var err error
				if returning {
					inserted = -1
					gone, err = intakeReturning(ctx, tx, rows)
				} else {
					inserted, gone, err = intakeReadBack(ctx, tx, rows)
				}
				if err != nil || len(gone) == 0 {
					return err
				}
				if inserted > 0 {
					inserted -= int64(len(gone))
				}
				return deleteLogs(ctx, tx, gone)
			})
		})
		if !isDuplicateKey(err) || idsInUse == idInUseTries {
			return inserted, idsInUse, err
		}
		idsInUse++
	}
}

// idInUseTries bounds how many times writeIntake writes a transaction
// again after an id in use.
const idInUseTries = 3

// inOwnTx runs fn in a transaction on a connection of its own and commits
// it when fn returns nil, after calling beforeCommit (if set). An error
// before the COMMIT (the transaction rolled back) is a *statementError. A
// connection that cannot be trusted after an error is discarded, never
// handed back to the pool.
func (s *Store) inOwnTx(ctx context.Context, beforeCommit func(), fn func(*sql.Tx) error) error {
	conn, err := s.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	tx, err := conn.BeginTx(ctx, nil)
	if err == nil {
		if err = fn(tx); err != nil {
			_ = tx.Rollback()
			err = &statementError{err}
		} else {
			if beforeCommit != nil {
				beforeCommit()
			}
			err = tx.Commit()
		}
	}
	if err != nil && brokenConn(err) {
		// database/sql closes a connection whose Raw func reports it bad.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}

// eventKey is an event: compared byte for byte, as the keys do.
type eventKey struct{ source, event string }

// intakeReturning is the transaction's statements with RETURNING: the
// callback_log INSERT answers each row as stored (each one new: it has no
// duplicate clause), the callback_event INSERT each row's event as stored.
// It returns the new rows whose event was already there (to delete).
func intakeReturning(ctx context.Context, tx *sql.Tx, rows []*pendingInsert) (gone []int64, err error) {
	args := make([]any, 0, len(rows)*insertArgCount)
	byEvent := make(map[eventKey]*pendingInsert, len(rows))
	for _, p := range rows {
		args = insertArgs(args, p.row)
		byEvent[eventKey{p.row.Source, p.row.EventID}] = p
	}
	err = queryTx(ctx, tx, claimOwnRows(byEvent), insertBatchSQL(len(rows))+returningSQL, args...)
	if err != nil {
		return nil, err
	}
	for _, p := range rows {
		if p.res.ID == 0 {
			return nil, fmt.Errorf("%w: no row returned for %s %q", ErrUnaccounted, p.row.Source, p.row.EventID)
		}
	}
	fresh := eventOrder(rows)
	args = args[:0]
	for _, p := range fresh {
		args = append(args, p.row.Source, p.row.EventID, p.res.ID, receivedAt(p.row))
	}
	stored := make(map[eventKey]int64, len(fresh))
	err = queryTx(ctx, tx, func(rs *sql.Rows) error {
		for rs.Next() {
			var (
				source, event string
				logID         int64
			)
			if err := rs.Scan(&source, &event, &logID); err != nil {
				return err
			}
			stored[eventKey{source, event}] = logID
		}
		return nil
	}, insertEventSQL(len(fresh)), args...)
	if err != nil {
		return nil, err
	}
	for _, p := range fresh {
		logID, ok := stored[eventKey{p.row.Source, p.row.EventID}]
		if !ok {
			return nil, fmt.Errorf("%w: no event for %s %q", ErrUnaccounted, p.row.Source, p.row.EventID)
		}
		if logID != p.res.ID {
			gone = append(gone, p.res.ID)
			p.res = InsertResult{ID: logID, Duplicate: true}
		}
	}
	return gone, nil
}

// intakeReadBack is the transaction's statements without RETURNING
// (MySQL): the callback_log INSERT (each row new: it has no duplicate
// clause); our rows' ids, read back from the
// first id it generated on (LAST_INSERT_ID) and told from other
// transactions' rows by their trace id and received_at (p.mine: ids of
// one statement need not be consecutive, innodb_autoinc_lock_mode 2);
// their events in one INSERT, an event already there left as it is; and
// a locking read-back of each event's log_id. No statement looks
// callback_log up by (source, event_id): it has no unique key there
// (migration 025). It returns how many rows the INSERT added and the new
// rows whose event was already there (to delete).
func intakeReadBack(ctx context.Context, tx *sql.Tx, rows []*pendingInsert) (inserted int64, gone []int64, err error) {
	args := make([]any, 0, len(rows)*insertArgCount)
	for _, p := range rows {
		args = insertArgs(args, p.row)
	}
	res, err := tx.ExecContext(ctx, insertBatchSQL(len(rows)), args...)
	if err != nil {
		return 0, nil, err
	}
	if inserted, err = res.RowsAffected(); err != nil {
		return 0, nil, err
	}
	first, err := res.LastInsertId()
	if err != nil {
		return 0, nil, err
	}
	byEvent := make(map[eventKey]*pendingInsert, len(rows))
	args = append(args[:0], first)
	for _, p := range rows {
		byEvent[eventKey{p.row.Source, p.row.EventID}] = p
		args = append(args, p.row.TraceID)
	}
	err = queryTx(ctx, tx, claimOwnRows(byEvent), `SELECT id, source, event_id, trace_id, received_at FROM callback_log WHERE id >= ? AND trace_id IN (?`+
		strings.Repeat(", ?", len(rows)-1)+`)`, args...)
	if err != nil {
		return 0, nil, err
	}
	for _, p := range rows {
		if p.res.ID == 0 {
			return 0, nil, fmt.Errorf("%w: no row read back for %s %q", ErrUnaccounted, p.row.Source, p.row.EventID)
		}
	}
	fresh := eventOrder(rows)
	args = args[:0]
	for _, p := range fresh {
		args = append(args, p.row.Source, p.row.EventID, p.res.ID, receivedAt(p.row))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO callback_event (source, event_id, log_id, received_at) VALUES (?, ?, ?, ?)`+
		strings.Repeat(", (?, ?, ?, ?)", len(fresh)-1)+` ON DUPLICATE KEY UPDATE log_id = callback_event.log_id`, args...); err != nil {
		return 0, nil, err
	}
	bySource := map[string][]*pendingInsert{}
	var sources []string
	for _, p := range fresh {
		if bySource[p.row.Source] == nil {
			sources = append(sources, p.row.Source)
		}
		bySource[p.row.Source] = append(bySource[p.row.Source], p)
	}
	// The events are locked already (the INSERT's); the read locks them
	// again, by the primary key only: a scan of callback_event (the
	// optimizer's choice on a small table) would wait for every event
	// other transactions are writing.
	for _, source := range sources {
		ps := bySource[source]
		args = append(args[:0], source)
		for _, p := range ps {
			args = append(args, p.row.EventID)
		}
		stored := make(map[string]int64, len(ps))
		err := queryTx(ctx, tx, func(rs *sql.Rows) error {
			for rs.Next() {
				var (
					event string
					logID int64
				)
				if err := rs.Scan(&event, &logID); err != nil {
					return err
				}
				stored[event] = logID
			}
			return nil
		}, `SELECT event_id, log_id FROM callback_event FORCE INDEX (PRIMARY) WHERE source = ? AND event_id IN (?`+
			strings.Repeat(", ?", len(ps)-1)+`) FOR UPDATE`, args...)
		if err != nil {
			return 0, nil, err
		}
		for _, p := range ps {
			logID, ok := stored[p.row.EventID]
			if !ok {
				return 0, nil, fmt.Errorf("%w: no event for %s %q", ErrUnaccounted, p.row.Source, p.row.EventID)
			}
			if logID != p.res.ID {
				// Ours, but the event was there before it: a duplicate.
				gone = append(gone, p.res.ID)
				p.res = InsertResult{ID: logID, Duplicate: true}
			}
		}
	}
	return inserted, gone, nil
}

// claimOwnRows reads callback_log rows (id, source, event_id, trace_id,
// received_at), from RETURNING or a read-back, and gives each request the
// id of the row it wrote itself (p.mine), once.
func claimOwnRows(byEvent map[eventKey]*pendingInsert) func(*sql.Rows) error {
	return func(rs *sql.Rows) error {
		for rs.Next() {
			var (
				id                     int64
				source, event, traceID string
				received               time.Time
			)
			if err := rs.Scan(&id, &source, &event, &traceID, &received); err != nil {
				return err
			}
			if p := byEvent[eventKey{source, event}]; p != nil && p.res.ID == 0 && p.mine(traceID, received) {
				p.res = InsertResult{ID: id}
			}
		}
		return nil
	}
}

// eventOrder returns rows sorted by (source, event_id): every transaction
// writes its events in that order, so that two batches sharing events
// wait for each other rather than deadlock.
func eventOrder(rows []*pendingInsert) []*pendingInsert {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b *pendingInsert) int {
		if c := strings.Compare(a.row.Source, b.row.Source); c != 0 {
			return c
		}
		return strings.Compare(a.row.EventID, b.row.EventID)
	})
	return out
}

// deleteLogs deletes the callback_log rows ids, new in this transaction.
func deleteLogs(ctx context.Context, tx *sql.Tx, ids []int64) error {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM callback_log WHERE id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`, args...)
	return err
}

// keepEvents writes, in tx, the events of the callback_log rows ids that
// tx is about to delete, so that their dedupe outlives them: every DELETE
// FROM callback_log but the intake's own (deleteLogs: rows whose event
// already names another log_id) runs it first, in the same transaction,
// with the rows locked. An event already there is left as it is; one that
// is missing is a row an older gateway stored (it writes no events, during
// a rolling upgrade) or that migration 024's backfill did not see, and
// gets its event now, answering a resend with this log_id for
// scheduler.retention.dedupe_max_age after its received_at.
func (s *Store) keepEvents(ctx context.Context, tx *Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return translate(s.q(ctx, tx).Exec(`INSERT INTO callback_event (source, event_id, log_id, received_at)
		SELECT source, event_id, id, received_at FROM callback_log WHERE id IN ?
		ON DUPLICATE KEY UPDATE log_id = callback_event.log_id`, ids).Error)
}

// queryTx runs query in tx and hands its rows to scan; it succeeds only if
// scan does and the rows end without an error.
func queryTx(ctx context.Context, tx *sql.Tx, scan func(*sql.Rows) error, query string, args ...any) error {
	rs, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	if err := scan(rs); err != nil {
		return err
	}
	if err := rs.Close(); err != nil {
		return err
	}
	return rs.Err()
}

// canReturn reports whether the server answers INSERT ... RETURNING, asked
// once, within ctx. While it cannot be asked (MySQL away) the read-back is
// used.
func (s *Store) canReturn(ctx context.Context) bool {
	switch s.ret.Load() {
	case returningYes:
		return true
	case returningNo:
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ok, err := s.returning(ctx)
	if err != nil {
		return false
	}
	if ok {
		s.ret.Store(returningYes)
	} else {
		s.ret.Store(returningNo)
	}
	return ok
}

// insertOne writes one callback with writeIntake.
func (s *Store) insertOne(ctx context.Context, l *callback.Log, returning bool) (InsertResult, error) {
	p := &pendingInsert{row: l}
	if _, _, err := s.writeIntake(ctx, []*pendingInsert{p}, returning); err != nil {
		return InsertResult{}, fmt.Errorf("error inserting callback log: %w", translate(err))
	}
	if p.res.ID == 0 {
		return InsertResult{}, fmt.Errorf("%w: %s %q", ErrUnaccounted, l.Source, l.EventID)
	}
	return p.res, nil
}

// EventCursor is where one retention run's walk through the events
// received before its cutoff stands, in (received_at, source, event_id)
// order (the order of ix_callback_event_received, which holds the primary
// key): the zero value is the start. Unlike DeadLetterCursor it lasts one
// run only: an event kept behind it (its callback still there) may be
// deletable at the next.
type EventCursor struct {
	ReceivedAt time.Time
	Source     string
	EventID    string
}

// DeleteEventsBefore reads, from after, up to limit callback_event rows
// received before cutoff, and deletes those whose callback_log row is
// gone: the end of a callback's dedupe (scheduler.retention.dedupe_max_age).
// It returns how many it deleted, the cursor after the rows it read, and
// how many it read (less than limit: the walk is at its end). An event
// whose callback is still there (FAILED, PENDING, a dead letter, or
// SUCCESS not yet deleted) is kept, however old: its dedupe lasts as long
// as the callback; a walk from its cursor reads it once per run, not once
// per batch. A callback_log row once gone never comes back (ids are not
// reused), so the check cannot be overtaken; an event the intake is
// writing meanwhile is locked, and the DELETE waits for it.
func (s *Store) DeleteEventsBefore(ctx context.Context, cutoff time.Time, after EventCursor, limit int) (deleted int, next EventCursor, read int, err error) {
	var events []struct {
		Source     string
		EventID    string
		ReceivedAt time.Time
		Kept       bool
	}
	q := `SELECT source, event_id, received_at, EXISTS (SELECT 1 FROM callback_log l WHERE l.id = e.log_id) AS kept
		FROM callback_event e FORCE INDEX (ix_callback_event_received) WHERE received_at < ?`
	args := []any{cutoff}
	if after != (EventCursor{}) {
		q += ` AND received_at >= ? AND (received_at > ? OR source > ? OR (source = ? AND event_id > ?))`
		args = append(args, after.ReceivedAt, after.ReceivedAt, after.Source, after.Source, after.EventID)
	}
	q += ` ORDER BY received_at, source, event_id LIMIT ?`
	if err := s.q(ctx, nil).Raw(q, append(args, limit)...).Scan(&events).Error; err != nil {
		return 0, after, 0, fmt.Errorf("error finding old events: %w", translate(err))
	}
	if len(events) == 0 {
		return 0, after, 0, nil
	}
	last := events[len(events)-1]
	next = EventCursor{ReceivedAt: last.ReceivedAt, Source: last.Source, EventID: last.EventID}
	// One statement per source naming the primary key's columns (a tuple
	// IN may read the whole table), in one short transaction.
	bySource := map[string][]string{}
	var sources []string
	for _, e := range events {
		if e.Kept {
			continue
		}
		if bySource[e.Source] == nil {
			sources = append(sources, e.Source)
		}
		bySource[e.Source] = append(bySource[e.Source], e.EventID)
	}
	if len(sources) == 0 {
		return 0, next, len(events), nil
	}
	err = s.InTx(ctx, func(tx *Tx) error {
		for _, source := range sources {
			res := s.q(ctx, tx).Exec(`DELETE FROM callback_event WHERE source = ? AND event_id IN ? AND received_at < ?
				AND NOT EXISTS (SELECT 1 FROM callback_log l WHERE l.id = callback_event.log_id)`, source, bySource[source], cutoff)
			if res.Error != nil {
				return translate(res.Error)
			}
			deleted += int(res.RowsAffected)
		}
		return nil
	})
	if err != nil {
		return 0, after, 0, fmt.Errorf("error deleting old events: %w", err)
	}
	return deleted, next, len(events), nil
}
