package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"callgate/internal/callback"
)

// DayPartitioned are the tables partitioned by day on retain_day
// (migration 025): RANGE COLUMNS(retain_day), a partition pYYYYMMDD per
// UTC day (VALUES LESS THAN the next day), p_old for every day before
// the migration's, and p_future (MAXVALUE) last. A row's retain_day is
// the UTC day it was written (DEFAULT (CURRENT_DATE)), or the day
// retention or a replay moved it to (keepDay, MakePendingTx).
var DayPartitioned = []string{"callback_log", "callback_attempt", "outbox"}

// partitionFuture is the last partition of each day-partitioned table.
const partitionFuture = "p_future"

// partitionsLock names the lock (GET_LOCK, per database) that serializes
// the partition DDL of every worker: the partitions job's splits and
// retention's drops.
const partitionsLock = "callgate-partitions."

// partitionsLockQueue is how long a run waits for another's partition
// DDL to end (GET_LOCK's timeout). Waiting for the named lock holds no
// table's lock, so it may be long: under load three tables' splits take
// more than the DDL's own lock_wait_timeout (lockWait, 1 s), and a
// second worker's run, the lease being lost meanwhile, must not fail for
// that.
const partitionsLockQueue = time.Minute

// DayPartition is one partition of a day-partitioned table.
type DayPartition struct {
	Name string
	// Below is the partition's VALUES LESS THAN: the day after its last
	// one; zero for p_future (MAXVALUE).
	Below time.Time
}

// DayPartitions returns table's partitions in order (information_schema).
func (s *Store) DayPartitions(ctx context.Context, table string) ([]DayPartition, error) {
	return dayPartitions(ctx, s.sql, table)
}

// querier is what dayPartitions reads with: the pool or one connection.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func dayPartitions(ctx context.Context, q querier, table string) ([]DayPartition, error) {
	rs, err := q.QueryContext(ctx, `SELECT PARTITION_NAME, PARTITION_DESCRIPTION FROM information_schema.PARTITIONS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY PARTITION_ORDINAL_POSITION`, table)
	if err != nil {
		return nil, fmt.Errorf("error reading the partitions of %s: %w", table, translate(err))
	}
	defer rs.Close()
	var parts []DayPartition
	for rs.Next() {
		var name, desc sql.NullString
		if err := rs.Scan(&name, &desc); err != nil {
			return nil, fmt.Errorf("error reading the partitions of %s: %w", table, translate(err))
		}
		if !name.Valid {
			return nil, fmt.Errorf("table %s is not partitioned (migration 025 not applied?)", table)
		}
		p := DayPartition{Name: name.String}
		if d := strings.Trim(desc.String, "'"); d != "MAXVALUE" {
			if p.Below, err = time.Parse(time.DateOnly, d); err != nil {
				return nil, fmt.Errorf("partition %s of %s: unexpected bound %q", name.String, table, desc.String)
			}
		}
		parts = append(parts, p)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("error reading the partitions of %s: %w", table, translate(err))
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("table %s not found", table)
	}
	if last := parts[len(parts)-1]; last.Name != partitionFuture || !last.Below.IsZero() {
		return nil, fmt.Errorf("table %s: last partition is %s, not %s (MAXVALUE)", table, last.Name, partitionFuture)
	}
	return parts, nil
}

// DayPartitionName is the name of the partition of UTC day d.
func DayPartitionName(d time.Time) string { return "p" + d.Format("20060102") }

