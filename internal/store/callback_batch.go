package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"callgate/internal/callback"
)

// The worker's batch operations: a constant number of statements for a
// whole batch of callbacks, whatever its size.

// Key is a business key of a kind: the unit of per-key order.
type Key struct {
	Kind        string
	BusinessKey string
}

// KeyOf is cb's key.
func KeyOf(cb *callback.Log) Key { return Key{Kind: cb.Kind, BusinessKey: cb.BusinessKey} }

// keyTuples writes "(?, ?),(?, ?)..." for keys as (kind, business_key) and
// appends their values to args.
func keyTuples(q *strings.Builder, args []any, keys []Key) []any {
	for i, k := range keys {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?)")
		args = append(args, k.Kind, k.BusinessKey)
	}
	return args
}

// ClaimCallbacksTx reads the callbacks ids and locks their rows until tx
// ends, in id order, never waiting: a row another transaction holds (a
// duplicate delivery at work, a callback still in another batch) is left
// out and listed in held, for its caller to run it again later (once that
// transaction has settled it, or let it go). Ids that do not exist are in
// neither list. today is the database's UTC day at the claim (zero when
// nothing was claimed): the day the batch writes its outbox rows on
// (OutboxRow.RetainDay), so that marking them SENT reads their partition
// only.
//
// The ids come from announcements, which do not carry a row's day: the
// claim looks in the days a PENDING callback can be on (pendingDays),
// and only for the ids it did not find there (a SUCCESS or FAILED
// callback announced again, of an older day, or a row another
// transaction holds) in the other days, with a statement of its own.
func (s *Store) ClaimCallbacksTx(ctx context.Context, tx *Tx, ids []int64) (claimed []callback.Log, held []int64, today time.Time, err error) {
	days := s.pendingDays(ctx)
	claimed, today, err = s.claimIn(ctx, tx, ids, days.where, days.args)
	if err != nil || len(claimed) == len(ids) {
		return claimed, nil, today, err
	}
	missing := notIn(ids, claimed)
	more, moreToday, err := s.claimIn(ctx, tx, missing, "NOT ("+days.where+")", days.args)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	if len(more) > 0 {
		today = moreToday
		claimed = append(claimed, more...)
		slices.SortFunc(claimed, func(a, b callback.Log) int { return cmp.Compare(a.ID, b.ID) })
		if len(claimed) == len(ids) {
			return claimed, nil, today, nil
		}
		missing = notIn(ids, claimed)
	}
	// A plain read (READ COMMITTED: no lock) tells held rows from absent ones.
	if err := s.q(ctx, tx).Raw(`SELECT id FROM callback_log WHERE id IN ?`, missing).Scan(&held).Error; err != nil {
		return nil, nil, time.Time{}, fmt.Errorf("error claiming %d callbacks: %w", len(ids), translate(err))
	}
	return claimed, held, today, nil
}

// claimIn is ClaimCallbacksTx's locking read of ids in the days where
// names, and the database's day.
func (s *Store) claimIn(ctx context.Context, tx *Tx, ids []int64, where string, args []any) ([]callback.Log, time.Time, error) {
	var rows []struct {
		callback.Log
		ClaimDay time.Time `gorm:"column:claim_day"`
	}
	err := s.q(ctx, tx).Raw(`SELECT *, CURRENT_DATE AS claim_day FROM callback_log WHERE id IN ? AND `+where+` ORDER BY id FOR UPDATE SKIP LOCKED`,
		append([]any{ids}, args...)...).Scan(&rows).Error
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("error claiming %d callbacks: %w", len(ids), translate(err))
	}
	claimed := make([]callback.Log, len(rows))
	var today time.Time
	for i := range rows {
		claimed[i], today = rows[i].Log, rows[i].ClaimDay
	}
	return claimed, today, nil
}

// notIn returns the ids that are not those of cbs, in their order.
func notIn(ids []int64, cbs []callback.Log) []int64 {
	got := make(map[int64]bool, len(cbs))
	for _, cb := range cbs {
		got[cb.ID] = true
	}
	var out []int64
	for _, id := range ids {
		if !got[id] {
			out = append(out, id)
		}
	}
	return out
}

