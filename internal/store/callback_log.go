package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm/clause"

	"callgate/internal/callback"
)

// insertColumns and insertValues are one callback_log row as the intake
// writes it (insertBatchSQL, for a batch or a single row; insertArgs fills
// the placeholders in this order).
const (
	insertColumns = `INSERT INTO callback_log
 (source, kind, event_id, business_key, status, attempts, payload, normalized, headers, trace_id, received_at, next_attempt_at, origin) VALUES `
	insertValues = `(?, ?, ?, ?, 'PENDING', 0, ?, ?, ?, ?, ?, ?, ?)`
)

// insertBatchSQL is the intake's callback_log INSERT (writeIntake): n
// rows, every one new. It has no ON DUPLICATE KEY clause: callback_log's
// only unique key is its primary key (id, retain_day) since migration 025
// (dedupe is callback_event's), so such a clause could only ever absorb a
// row given an id already in use (the partitioned table's AUTO_INCREMENT
// has been seen to hand one out), answering the stored row for it and
// losing the new one; without it that is a duplicate-key error, and
// writeIntake writes the transaction again with new ids.
func insertBatchSQL(n int) string {
	var q strings.Builder
	q.Grow(len(insertColumns) + n*(len(insertValues)+1))
	q.WriteString(insertColumns)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(insertValues)
	}
	return q.String()
}

// returningSQL makes insertBatchSQL answer each row as stored (MariaDB
// 10.5+), so the batch needs no read-back. The columns are those the
// read-back selects, with the source.
const returningSQL = ` RETURNING id, source, event_id, trace_id, received_at`

// insertArgCount is how many values insertArgs appends per row.
const insertArgCount = 11

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
	var normalized any
	if len(l.Normalized) > 0 {
		normalized = []byte(l.Normalized)
	}
	origin := l.Origin
	if origin == "" {
		origin = callback.OriginNotify
	}
	return append(args, l.Source, l.Kind, l.EventID, l.BusinessKey, l.Payload, normalized, headers, l.TraceID, receivedAt(l), due, origin)
}

// receivedAt is l's received_at as the column stores it (DATETIME(6),
// truncated whatever the server would do with more digits), so that the
// intake recognises the stored row as its own (pendingInsert.mine).
func receivedAt(l *callback.Log) time.Time { return l.ReceivedAt.Truncate(time.Microsecond) }

// InsertResult is what an intake insert answers.
type InsertResult struct {
	ID        int64
	Duplicate bool
}

// InsertCallback stores l as PENDING and returns its id, or the id of the
// callback already stored for the same source and event id (Duplicate),
// also when retention deleted that callback's row (callback_event). The
// row is committed when it returns without error.
//
// With durability replica it fails with ErrNotReplicated unless a replica
// acknowledged it (replication.go).
//
// A row committed on the primary alone is answered with ErrNotReplicated
// and its result (its ID), so that it is still announced.
func (s *Store) InsertCallback(ctx context.Context, l *callback.Log) (res InsertResult, err error) {
	err = s.replicated(ctx, func() (bool, error) {
		res, err = s.insertOne(ctx, l, s.canReturn(ctx))
		return err == nil && !res.Duplicate, err
	})
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return InsertResult{}, err
	}
	return res, err
}

// StoredEventIDs returns which of eventIDs source has stored, on
// callback_event: also the events whose callback_log row retention
// deleted. It is the intake's check, once a source's dead letters are over
// their limit, of which are resends of callbacks already stored.
func (s *Store) StoredEventIDs(ctx context.Context, source string, eventIDs []string) (map[string]bool, error) {
	var found []string
	if err := s.q(ctx, nil).Raw(`SELECT event_id FROM callback_event WHERE source = ? AND event_id IN ?`, source, eventIDs).
		Scan(&found).Error; err != nil {
		return nil, fmt.Errorf("error finding stored callbacks of %s: %w", source, translate(err))
	}
	stored := make(map[string]bool, len(found))
	for _, id := range found {
		stored[id] = true
	}
	return stored, nil
}

// GetCallback loads one callback_log row (ErrNotFound when there is none).
func (s *Store) GetCallback(ctx context.Context, id int64) (*callback.Log, error) {
	var l callback.Log
	if err := s.q(ctx, nil).Take(&l, id).Error; err != nil {
		return nil, fmt.Errorf("error loading callback log %d: %w", id, translate(err))
	}
	return &l, nil
}