// utcDay is the UTC day t falls on, at midnight.
func utcDay(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// partitionDDL runs fn on a connection of its own, holding the
// partitions lock, with lock_wait_timeout at lockWait (whole seconds, at
// least 1).
//
// An ALTER waits for the metadata lock of every open transaction on its
// table, and every statement on that table after it waits behind it.
// With a short wait a long transaction (an operator's open session, a
// backup) makes the DDL give up (an error: the job tries again at its
// next run) instead of queueing every intake INSERT behind it for the
// server's lock_wait_timeout (a day by default). Runs on several workers
// at once are serialized by the lock, and each re-reads the partitions
// under it: the second (waiting up to partitionsLockQueue for the
// first) finds nothing left to do.
func (s *Store) partitionDDL(ctx context.Context, lockWait time.Duration, fn func(conn *sql.Conn) error) error {
	conn, err := s.sql.Conn(ctx)
	if err != nil {
		return fmt.Errorf("error preparing partition changes: %w", translate(err))
	}
	discard := false
	defer func() {
		if discard {
			// Its session settings are not the pool's any more.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}()
	var prevWait int
	if err := conn.QueryRowContext(ctx, `SELECT @@SESSION.lock_wait_timeout`).Scan(&prevWait); err != nil {
		return fmt.Errorf("error preparing partition changes: %w", translate(err))
	}
	secs := max(1, int(lockWait/time.Second))
	discard = true
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`SET SESSION lock_wait_timeout = %d`, secs)); err != nil {
		return fmt.Errorf("error preparing partition changes: %w", translate(err))
	}
	var got sql.NullInt64
	queue := int(partitionsLockQueue / time.Second)
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(CONCAT(?, DATABASE()), ?)`, partitionsLock, queue).Scan(&got); err != nil {
		return fmt.Errorf("error locking partitions: %w", translate(err))
	}
	if got.Int64 != 1 {
		return fmt.Errorf("partitions: another worker holds the partitions lock for more than %s", partitionsLockQueue)
	}
	err = fn(conn)
	if _, rerr := conn.ExecContext(ctx, `DO RELEASE_LOCK(CONCAT(?, DATABASE()))`, partitionsLock); rerr != nil {
		return err
	}
	if _, serr := conn.ExecContext(ctx, fmt.Sprintf(`SET SESSION lock_wait_timeout = %d`, prevWait)); serr == nil {
		discard = false
	}
	return err
}

// EnsureDayPartitions makes every day-partitioned table have one
// partition per UTC day from today through today + daysAhead, splitting
// p_future with ALTER TABLE ... REORGANIZE PARTITION: the days from the
// table's highest bound on (a table whose last split is older than
// today, the workers having been down, gets a partition for each day
// missed too). It is idempotent: a day that has its partition is left
// alone. It returns how many partitions it created. The DDL runs under
// partitionDDL (lockWait, the partitions lock).
//
// An empty p_future splits without copying a row (the migration made
// today's partition and days ahead, so it stays empty while the job keeps
// up). One that holds rows (the workers were down longer than days
// ahead: rows of days without their partition landed there) is split all
// the same, its rows copied into their day's partitions, so that
// retention can drop them with their day; the copy holds writes to the
// table while it runs. full is told each such table and its row count
// first (nil: not told).
func (s *Store) EnsureDayPartitions(ctx context.Context, today time.Time, daysAhead int, lockWait time.Duration, full func(table string, rows int64)) (created int, err error) {
	today = utcDay(today)
	last := today.AddDate(0, 0, daysAhead)
	err = s.partitionDDL(ctx, lockWait, func(conn *sql.Conn) error {
		for _, table := range DayPartitioned {
			n, err := ensureTableDays(ctx, conn, table, today, last, full)
			created += n
			if err != nil {
				return err
			}
		}
		return nil
	})
	return created, err
}

// ensureTableDays splits table's p_future so that it has a partition per
// day up to last.
func ensureTableDays(ctx context.Context, conn *sql.Conn, table string, today, last time.Time, full func(string, int64)) (int, error) {
	parts, err := dayPartitions(ctx, conn, table)
	if err != nil {
		return 0, err
	}
	// The highest bound below MAXVALUE: the first day without a partition.
	from := today
	if len(parts) > 1 {
		from = parts[len(parts)-2].Below
	}
	var defs []string
	for d := from; !d.After(last); d = d.AddDate(0, 0, 1) {
		defs = append(defs, fmt.Sprintf("PARTITION %s VALUES LESS THAN ('%s')", DayPartitionName(d), d.AddDate(0, 0, 1).Format(time.DateOnly)))
	}
	if len(defs) == 0 {
		return 0, nil
	}
	var rows int64
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"` PARTITION ("+partitionFuture+")").Scan(&rows); err != nil {
		return 0, fmt.Errorf("error counting the rows of %s in %s: %w", table, partitionFuture, translate(err))
	}
	if rows > 0 && full != nil {
		full(table, rows)
	}
	defs = append(defs, "PARTITION "+partitionFuture+" VALUES LESS THAN (MAXVALUE)")
	q := "ALTER TABLE `" + table + "` REORGANIZE PARTITION " + partitionFuture + " INTO (" + strings.Join(defs, ", ") + ")"
	if _, err := conn.ExecContext(ctx, q); err != nil {
		return 0, fmt.Errorf("error creating the partitions of %s from %s to %s: %w", table, from.Format(time.DateOnly), last.Format(time.DateOnly), translate(err))
	}
	return len(defs) - 1, nil
}

