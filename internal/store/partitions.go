package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"
)

// DayPartitioned are the tables partitioned by day on retain_day
// (migration 025): RANGE COLUMNS(retain_day), a partition pYYYYMMDD per
// UTC day (VALUES LESS THAN the next day), p_old for every day before
// the migration's, and p_future (MAXVALUE) last.
var DayPartitioned = []string{"callback_log", "callback_attempt", "outbox"}

// partitionFuture is the last partition of each day-partitioned table.
const partitionFuture = "p_future"

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

// EnsureDayPartitions makes every day-partitioned table have one
// partition per UTC day from today through today + daysAhead, splitting
// p_future with ALTER TABLE ... REORGANIZE PARTITION: the days from the
// table's highest bound on (a table whose last split is older than
// today, the workers having been down, gets a partition for each day
// missed too). It is idempotent: a day that has its partition is left
// alone. It returns how many partitions it created.
//
// Rows already in p_future (written on a day whose partition did not
// exist yet: the job was late) are copied into the new partitions by the
// split; the split of an empty p_future copies nothing.
//
// The DDL runs on a connection of its own with lock_wait_timeout at
// lockWait: an ALTER waits for the metadata lock of every open
// transaction on its table, and every statement on that table after it
// waits behind it. With a short wait a long transaction (an operator's
// open session, a backup) makes the split give up (an error) and the
// job try again at its next run, instead of queueing every intake INSERT
// behind it for the server's lock_wait_timeout. Runs at once are
// serialized by a named lock (GET_LOCK, per database), and each re-reads
// the partitions under it: the second finds nothing left to do.
func (s *Store) EnsureDayPartitions(ctx context.Context, today time.Time, daysAhead int, lockWait time.Duration) (created int, err error) {
	today = time.Date(today.Year(), today.Month(), today.Day(), 0, 0, 0, 0, time.UTC)
	last := today.AddDate(0, 0, daysAhead)
	conn, err := s.sql.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("error preparing partitions: %w", translate(err))
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
		return 0, fmt.Errorf("error preparing partitions: %w", translate(err))
	}
	secs := max(1, int(lockWait/time.Second))
	discard = true
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`SET SESSION lock_wait_timeout = %d`, secs)); err != nil {
		return 0, fmt.Errorf("error preparing partitions: %w", translate(err))
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, `SELECT GET_LOCK(CONCAT('callgate-partitions.', DATABASE()), ?)`, secs).Scan(&got); err != nil {
		return 0, fmt.Errorf("error locking partitions: %w", translate(err))
	}
	if got.Int64 != 1 {
		return 0, fmt.Errorf("partitions: another run holds the lock for more than %s", lockWait)
	}
	for _, table := range DayPartitioned {
		n, err := ensureTableDays(ctx, conn, table, today, last)
		created += n
		if err != nil {
			return created, err
		}
	}
	if _, err := conn.ExecContext(ctx, `DO RELEASE_LOCK(CONCAT('callgate-partitions.', DATABASE()))`); err != nil {
		return created, nil
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf(`SET SESSION lock_wait_timeout = %d`, prevWait)); err == nil {
		discard = false
	}
	return created, nil
}

// ensureTableDays splits table's p_future so that it has a partition per
// day up to last.
func ensureTableDays(ctx context.Context, conn *sql.Conn, table string, today, last time.Time) (int, error) {
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
	defs = append(defs, "PARTITION "+partitionFuture+" VALUES LESS THAN (MAXVALUE)")
	q := "ALTER TABLE `" + table + "` REORGANIZE PARTITION " + partitionFuture + " INTO (" + strings.Join(defs, ", ") + ")"
	if _, err := conn.ExecContext(ctx, q); err != nil {
		return 0, fmt.Errorf("error creating the partitions of %s from %s to %s: %w", table, from.Format(time.DateOnly), last.Format(time.DateOnly), translate(err))
	}
	return len(defs) - 1, nil
}