// ClaimCallbackTx reads callback id and locks its row until tx ends,
// waiting for a transaction that holds it (an operator's replay of a
// callback being processed waits for it). ErrNotFound when there is none.
// withPayload false leaves the payload and headers out.
func (s *Store) ClaimCallbackTx(ctx context.Context, tx *Tx, id int64, withPayload bool) (*callback.Log, error) {
	return s.claimCallback(ctx, tx, id, withPayload, clause.Locking{Strength: "UPDATE"})
}

// TryClaimCallbackTx is the worker's claim before it runs a callback:
// ClaimCallbackTx with the payload, never waiting. A row another
// transaction holds (a duplicate delivery at work) is ErrLockNotAvailable,
// and the callback runs again later rather than right after that
// transaction, which may have left it to be retried later.
func (s *Store) TryClaimCallbackTx(ctx context.Context, tx *Tx, id int64) (*callback.Log, error) {
	return s.claimCallback(ctx, tx, id, true, clause.Locking{Strength: "UPDATE", Options: "NOWAIT"})
}

// claimCallback looks for the row in the days a PENDING callback can be
// on first, then in the others (as ClaimCallbacksTx): by id alone, a
// statement descends the primary key in every day partition.
func (s *Store) claimCallback(ctx context.Context, tx *Tx, id int64, withPayload bool, lock clause.Locking) (*callback.Log, error) {
	days := s.pendingDays(ctx)
	var err error
	for _, where := range []string{days.where, "NOT (" + days.where + ")"} {
		var l callback.Log
		q := s.q(ctx, tx).Clauses(lock).Where(where, days.args...)
		if !withPayload {
			q = q.Omit("payload", "headers")
		}
		if err = translate(q.Take(&l, id).Error); err == nil {
			return &l, nil
		}
		if !errors.Is(err, ErrNotFound) {
			break
		}
	}
	return nil, fmt.Errorf("error claiming callback log %d: %w", id, err)
}

// EarlierPendingTx reports whether a callback of cb's kind and key with a
// smaller id is still PENDING and holds cb up: cb must then wait its turn.
// A callback that awaits what it depends on (callback.NotYet) holds up
// only the other awaiting ones: the later callbacks of its key run
// meanwhile, and awaiting callbacks keep their order among themselves.
func (s *Store) EarlierPendingTx(ctx context.Context, tx *Tx, cb *callback.Log) (bool, error) {
	var earlier []int64
	days := s.pendingDays(ctx)
	err := s.q(ctx, tx).Raw(`SELECT id FROM callback_log FORCE INDEX (ix_callback_log_key) WHERE business_key = ? AND kind = ? AND status = ? AND id < ? AND (awaiting = 0 OR ?) AND `+days.where+` LIMIT 1`,
		append([]any{cb.BusinessKey, cb.Kind, callback.StatusPending, cb.ID, cb.Awaiting}, days.args...)...).Scan(&earlier).Error
	if err != nil {
		return false, fmt.Errorf("error checking the order of key %q: %w", cb.BusinessKey, translate(err))
	}
	return len(earlier) > 0, nil
}

// MarkSucceededTx settles callback cb (as claimed in tx: its row's day is
// known) as SUCCESS after attempt a, with the attempt's row: a batch of
// one (MarkSucceededManyTx).
func (s *Store) MarkSucceededTx(ctx context.Context, tx *Tx, cb *callback.Log, a *callback.Attempt) error {
	return s.MarkSucceededManyTx(ctx, tx, []callback.Log{*cb}, []callback.Attempt{*a})
}

// Failure is a failed attempt to record: the callback goes back to PENDING
// until NextAttemptAt, or to FAILED when Final.
type Failure struct {
	Attempt       callback.Attempt
	Final         bool
	NextAttemptAt time.Time
	// Reason is the handler's code for a FAILED callback (metrics).
	Reason string
	// Awaiting: a retry because the callback came before what it depends
	// on (callback.NotYet); it does not hold up its key meanwhile.
	Awaiting bool
}

// ErrStale: the callback was settled by another delivery meanwhile (its
// row no longer has the attempts a failure counts on).
var ErrStale = errors.New("callback settled by another delivery")

// RecordFailure writes a failed attempt in its own short transaction, only
// if nobody settled the callback meanwhile (a duplicate delivery running at
// the same time): stale reports that case, and then nothing is written.
func (s *Store) RecordFailure(ctx context.Context, f Failure) (stale bool, err error) {
	err = s.InTx(ctx, func(tx *Tx) error { return s.RecordFailureTx(ctx, tx, f) })
	if errors.Is(err, ErrStale) {
		return true, nil
	}
	return false, err
}