// DroppedDay is one day (one bound) that DropDaysBefore dropped.
type DroppedDay struct {
	// Below is the partitions' bound: the day after the last day they
	// held (p_old: the migration's day).
	Below time.Time
	// Partitions are the partitions dropped, as table.partition.
	Partitions []string
	// RowsEstimate is what the tables' statistics said the partitions
	// held (information_schema.PARTITIONS.TABLE_ROWS): an estimate, not
	// a count.
	RowsEstimate int64
	// KeptCallbacks and KeptOutbox are the rows of the day that were kept
	// (moved to today's partition before the drop, by keepDay).
	KeptCallbacks, KeptOutbox int
}

// ErrDayNotEmptied: a day still held a callback other than SUCCESS or an
// outbox row not SENT after its rows were moved, which only a writer that
// does not move what it makes PENDING again can cause (a worker older than
// retention by partition, during a rolling upgrade). The day is left for
// the next run.
var ErrDayNotEmptied = errors.New("a day to drop still holds rows to keep")

// DropDaysBefore drops, in each day-partitioned table, every partition
// whose days all end at or before cutoff (its bound is at most cutoff:
// p_old and pYYYYMMDD alike, never today's, never p_future), oldest
// first, each with ALTER TABLE ... DROP PARTITION (one statement whatever
// its row count). Before a day is dropped, what it must not lose is
// moved to today's partition (keepDay, in transactions of up to limit
// rows), and checked gone; then its partitions are dropped under
// partitionDDL (lockWait, the partitions lock: serialized with the
// splits). It returns the days dropped; a day it could not drop ends the
// run with an error, the days before it dropped.
func (s *Store) DropDaysBefore(ctx context.Context, cutoff time.Time, limit int, lockWait time.Duration) ([]DroppedDay, error) {
	// Never today's partition by the database's clock (the one rows are
	// written to and kept rows moved to), whatever the worker's says.
	var today time.Time
	if err := s.sql.QueryRowContext(ctx, `SELECT CURRENT_DATE`).Scan(&today); err != nil {
		return nil, fmt.Errorf("error reading the database's day: %w", translate(err))
	}
	if !cutoff.Before(today) {
		cutoff = today
	}
	byBound := map[time.Time]map[string]string{}
	for _, table := range DayPartitioned {
		parts, err := s.DayPartitions(ctx, table)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if p.Below.IsZero() || p.Below.After(cutoff) {
				continue
			}
			if byBound[p.Below] == nil {
				byBound[p.Below] = map[string]string{}
			}
			byBound[p.Below][table] = p.Name
		}
	}
	bounds := make([]time.Time, 0, len(byBound))
	for b := range byBound {
		bounds = append(bounds, b)
	}
	slices.SortFunc(bounds, func(a, b time.Time) int { return a.Compare(b) })
	var dropped []DroppedDay
	for _, below := range bounds {
		names := byBound[below]
		day := DroppedDay{Below: below}
		var err error
		if day.KeptCallbacks, day.KeptOutbox, err = s.keepDay(ctx, names["callback_log"], names["outbox"], limit); err != nil {
			return dropped, err
		}
		err = s.partitionDDL(ctx, lockWait, func(conn *sql.Conn) error {
			if err := dayEmptied(ctx, conn, names); err != nil {
				return err
			}
			for _, table := range DayPartitioned {
				name, ok := names[table]
				if !ok {
					continue
				}
				var rows sql.NullInt64
				if err := conn.QueryRowContext(ctx, `SELECT TABLE_ROWS FROM information_schema.PARTITIONS
					WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND PARTITION_NAME = ?`, table, name).Scan(&rows); err != nil {
					return fmt.Errorf("error reading the size of %s.%s: %w", table, name, translate(err))
				}
				if _, err := conn.ExecContext(ctx, "ALTER TABLE `"+table+"` DROP PARTITION `"+name+"`"); err != nil {
					return fmt.Errorf("error dropping %s.%s: %w", table, name, translate(err))
				}
				day.Partitions = append(day.Partitions, table+"."+name)
				day.RowsEstimate += rows.Int64
			}
			return nil
		})
		if len(day.Partitions) > 0 {
			dropped = append(dropped, day)
		}
		if err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// dayEmptied checks, right before the drop, that the day's partitions
// hold nothing to keep any more (by the status indexes: no scan of the
// day).
func dayEmptied(ctx context.Context, conn *sql.Conn, names map[string]string) error {
	checks := []struct{ table, status string }{{"callback_log", string(callback.StatusSuccess)}, {"outbox", OutboxSent}}
	for _, c := range checks {
		name, ok := names[c.table]
		if !ok {
			continue
		}
		var left int
		err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT 1 FROM `"+c.table+"` PARTITION (`"+name+"`) WHERE status <> ? LIMIT 1) x", c.status).Scan(&left)
		if err != nil {
			return fmt.Errorf("error checking %s.%s before its drop: %w", c.table, name, translate(err))
		}
		if left > 0 {
			return fmt.Errorf("%w: %s.%s", ErrDayNotEmptied, c.table, name)
		}
	}
	return nil
}

