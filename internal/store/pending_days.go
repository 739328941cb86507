package store

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"callgate/internal/callback"
)

// The days a PENDING callback can be on.
//
// The worker finds PENDING callbacks by id (a claim) or by key (a key's
// line), keys without retain_day: without a day in its WHERE, MariaDB
// descends the key in every day partition of callback_log, about 40 with
// 30 days kept (10 in a fresh database: 7 empty days ahead and p_future),
// one descent per key per partition. Those statements name the range of
// days a PENDING callback can be on instead (pendingDays), so that
// MariaDB reads those partitions only: at steady state today's. The
// statements on a claimed row (a failure's record, a push-back) find it
// by id wherever it is: they are not on the drain's common path.
//
// The range:
//   - Until: every row is written on the database's CURRENT_DATE (the
//     intake's INSERT, a replay and retention's keeping move a row to
//     CURRENT_DATE too: MakePendingTx, keepRows), so none is on a later
//     day. (After a failover to a server whose clock is seconds behind
//     the old one's across a midnight, a row of the old one's new day is
//     past it for those seconds: a claim finds it all the same, see
//     below; a key's line misses it for those seconds.)
//   - From: a callback becomes PENDING only on the database's CURRENT_DATE
//     (written, replayed or moved then), so the earliest day holding a
//     PENDING callback never moves back: a floor read once stays true
//     until the clock itself goes back. The store reads it again every
//     pendingFloorEvery, on a connection of the pool, never in the
//     caller's transaction: it must see committed rows only (a
//     transaction that settled a PENDING callback and then rolls back
//     would otherwise leave a floor past it). A row written before a
//     midnight may commit after it, so the floor is never later than the
//     day an hour before the read (pendingCommitWithin): in the first
//     hour of a day, yesterday. Until it is first read, no floor is
//     named.
//
// Each partition a statement names costs it a descent per id or key: a
// claim of 64 ids took 1,258 µs of server time in 10 partitions, 737 in
// two and 407 in one (520 in the table before the partitions), measured
// with performance_schema on the benchmark's MariaDB.
//
// A claim names the range too; what it does not find there (a SUCCESS or
// FAILED callback announced again, of an older day) it looks for outside
// the range, in a statement of its own (ClaimCallbacksTx).

// pendingCommitWithin bounds how long a transaction that writes a PENDING
// callback stays open (the intake's is bounded by mysql.intake_timeout,
// the worker's by its handlers' deadlines, a replay's and retention's
// are chunks of rows): a row of a day is committed at the latest this
// long into the next day.
const pendingCommitWithin = "INTERVAL 1 HOUR"

// pendingFloorEvery is how often the floor is read again.
const pendingFloorEvery = 10 * time.Second

// pendingFloor caches the floor (see above): day, unix days of the
// earliest day to name (0: none known), and at, when it was read (unix
// nanoseconds).
type pendingFloor struct {
	day     atomic.Int64
	at      atomic.Int64
	reading atomic.Bool
}

// pendingRange is the condition naming the days a PENDING callback can be
// on, with its arguments.
type pendingRange struct {
	where string
	args  []any
}

// pendingUntil is the range's upper end (see above).
const pendingUntil = "retain_day <= CURRENT_DATE"

// pendingDays returns the range, reading the floor again first (on the
// pool) when it is older than pendingFloorEvery. A failed read leaves the
// floor as it was: it was true, and stays so; the next statement tries
// again.
func (s *Store) pendingDays(ctx context.Context) pendingRange {
	if at := s.floor.at.Load(); time.Since(time.Unix(0, at)) > pendingFloorEvery && s.floor.reading.CompareAndSwap(false, true) {
		if day, err := s.readPendingFloor(ctx); err == nil {
			var n int64 // p_old: none
			if !day.IsZero() {
				n = day.Unix() / 86400
			}
			s.floor.day.Store(n)
			s.floor.at.Store(time.Now().UnixNano())
		}
		s.floor.reading.Store(false)
	}
	day := s.floor.day.Load()
	if day == 0 {
		return pendingRange{where: pendingUntil}
	}
	from := time.Unix(day*86400, 0).UTC()
	return pendingRange{where: "retain_day >= ? AND " + pendingUntil, args: []any{from.Format(time.DateOnly)}}
}

// readPendingFloor reads the earliest day that may hold a PENDING
// callback: the first day of the first partition holding one, in
// partition order, or the day an hour ago (pendingCommitWithin) if that
// is earlier or none does. A PENDING row in p_old (every day before the
// migration's) gives no floor (zero). One statement: a probe of at most
// one row per partition.
func (s *Store) readPendingFloor(ctx context.Context) (time.Time, error) {
	parts, err := dayPartitions(ctx, s.sql, "callback_log")
	if err != nil {
		return time.Time{}, err
	}
	var q strings.Builder
	args := []any{}
	q.WriteString("SELECT DATE(NOW() - " + pendingCommitWithin + "), (SELECT MIN(n) FROM (")
	var from time.Time
	for i, p := range parts {
		if i > 0 {
			q.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&q, "(SELECT %d AS n FROM callback_log WHERE status = ?", i)
		args = append(args, callback.StatusPending)
		if !from.IsZero() {
			q.WriteString(" AND retain_day >= ?")
			args = append(args, from.Format(time.DateOnly))
		}
		if !p.Below.IsZero() {
			q.WriteString(" AND retain_day < ?")
			args = append(args, p.Below.Format(time.DateOnly))
		}
		q.WriteString(" LIMIT 1)")
		from = p.Below
	}
	q.WriteString(") probe)")
	var committed time.Time
	var first *int
	if err := s.sql.QueryRowContext(ctx, q.String(), args...).Scan(&committed, &first); err != nil {
		return time.Time{}, fmt.Errorf("error reading the earliest day of a PENDING callback: %w", translate(err))
	}
	switch {
	case first == nil:
		return committed, nil
	case *first == 0:
		return time.Time{}, nil
	default:
		if day := parts[*first-1].Below; day.Before(committed) {
			return day, nil
		}
		return committed, nil
	}
}