// RecordFailureTx writes a failed attempt in tx: the callback back to
// PENDING until NextAttemptAt (and not run before it: retry_after), or
// FAILED when Final, and the attempt's row. The callback must still be
// PENDING after the attempts the failure counts; it is when tx holds its
// row since the claim.
func (s *Store) RecordFailureTx(ctx context.Context, tx *Tx, f Failure) error {
	a := f.Attempt
	updates := map[string]any{"attempts": a.Attempt, "last_error": a.Error}
	if f.Final {
		updates["status"] = callback.StatusFailed
		updates["processed_at"] = a.FinishedAt
	} else {
		updates["next_attempt_at"] = f.NextAttemptAt
		updates["retry_after"] = f.NextAttemptAt
		updates["awaiting"] = f.Awaiting
	}
	// By id alone, not in the days a PENDING callback can be on: the row
	// is the claim's, found wherever it is.
	res := s.q(ctx, tx).Model(&callback.Log{}).
		Where("id = ? AND status = ? AND attempts = ?", a.LogID, callback.StatusPending, a.Attempt-1).Updates(updates)
	if res.Error != nil {
		return fmt.Errorf("error recording failed attempt of callback log %d: %w", a.LogID, translate(res.Error))
	}
	if res.RowsAffected == 0 {
		return ErrStale
	}
	if err := s.InsertAttemptTx(ctx, tx, &a); err != nil {
		return fmt.Errorf("error recording failed attempt of callback log %d: %w", a.LogID, err)
	}
	return nil
}

// savepointHandler names the savepoint before a handler runs.
const savepointHandler = "callgate_handler"

// SavepointTx marks the point in tx that RollbackToSavepointTx returns
// to: what the handler then does can be undone while the claim's row
// locks stay.
func (s *Store) SavepointTx(ctx context.Context, tx *Tx) error {
	if err := s.q(ctx, tx).SavePoint(savepointHandler).Error; err != nil {
		return fmt.Errorf("error setting a savepoint: %w", translate(err))
	}
	return nil
}

// RollbackToSavepointTx undoes what tx did since SavepointTx.
func (s *Store) RollbackToSavepointTx(ctx context.Context, tx *Tx) error {
	if err := s.q(ctx, tx).RollbackTo(savepointHandler).Error; err != nil {
		return fmt.Errorf("error rolling back to the savepoint: %w", translate(err))
	}
	return nil
}

// SetNormalizedTx stores callback id's canonical event, read again from
// its raw body (a notification that could not be read when it arrived).
func (s *Store) SetNormalizedTx(ctx context.Context, tx *Tx, id int64, normalized []byte) error {
	if err := s.q(ctx, tx).Exec(`UPDATE callback_log SET normalized = ? WHERE id = ?`, normalized, id).Error; err != nil {
		return fmt.Errorf("error storing the event of callback log %d: %w", id, translate(err))
	}
	return nil
}

// PushBack moves a PENDING callback's next_attempt_at to due (never
// earlier than it is): the safety net of a deferred callback.
func (s *Store) PushBack(ctx context.Context, id int64, due time.Time) error {
	err := s.q(ctx, nil).Model(&callback.Log{}).
		Where("id = ? AND status = ? AND next_attempt_at < ?", id, callback.StatusPending, due).
		Update("next_attempt_at", due).Error
	if err != nil {
		return fmt.Errorf("error pushing back callback log %d: %w", id, translate(err))
	}
	return nil
}

// NextPendingOfKey returns what may run next of kind and key once the
// callback notID is settled (id, kind and trace id only): the earliest
// PENDING callback other than notID, and, when that one awaits what it
// depends on (it holds up only other awaiting ones), also the earliest
// one that does not await. Empty when there is none.
func (s *Store) NextPendingOfKey(ctx context.Context, kind, key string, notID int64) ([]callback.Log, error) {
	var next []callback.Log
	days := s.pendingDays(ctx)
	args := append([]any{key, kind, notID, callback.StatusPending}, days.args...)
	args = append(append(args, key, kind, notID, callback.StatusPending), days.args...)
	err := s.q(ctx, nil).Raw(`(SELECT id, kind, trace_id FROM callback_log FORCE INDEX (ix_callback_log_key)
		WHERE business_key = ? AND kind = ? AND id <> ? AND status = ? AND `+days.where+` ORDER BY id LIMIT 1)
		UNION (SELECT id, kind, trace_id FROM callback_log FORCE INDEX (ix_callback_log_key)
		WHERE business_key = ? AND kind = ? AND id <> ? AND status = ? AND awaiting = 0 AND `+days.where+` ORDER BY id LIMIT 1)`,
		args...).Scan(&next).Error
	if err != nil {
		return nil, fmt.Errorf("error finding the next callback of key %q: %w", key, translate(err))
	}
	return next, nil
}