// keepDay moves what the partitions logPart of callback_log and outPart
// of outbox (empty: none) must not lose to today's partition (retain_day
// = CURRENT_DATE), in transactions of up to limit rows, before their day
// is dropped: every callback that is not SUCCESS (PENDING, FAILED, dead
// letters, which go at their own age: DeleteDeadLettersBefore), with every
// attempt of it whatever its day, and every outbox row not SENT. It
// returns how many callbacks and outbox rows it moved.
//
// The rows are found by the status indexes within the partition, so the
// cost is the rows kept, not the day's. A SUCCESS callback that a replay
// makes PENDING afterwards is moved by the replay (MakePendingTx), in its
// transaction; nothing else makes a row kept again.
func (s *Store) keepDay(ctx context.Context, logPart, outPart string, limit int) (callbacks, outboxRows int, err error) {
	if logPart != "" {
		callbacks, err = s.keepRows(ctx, "callback_log", logPart, string(callback.StatusSuccess), limit, func(tx *Tx, ids []int64) error {
			return translate(s.q(ctx, tx).Exec(`UPDATE callback_attempt SET retain_day = CURRENT_DATE WHERE log_id IN ? AND retain_day < CURRENT_DATE`, ids).Error)
		})
		if err != nil {
			return callbacks, 0, err
		}
	}
	if outPart != "" {
		outboxRows, err = s.keepRows(ctx, "outbox", outPart, OutboxSent, limit, nil)
	}
	return callbacks, outboxRows, err
}

