package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"callgate/internal/callback"
)

// Dead letters are callbacks whose signature and merchant held but that
// their source's preset could not read (callback.Unreadable): the worker
// sets them FAILED without running a handler, and only a configuration fix
// and a replay can make anything of them. Retention deletes them after
// scheduler.retention.dead_letter_max_age (other FAILED callbacks stay until
// an operator acts) and counts them per source in dead_letters_dropped.

// unreadablePrefix is how a callback.Unreadable begins in
// callback_log.normalized: json.Marshal of its one field. A row whose
// unreadable event was read again after a configuration fix holds the
// event it was read into instead (SetNormalizedTx), and is no dead letter.
const unreadablePrefix = `{"unreadable":`

// isDeadLetterSQL is true for a row whose normalized event is an
// Unreadable, compared on the prefix alone so the BLOB is not sent back.
var isDeadLetterSQL = fmt.Sprintf(`LEFT(normalized, %d) = '%s'`, len(unreadablePrefix), unreadablePrefix)

// DeadLetterCursor is where a walk through the FAILED callbacks older than
// a cutoff stands, in (processed_at, id) order: the zero value is the
// start.
//
// Every FAILED callback behind it that is still there is no dead letter,
// and never becomes one: a callback's normalized event only ever turns from
// an Unreadable into a readable one, and a FAILED callback that is replayed
// and fails again gets a processed_at of then, ahead of any cursor. So a
// walk that resumes from its cursor sees every dead letter that came due
// since, without reading again, at each run, the FAILED callbacks that
// operators keep.
type DeadLetterCursor struct {
	ProcessedAt time.Time
	ID          int64
}

// DeleteDeadLettersBefore reads, from after, up to limit FAILED callbacks
// that went FAILED before cutoff, and deletes the dead letters among them
// with their attempts, adding them to their source's count in
// dead_letters_dropped in the same transaction. It returns how many it
// deleted, the cursor after the rows it read, and how many it read (less
// than limit: the walk is at its end for this cutoff).
//
// Candidates are read without locks on ix_callback_log_status_processed;
// then, in one transaction, those still eligible (a replay may have made
// one PENDING since) are locked and deleted, so that a concurrent replay
// waits and then finds nothing rather than keeping a callback whose
// attempts were erased. Their events stay in callback_event (keepEvents).
func (s *Store) DeleteDeadLettersBefore(ctx context.Context, cutoff time.Time, after DeadLetterCursor, limit int) (deleted int, next DeadLetterCursor, read int, err error) {
	var rows []struct {
		ID          int64
		ProcessedAt time.Time
		Dead        bool
	}
	q := `SELECT id, processed_at, COALESCE(` + isDeadLetterSQL + `, 0) AS dead FROM callback_log FORCE INDEX (ix_callback_log_status_processed)
		WHERE status = ? AND processed_at < ?`
	args := []any{callback.StatusFailed, cutoff}
	if after.ID != 0 {
		q += ` AND processed_at >= ? AND (processed_at > ? OR id > ?)`
		args = append(args, after.ProcessedAt, after.ProcessedAt, after.ID)
	}
	q += ` ORDER BY processed_at, id LIMIT ?`
	if err := s.q(ctx, nil).Raw(q, append(args, limit)...).Scan(&rows).Error; err != nil {
		return 0, after, 0, fmt.Errorf("error finding old dead letters: %w", translate(err))
	}
	if len(rows) == 0 {
		return 0, after, 0, nil
	}
	next = DeadLetterCursor{ProcessedAt: rows[len(rows)-1].ProcessedAt, ID: rows[len(rows)-1].ID}
	var ids []int64
	for _, r := range rows {
		if r.Dead {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return 0, next, len(rows), nil
	}
	err = s.InTx(ctx, func(tx *Tx) error {
		var eligible []struct {
			ID     int64
			Source string
		}
		if err := s.q(ctx, tx).Raw(`SELECT id, source FROM callback_log WHERE id IN ? AND status = ? AND processed_at < ? AND `+isDeadLetterSQL+` FOR UPDATE`,
			ids, callback.StatusFailed, cutoff).Scan(&eligible).Error; err != nil {
			return translate(err)
		}
		if len(eligible) == 0 {
			return nil
		}
		gone := make([]int64, len(eligible))
		bySource := map[string]int64{}
		for i, e := range eligible {
			gone[i] = e.ID
			bySource[e.Source]++
		}
		if err := s.keepEvents(ctx, tx, gone); err != nil {
			return err
		}
		if err := s.q(ctx, tx).Exec(`DELETE FROM callback_attempt WHERE log_id IN ?`, gone).Error; err != nil {
			return translate(err)
		}
		if err := s.q(ctx, tx).Exec(`DELETE FROM callback_log WHERE id IN ?`, gone).Error; err != nil {
			return translate(err)
		}
		// In the order of the sources, so that two runs at once (a lease
		// changing hands) cannot lock each other's counts crosswise.
		sources := make([]string, 0, len(bySource))
		for src := range bySource {
			sources = append(sources, src)
		}
		slices.Sort(sources)
		values := make([]string, len(sources))
		args := make([]any, 0, 2*len(sources))
		for i, src := range sources {
			values[i] = "(?, ?, UTC_TIMESTAMP(6))"
			args = append(args, src, bySource[src])
		}
		if err := s.q(ctx, tx).Exec(`INSERT INTO dead_letters_dropped (source, dropped, last_dropped_at) VALUES `+strings.Join(values, ", ")+
			` ON DUPLICATE KEY UPDATE dropped = dropped + VALUES(dropped), last_dropped_at = VALUES(last_dropped_at)`, args...).Error; err != nil {
			return translate(err)
		}
		deleted = len(gone)
		return nil
	})
	if err != nil {
		return 0, after, 0, fmt.Errorf("error deleting old dead letters: %w", err)
	}
	return deleted, next, len(rows), nil
}

// DroppedDeadLetters is one source's count of dead letters deleted by
// retention.
type DroppedDeadLetters struct {
	Source        string    `json:"source"`
	Dropped       int64     `json:"dropped"`
	LastDroppedAt time.Time `json:"last_dropped_at"`
}

// DeadLettersDropped reads every source's count, by source name.
func (s *Store) DeadLettersDropped(ctx context.Context) ([]DroppedDeadLetters, error) {
	var out []DroppedDeadLetters
	if err := s.q(ctx, nil).Raw(`SELECT source, dropped, last_dropped_at FROM dead_letters_dropped ORDER BY source`).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("error reading the dead letters dropped: %w", translate(err))
	}
	return out, nil
}