// ClaimDue claims up to limit PENDING callbacks of kind that are due at
// now, oldest due first, skipping rows other transactions hold, and pushes
// their next_attempt_at to pushTo, so they are claimed again only if still
// not processed then. It returns them with id, kind and trace id.
func (s *Store) ClaimDue(ctx context.Context, kind string, now, pushTo time.Time, limit int) ([]callback.Log, error) {
	var due []callback.Log
	err := s.InTx(ctx, func(tx *Tx) error {
		// READ COMMITTED: the locking read takes no gap locks, only the
		// rows it returns.
		days := s.pendingDays(ctx)
		err := s.q(ctx, tx).Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"}).
			Select("id", "kind", "trace_id").
			Where("status = ? AND next_attempt_at <= ? AND kind = ? AND (retry_after IS NULL OR retry_after <= ?)", callback.StatusPending, now, kind, now).
			Where(days.where, days.args...).
			Order("next_attempt_at").Limit(limit).Find(&due).Error
		if err != nil || len(due) == 0 {
			return translate(err)
		}
		ids := make([]int64, len(due))
		for i, d := range due {
			ids[i] = d.ID
		}
		return translate(s.q(ctx, tx).Model(&callback.Log{}).Where("id IN ?", ids).Update("next_attempt_at", pushTo).Error)
	})
	if err != nil {
		return nil, fmt.Errorf("error claiming due callbacks: %w", err)
	}
	return due, nil
}

// ReleaseStuck makes due now (up to limit) PENDING callbacks whose
// next_attempt_at is missing or later than horizon, or whose retry_after
// is later than horizon (a clock that ran ahead), and returns how many.
// The scan is a plain read; the update is by id, so no range is locked.
func (s *Store) ReleaseStuck(ctx context.Context, now, horizon time.Time, limit int) (int, error) {
	var ids []int64
	err := s.q(ctx, nil).Model(&callback.Log{}).
		Where("status = ? AND (next_attempt_at IS NULL OR next_attempt_at > ? OR retry_after > ?)", callback.StatusPending, horizon, horizon).
		Limit(limit).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return 0, translate(err)
	}
	err = s.q(ctx, nil).Exec(`UPDATE callback_log SET next_attempt_at = ?, retry_after = IF(retry_after > ?, NULL, retry_after)
		WHERE id IN ? AND status = ? AND (next_attempt_at IS NULL OR next_attempt_at > ? OR retry_after > ?)`,
		now, horizon, ids, callback.StatusPending, horizon, horizon).Error
	if err != nil {
		return 0, fmt.Errorf("error releasing stuck callbacks: %w", translate(err))
	}
	return len(ids), nil
}

// MakePendingTx turns callbacks back to PENDING, due at due, with a fresh
// retry budget (attempts_base = attempts) and no backoff to wait for: an
// operator's replay. They and their attempts move to today's partition
// (retain_day) in the same transaction: a SUCCESS callback of a day that
// retention is about to drop (it moves only what is not SUCCESS, then
// drops the day) is never dropped once PENDING again, and it stays
// scheduler.retention.max_age from now.
func (s *Store) MakePendingTx(ctx context.Context, tx *Tx, ids []int64, due time.Time) error {
	err := s.q(ctx, tx).Exec(`UPDATE callback_log SET status = ?, attempts_base = attempts, next_attempt_at = ?, retry_after = NULL, processed_at = NULL, awaiting = 0,
		retain_day = CURRENT_DATE WHERE id IN ?`, callback.StatusPending, due, ids).Error
	if err == nil {
		err = s.q(ctx, tx).Exec(`UPDATE callback_attempt SET retain_day = CURRENT_DATE WHERE log_id IN ? AND retain_day < CURRENT_DATE`, ids).Error
	}
	if err != nil {
		return fmt.Errorf("error making callbacks PENDING: %w", translate(err))
	}
	return nil
}