// keepRows moves the rows of table's partition part whose status is not
// done to today's partition, limit at a time, each batch in a transaction
// with also (the callbacks' attempts), and returns how many it moved. The
// ids are read first, then updated by id with the status checked again
// (a row settled meanwhile stays): an UPDATE naming the partition cannot
// move a row out of it.
func (s *Store) keepRows(ctx context.Context, table, part, done string, limit int, also func(tx *Tx, ids []int64) error) (int, error) {
	moved := 0
	for {
		var ids []int64
		if err := s.q(ctx, nil).Raw("SELECT id FROM `"+table+"` PARTITION (`"+part+"`) WHERE status <> ? LIMIT ?", done, limit).
			Scan(&ids).Error; err != nil {
			return moved, fmt.Errorf("error finding the rows of %s.%s to keep: %w", table, part, translate(err))
		}
		if len(ids) == 0 {
			return moved, nil
		}
		var n int64
		err := s.InTx(ctx, func(tx *Tx) error {
			res := s.q(ctx, tx).Exec("UPDATE `"+table+"` SET retain_day = CURRENT_DATE WHERE id IN ? AND status <> ? AND retain_day < CURRENT_DATE", ids, done)
			if res.Error != nil {
				return translate(res.Error)
			}
			n = res.RowsAffected
			if also == nil {
				return nil
			}
			return also(tx, ids)
		})
		if err != nil {
			return moved, fmt.Errorf("error keeping the rows of %s.%s: %w", table, part, err)
		}
		moved += int(n)
		// Nothing moved: the rows found are of today by the database's
		// clock (they cannot move out of their day); the check before
		// the drop refuses the day.
		if n == 0 || len(ids) < limit {
			return moved, nil
		}
	}
}

// byDay is how a statement finds rows of a day-partitioned table by a
// key without retain_day (id, message_id), keys[i] on days[i]: for the
// rows whose day is known, one condition per day, "key IN (...) AND
// retain_day = day", ORed, so that MariaDB reads only those days'
// partitions and in each only the keys of that day; and one on the key
// alone for the rows whose day is not known (zero), which reads every
// partition as before the day partitions. Each non-empty condition is a
// statement of its own: in one statement, a single row without a day
// would make every key be looked up in every partition. A batch's rows
// are mostly of one day: the condition is then the first form alone.
//
// Without a day a statement descends the key in every partition, one
// descent per key per partition: 640 index reads instead of 64 for a
// batch of 64 on a fresh database's 10 partitions, 2,560 on 30 days'
// retention, a cost that grows with the days kept. "key IN (...) AND
// retain_day IN (...)" would look up every key on every day named; and
// pairs, "(key, retain_day) IN ((?, ?), ...)", read the right rows but
// cost twice the server time: marking 128 outbox rows SENT took 8.8 ms
// so against 4.2 ms with "message_id IN (...) AND retain_day = ?" and
// 4.1 ms in the table before the partitions (performance_schema, the
// benchmark's MariaDB, autocommit).
//
// The days must be the rows' days when the statement runs: read in the
// same transaction as the rows' locks (a claim), or written by the
// caller itself and not moved since. Retention (keepRows) and a replay
// (MakePendingTx) move a row to today, so a day read in an earlier
// transaction may be stale: such a row is not found.
func byDay[K any](column string, keys []K, days []time.Time) []dayCond {
	var order []string
	of := map[string][]K{}
	var bare []K
	for i, k := range keys {
		if days[i].IsZero() {
			bare = append(bare, k)
			continue
		}
		d := days[i].Format(time.DateOnly)
		if of[d] == nil {
			order = append(order, d)
		}
		of[d] = append(of[d], k)
	}
	var out []dayCond
	if len(order) > 0 {
		var known dayCond
		terms := make([]string, len(order))
		for i, d := range order {
			terms[i] = "(" + column + " IN ? AND retain_day = ?)"
			known.args = append(known.args, of[d], d)
		}
		known.where = strings.Join(terms, " OR ")
		if len(terms) > 1 {
			known.where = "(" + known.where + ")"
		}
		out = append(out, known)
	}
	if len(bare) > 0 {
		out = append(out, dayCond{where: column + " IN ?", args: []any{bare}})
	}
	return out
}

// dayCond is a WHERE condition and its arguments (byDay).
type dayCond struct {
	where string
	args  []any
}