// LockKeysTx locks the callback_key rows of keys until tx ends, never
// waiting for a key another transaction holds: busy lists those. Rows of
// keys met for the first time are created (and so held).
func (s *Store) LockKeysTx(ctx context.Context, tx *Tx, keys []Key) (busy map[Key]bool, err error) {
	busy = map[Key]bool{}
	if len(keys) == 0 {
		return busy, nil
	}
	held, err := s.selectKeys(ctx, tx, keys, " FOR UPDATE SKIP LOCKED")
	if err != nil {
		return nil, err
	}
	var rest []Key
	for _, k := range keys {
		if !held[k] {
			rest = append(rest, k)
		}
	}
	if len(rest) == 0 {
		return busy, nil
	}
	// Not held: locked by another transaction, or not there yet. A plain
	// read tells which; the new ones are inserted (a key inserted by
	// another worker in between makes this wait for it, once per key ever).
	exist, err := s.selectKeys(ctx, tx, rest, "")
	if err != nil {
		return nil, err
	}
	var fresh []Key
	for _, k := range rest {
		if exist[k] {
			busy[k] = true
		} else {
			fresh = append(fresh, k)
		}
	}
	if len(fresh) == 0 {
		return busy, nil
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO callback_key (kind, business_key, locked_at) VALUES `)
	now := time.Now().UTC()
	args := make([]any, 0, len(fresh)*3)
	for i, k := range fresh {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?, ?)")
		args = append(args, k.Kind, k.BusinessKey, now)
	}
	q.WriteString(` ON DUPLICATE KEY UPDATE locked_at = VALUES(locked_at)`)
	if err := s.q(ctx, tx).Exec(q.String(), args...).Error; err != nil {
		return nil, fmt.Errorf("error creating %d key rows: %w", len(fresh), translate(err))
	}
	return busy, nil
}

// keyRefreshAfter is how old a held key's locked_at may grow before the
// holder writes it again: the retention job forgets keys not locked for
// scheduler.retention.max_age (30 days by default), and a key in daily use
// must never look unused, while writing it at every lock would cost a
// statement per batch.
const keyRefreshAfter = time.Hour

func (s *Store) selectKeys(ctx context.Context, tx *Tx, keys []Key, lock string) (map[Key]bool, error) {
	var q strings.Builder
	q.WriteString(`SELECT kind, business_key, locked_at FROM callback_key WHERE (kind, business_key) IN (`)
	args := keyTuples(&q, nil, keys)
	q.WriteString(")")
	q.WriteString(lock)
	var rows []struct {
		Key
		LockedAt time.Time
	}
	if err := s.q(ctx, tx).Raw(q.String(), args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("error locking %d keys: %w", len(keys), translate(err))
	}
	out := make(map[Key]bool, len(rows))
	now := time.Now().UTC()
	var stale []Key
	for _, k := range rows {
		out[k.Key] = true
		if lock != "" && now.Sub(k.LockedAt) > keyRefreshAfter {
			stale = append(stale, k.Key)
		}
	}
	// Held now: refresh them, one statement per kind naming the primary
	// key's columns (see DeleteKeysBefore).
	byKind := map[string][]string{}
	for _, k := range stale {
		byKind[k.Kind] = append(byKind[k.Kind], k.BusinessKey)
	}
	for kind, keys := range byKind {
		err := s.q(ctx, tx).Exec(`UPDATE callback_key SET locked_at = ? WHERE kind = ? AND business_key IN ?`, now, kind, keys).Error
		if err != nil {
			return nil, fmt.Errorf("error refreshing %d keys: %w", len(keys), translate(err))
		}
	}
	return out, nil
}

// MarkSucceededManyTx settles callbacks cbs (as claimed: their rows'
// days are known) as SUCCESS after their attempts, attempts[i] cbs[i]'s,
// with the attempts' rows: two statements for the whole batch.
func (s *Store) MarkSucceededManyTx(ctx context.Context, tx *Tx, cbs []callback.Log, attempts []callback.Attempt) error {
	if len(attempts) == 0 {
		return nil
	}
	ids := make([]int64, len(cbs))
	days := make([]time.Time, len(cbs))
	for i := range cbs {
		ids[i], days[i] = cbs[i].ID, cbs[i].RetainDay
	}
	for _, c := range byDay("id", ids, days) {
		err := s.q(ctx, tx).Exec(`UPDATE callback_log SET status = ?, attempts = attempts + 1, processed_at = ?, last_error = NULL WHERE `+c.where,
			append([]any{callback.StatusSuccess, attempts[0].FinishedAt}, c.args...)...).Error
		if err != nil {
			return fmt.Errorf("error marking %d callbacks SUCCESS: %w", len(ids), translate(err))
		}
	}
	if err := s.q(ctx, tx).CreateInBatches(attempts, len(attempts)).Error; err != nil {
		return fmt.Errorf("error recording %d attempts: %w", len(attempts), translate(err))
	}
	return nil
}

// PushBackMany is PushBack for many callbacks at once.
func (s *Store) PushBackMany(ctx context.Context, ids []int64, due time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.q(ctx, nil).Model(&callback.Log{}).
		Where("id IN ? AND status = ? AND next_attempt_at < ?", ids, callback.StatusPending, due).
		Update("next_attempt_at", due).Error
	if err != nil {
		return fmt.Errorf("error pushing back %d callbacks: %w", len(ids), translate(err))
	}
	return nil
}

// Pending is a PENDING callback in its key's line.
type Pending struct {
	ID int64
	// Awaiting: it waits for what it depends on (callback.NotYet) and holds
	// up only the other awaiting callbacks of its key.
	Awaiting bool
}

// PendingOfKeysTx returns, for each of keys, its PENDING callbacks up to
// maxID, in id order: a key's callbacks run only in this order, each when
// the ones before it that hold it up are settled (see EarlierPendingTx).
//
// Every statement that looks callbacks up by key names the key index
// (FORCE INDEX): left to itself, MariaDB chose an index on status, or the
// primary key by id, for a batch's 64 keys whenever it estimated the
// PENDING rows to be few, and then read every PENDING row (311 rows per
// statement in the open loop at 400/s), a cost that grows with the
// backlog.
func (s *Store) PendingOfKeysTx(ctx context.Context, tx *Tx, keys []Key, maxID int64) (map[Key][]Pending, error) {
	out := make(map[Key][]Pending, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	days := s.pendingDays(ctx)
	var q strings.Builder
	q.WriteString(`SELECT kind, business_key, id, awaiting FROM callback_log FORCE INDEX (ix_callback_log_key) WHERE status = ? AND id <= ? AND ` + days.where + ` AND (kind, business_key) IN (`)
	args := keyTuples(&q, append([]any{callback.StatusPending, maxID}, days.args...), keys)
	q.WriteString(`) ORDER BY id`)
	var rows []struct {
		Kind        string
		BusinessKey string
		ID          int64
		Awaiting    bool
	}
	if err := s.q(ctx, tx).Raw(q.String(), args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("error checking the order of %d keys: %w", len(keys), translate(err))
	}
	for _, r := range rows {
		k := Key{Kind: r.Kind, BusinessKey: r.BusinessKey}
		out[k] = append(out[k], Pending{ID: r.ID, Awaiting: r.Awaiting})
	}
	return out, nil
}

// NextPendingOfKeys returns, for each of keys that has one, what may run
// next once the batch that held the keys is settled (id, kind, business
// key and trace id): its earliest PENDING callback and, when that one
// awaits what it depends on, also its earliest one that does not (see
// NextPendingOfKey). One statement.
func (s *Store) NextPendingOfKeys(ctx context.Context, keys []Key) ([]callback.Log, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	days := s.pendingDays(ctx)
	var q strings.Builder
	q.WriteString(`SELECT c.id, c.kind, c.business_key, c.trace_id FROM callback_log c JOIN (
		SELECT MIN(id) AS id FROM callback_log FORCE INDEX (ix_callback_log_key) WHERE status = ? AND ` + days.where + ` AND (kind, business_key) IN (`)
	args := keyTuples(&q, append([]any{callback.StatusPending}, days.args...), keys)
	q.WriteString(`) GROUP BY kind, business_key
		UNION SELECT MIN(id) AS id FROM callback_log FORCE INDEX (ix_callback_log_key) WHERE status = ? AND awaiting = 0 AND ` + days.where + ` AND (kind, business_key) IN (`)
	args = keyTuples(&q, append(append(args, callback.StatusPending), days.args...), keys)
	q.WriteString(`) GROUP BY kind, business_key) m ON c.id = m.id AND ` + days.where + ` ORDER BY c.id`)
	args = append(args, days.args...)
	var rows []callback.Log
	if err := s.q(ctx, nil).Raw(q.String(), args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("error reading the next callbacks of %d keys: %w", len(keys), translate(err))
	}
	return rows, nil
}
