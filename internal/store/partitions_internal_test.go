package store

import (
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// utcToday is the UTC day now.
func utcToday() time.Time { return time.Now().UTC().Truncate(24 * time.Hour) }

// partitionNames returns table's partitions as "name<bound" in order.
func partitionNames(t *testing.T, st *Store, table string) []string {
	t.Helper()
	parts, err := st.DayPartitions(t.Context(), table)
	require.NoError(t, err)
	var out []string
	for _, p := range parts {
		b := "MAXVALUE"
		if !p.Below.IsZero() {
			b = p.Below.Format(time.DateOnly)
		}
		out = append(out, p.Name+"<"+b)
	}
	return out
}

// wantDays is what the partitions of a table are with day partitions
// from first through last: p_old below first, each day, p_future.
func wantDays(old, first, last time.Time) []string {
	out := []string{"p_old<" + old.Format(time.DateOnly)}
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		out = append(out, DayPartitionName(d)+"<"+d.AddDate(0, 0, 1).Format(time.DateOnly))
	}
	return append(out, "p_future<MAXVALUE")
}

// partitionRows counts the rows of table's partition part.
func partitionRows(t *testing.T, st *Store, table, part string) int {
	t.Helper()
	var n int
	require.NoError(t, st.sql.QueryRow("SELECT COUNT(*) FROM `"+table+"` PARTITION (`"+part+"`)").Scan(&n))
	return n
}

// TestMigration025PartitionsByDay: after the migrations, callback_log,
// callback_attempt and outbox are partitioned by RANGE
// COLUMNS(retain_day) into p_old (before the migration's day), one
// partition per UTC day from the migration's through 7 days later, and
// an empty p_future; their primary keys are (id, retain_day), and
// callback_log and outbox have no unique key besides. A row written now
// is of today, in today's partition.
func TestMigration025PartitionsByDay(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	today := utcToday()
	for _, table := range DayPartitioned {
		require.Equal(t, wantDays(today, today, today.AddDate(0, 0, 7)), partitionNames(t, st, table), table)
		var method, expr string
		require.NoError(t, st.sql.QueryRow(`SELECT DISTINCT PARTITION_METHOD, PARTITION_EXPRESSION FROM information_schema.PARTITIONS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table).Scan(&method, &expr))
		require.Equal(t, "RANGE COLUMNS", method, table)
		require.Equal(t, "`retain_day`", expr, table)
		uniques := queryColumn[string](t, st.sql, `SELECT CONCAT(INDEX_NAME, ':', GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX)) FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND NON_UNIQUE = 0 GROUP BY INDEX_NAME`, table)
		require.Equal(t, []string{"PRIMARY:id,retain_day"}, uniques, table)
	}
	res, err := st.InsertCallback(t.Context(), pending("today", 1).row)
	require.NoError(t, err)
	var day string
	require.NoError(t, st.sql.QueryRow(`SELECT DATE_FORMAT(retain_day, "%Y-%m-%d") FROM callback_log WHERE id = ?`, res.ID).Scan(&day))
	require.Equal(t, today.Format(time.DateOnly), day)
	require.Equal(t, 1, partitionRows(t, st, "callback_log", DayPartitionName(today)))
	require.Zero(t, partitionRows(t, st, "callback_log", partitionFuture))
}

// TestEnsureDayPartitions: the partitions job's statement creates the
// days missing through today + days ahead on each table, splitting an
// empty p_future (full is not told); a second run changes nothing; three
// days later (a clock moved forward) it adds only the days missing. Rows
// already in p_future (days past the partitions: the workers were down)
// are reported to full with their count, then copied into their days'
// partitions, none lost.
func TestEnsureDayPartitions(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	today := utcToday()
	var told []string
	full := func(table string, rows int64) { told = append(told, fmt.Sprintf("%s:%d", table, rows)) }

	n, err := st.EnsureDayPartitions(t.Context(), time.Now(), 7, 3*time.Second, full)
	require.NoError(t, err)
	require.Zero(t, n, "the migration made today through 7 days ahead")
	n, err = st.EnsureDayPartitions(t.Context(), time.Now(), 9, 3*time.Second, full)
	require.NoError(t, err)
	require.Equal(t, 3*2, n)
	for _, table := range DayPartitioned {
		require.Equal(t, wantDays(today, today, today.AddDate(0, 0, 9)), partitionNames(t, st, table), table)
	}
	n, err = st.EnsureDayPartitions(t.Context(), time.Now(), 9, 3*time.Second, full)
	require.NoError(t, err)
	require.Zero(t, n, "a second run changes nothing")
	n, err = st.EnsureDayPartitions(t.Context(), today.AddDate(0, 0, 3).Add(5*time.Hour), 9, 3*time.Second, full)
	require.NoError(t, err)
	require.Equal(t, 3*3, n, "three days later: three more days")
	for _, table := range DayPartitioned {
		require.Equal(t, wantDays(today, today, today.AddDate(0, 0, 12)), partitionNames(t, st, table), table)
	}
	require.Empty(t, told, "p_future was empty at every split")

	// Rows of days past the partitions land in p_future...
	far := today.AddDate(0, 0, 14)
	for i, day := range []time.Time{far, far, far.AddDate(0, 0, 1)} {
		res, err := st.InsertCallback(t.Context(), pending(fmt.Sprintf("far-%d", i), i+1).row)
		require.NoError(t, err)
		_, err = st.sql.Exec(`UPDATE callback_log SET retain_day = ? WHERE id = ?`, day, res.ID)
		require.NoError(t, err)
	}
	require.Equal(t, 3, partitionRows(t, st, "callback_log", partitionFuture))
	// ... and the split that reaches them reports them, and copies them.
	n, err = st.EnsureDayPartitions(t.Context(), far.AddDate(0, 0, -2), 4, 3*time.Second, full)
	require.NoError(t, err)
	require.Equal(t, 3*4, n)
	require.Equal(t, []string{"callback_log:3"}, told)
	require.Equal(t, 2, partitionRows(t, st, "callback_log", DayPartitionName(far)))
	require.Equal(t, 1, partitionRows(t, st, "callback_log", DayPartitionName(far.AddDate(0, 0, 1))))
	require.Zero(t, partitionRows(t, st, "callback_log", partitionFuture))
	require.Len(t, queryColumn[int64](t, st.sql, `SELECT id FROM callback_log WHERE event_id LIKE 'far-%'`), 3, "every row kept")
}

// TestEnsureDayPartitionsAtOnce: runs on several workers at once (each a
// store of its own) all succeed, and each partition is created once.
func TestEnsureDayPartitionsAtOnce(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	name := testDBName(t, st)
	const workers = 4
	created := make([]int, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		other, err := Open(Config{DSN: "root:@tcp(127.0.0.1:3306)/" + name, MaxOpenConns: 2, MaxIdleConns: 2, DialTimeout: time.Second, LockWaitTimeout: 5 * time.Second})
		require.NoError(t, err)
		defer other.Close()
		wg.Go(func() {
			created[i], errs[i] = other.EnsureDayPartitions(t.Context(), time.Now(), 10, 10*time.Second, nil)
		})
	}
	wg.Wait()
	total := 0
	for i := range workers {
		require.NoError(t, errs[i], "worker %d", i)
		total += created[i]
	}
	require.Equal(t, 3*3, total, "each partition created once")
	today := utcToday()
	for _, table := range DayPartitioned {
		require.Equal(t, wantDays(today, today, today.AddDate(0, 0, 10)), partitionNames(t, st, table), table)
	}
}

// tableRows reads every row of table, ordered by id, each column as text
// (NULL as "NULL"): columns names them, or every column when empty.
func tableRows(t *testing.T, db *sql.DB, table string, columns []string) (cols []string, rows [][]string) {
	t.Helper()
	sel := "*"
	if len(columns) > 0 {
		sel = strings.Join(columns, ", ")
	}
	rs, err := db.Query(`SELECT ` + sel + ` FROM ` + table + ` ORDER BY id`)
	require.NoError(t, err)
	defer rs.Close()
	cols, err = rs.Columns()
	require.NoError(t, err)
	for rs.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rs.Scan(ptrs...))
		row := make([]string, len(cols))
		for i, v := range vals {
			row[i] = "NULL"
			if v.Valid {
				row[i] = v.String
			}
		}
		rows = append(rows, row)
	}
	require.NoError(t, rs.Err())
	return cols, rows
}

// TestMigration025ConvertsAFilledTableAndBack: migration 025 converts
// callback_log, callback_attempt and outbox holding rows of several days
// (and of today; SUCCESS, FAILED and PENDING) with every row kept and its
// values equal, each row's retain_day its own day (received_at,
// started_at, created_at), the days before the migration's in p_old and
// today's in today's partition; its down migration gives the tables back
// as they were (rows and definitions), and up again works. The intake on
// the converted tables answers resends of the rows stored before as
// their duplicates, and stores an event sent at once through two
// batchers once.
func TestMigration025ConvertsAFilledTableAndBack(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	migrateTestTo(t, st, 24)
	db := st.sql
	now := time.Now().UTC().Truncate(time.Microsecond)
	days := []time.Time{now.AddDate(0, 0, -40), now.AddDate(0, 0, -3), now.AddDate(0, 0, -1), now}
	for i, at := range days {
		for j := range 3 {
			event := fmt.Sprintf("ev-%d-%d", i, j)
			res, err := db.Exec(`INSERT INTO callback_log (source, kind, event_id, business_key, status, attempts, last_error, payload, headers, trace_id, received_at, processed_at, next_attempt_at, normalized)
				VALUES ('paydemo', 'payment', ?, 'K', ?, 1, ?, ?, '{"a":"b"}', 'trace', ?, ?, ?, ?)`,
				event, []string{"SUCCESS", "FAILED", "PENDING"}[j], []any{nil, "boom", nil}[j], []byte{0, 1, byte(i), byte(j)}, at, at.Add(time.Second), at, []byte("{}"))
			require.NoError(t, err)
			id, err := res.LastInsertId()
			require.NoError(t, err)
			_, err = db.Exec(`INSERT INTO callback_attempt (log_id, attempt, started_at, finished_at, outcome, error, worker_id, note)
				VALUES (?, 1, ?, ?, 'SUCCESS', NULL, 'w1', 'n')`, id, at, at.Add(time.Millisecond))
			require.NoError(t, err)
			_, err = db.Exec(`INSERT INTO outbox (callback_log_id, exchange, routing_key, message_id, payload, headers, status, created_at, sent_at)
				VALUES (?, 'x', 'order.paid', ?, '{"p":1}', NULL, 'SENT', ?, ?)`, id, fmt.Sprintf("cb%d.order.paid", id), at, at)
			require.NoError(t, err)
		}
	}
	dates := map[string]string{"callback_log": "received_at", "callback_attempt": "started_at", "outbox": "created_at"}
	before := map[string][][]string{}
	columns := map[string][]string{}
	created := map[string]string{}
	createTable := func(table string) string {
		var name, def string
		require.NoError(t, db.QueryRow(`SHOW CREATE TABLE `+table).Scan(&name, &def))
		// AUTO_INCREMENT=n is the next id, not the definition.
		if i := strings.Index(def, " AUTO_INCREMENT="); i >= 0 {
			j := strings.IndexByte(def[i+1:], ' ')
			def = def[:i] + def[i+1+j:]
		}
		return def
	}
	for _, table := range DayPartitioned {
		columns[table], before[table] = tableRows(t, db, table, nil)
		require.Len(t, before[table], 12)
		created[table] = createTable(table)
	}

	migrateTestTo(t, st, 25)
	today := utcToday()
	for _, table := range DayPartitioned {
		_, rows := tableRows(t, db, table, columns[table])
		require.Equal(t, before[table], rows, "%s: every row kept, its values equal", table)
		var wrong int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE retain_day <> DATE(`+dates[table]+`)`).Scan(&wrong))
		require.Zero(t, wrong, "%s: retain_day is the row's own day", table)
		if now.Truncate(24 * time.Hour).Equal(today) {
			require.Equal(t, 9, partitionRows(t, st, table, "p_old"), table)
			require.Equal(t, 3, partitionRows(t, st, table, DayPartitionName(today)), "%s: today's rows in today's partition", table)
			require.Zero(t, partitionRows(t, st, table, partitionFuture), table)
		}
	}

	migrateTestTo(t, st, 24)
	for _, table := range DayPartitioned {
		cols, rows := tableRows(t, db, table, nil)
		require.Equal(t, columns[table], cols, table)
		require.Equal(t, before[table], rows, "%s: down keeps every row", table)
		require.Equal(t, created[table], createTable(table), "%s: down gives the definition back", table)
	}
	migrateTestTo(t, st, 25)
	require.Len(t, partitionNames(t, st, "callback_log"), 2+8)

	// The intake on the converted table: a resend of a callback stored
	// before (of an old day, FAILED or SUCCESS) is its duplicate, and a
	// new event sent through two batchers at once (one reading back) is
	// stored once, the other answers its duplicates.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b1 := NewBatcher(st, 2, 8, quiet, nil)
	defer b1.Close()
	b2 := NewBatcher(st, 2, 8, quiet, nil)
	defer b2.Close()
	b2.returning.Store(returningNo)
	idOf := map[string]int64{}
	for _, ev := range []string{"ev-0-0", "ev-1-1", "ev-3-2"} {
		idOf[ev] = queryColumn[int64](t, db, `SELECT id FROM callback_log WHERE event_id = ?`, ev)[0]
	}
	const sends = 24
	events := []string{"ev-0-0", "ev-1-1", "ev-3-2", "brand-new"}
	answers := make([]InsertResult, sends)
	errs := make([]error, sends)
	var wg sync.WaitGroup
	for i := range sends {
		b := []*Batcher{b1, b2}[i%2]
		wg.Go(func() {
			answers[i], errs[i] = b.InsertCallback(t.Context(), pending(events[i%len(events)], 1000+i).row)
		})
	}
	wg.Wait()
	var fresh []int64
	for i := range sends {
		require.NoError(t, errs[i], "send %d", i)
		ev := events[i%len(events)]
		if ev != "brand-new" {
			require.Equal(t, InsertResult{ID: idOf[ev], Duplicate: true}, answers[i], "send %d: %s", i, ev)
			continue
		}
		if !answers[i].Duplicate {
			fresh = append(fresh, answers[i].ID)
		}
	}
	require.Len(t, fresh, 1, "the new event is new once")
	require.Equal(t, fresh, queryColumn[int64](t, db, `SELECT id FROM callback_log WHERE event_id = 'brand-new'`))
	for ev := range idOf {
		require.Equal(t, 1, logRows(t, st, ev), "%s: no row added", ev)
	}
}

// TestConcurrentBatchesOfOneEvent: without a unique key on callback_log,
// two batches carrying the same event at once (each with an event of its
// own besides) leave exactly one callback_log row of it: one batch stores
// it, the other is answered duplicate with the first's id, its own row
// deleted again; on the RETURNING path, the read-back path, and one of
// each.
func TestConcurrentBatchesOfOneEvent(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	n := 0
	for _, paths := range []struct {
		name string
		a, b bool // returning
	}{{"returning", true, true}, {"read back", false, false}, {"one of each", true, false}} {
		t.Run(paths.name, func(t *testing.T) {
			for round := range 20 {
				event := fmt.Sprintf("same-%s-%d", paths.name, round)
				n += 3
				a := []*pendingInsert{pending(fmt.Sprintf("a-%d-%s", round, paths.name), n), pending(event, n+1)}
				b := []*pendingInsert{pending(event, n+2), pending(fmt.Sprintf("b-%d-%s", round, paths.name), n+3)}
				n++
				var wg sync.WaitGroup
				var errA, errB error
				wg.Go(func() { _, _, errA = st.writeIntake(t.Context(), a, paths.a) })
				wg.Go(func() { _, _, errB = st.writeIntake(t.Context(), b, paths.b) })
				wg.Wait()
				require.NoError(t, errA)
				require.NoError(t, errB)
				first, second := a[1], b[0]
				if first.res.Duplicate {
					first, second = second, first
				}
				require.False(t, first.res.Duplicate, "round %d: one batch stores the event", round)
				require.NotZero(t, first.res.ID)
				require.Equal(t, InsertResult{ID: first.res.ID, Duplicate: true}, second.res, "round %d: the other is its duplicate", round)
				ids := queryColumn[int64](t, st.sql, `SELECT id FROM callback_log WHERE source = 'paydemo' AND event_id = ?`, event)
				require.Equal(t, []int64{first.res.ID}, ids, "round %d: one callback_log row", round)
				for _, p := range []*pendingInsert{a[0], b[1]} {
					require.False(t, p.res.Duplicate)
					require.Equal(t, 1, logRows(t, st, p.row.EventID))
				}
			}
		})
	}
}

// queryColumn runs query and returns its one column's values.
func queryColumn[T any](t *testing.T, db *sql.DB, query string, args ...any) []T {
	t.Helper()
	rs, err := db.Query(query, args...)
	require.NoError(t, err)
	defer rs.Close()
	var out []T
	for rs.Next() {
		var v T
		require.NoError(t, rs.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rs.Err())
	return out
}

// TestIntakeWritesAgainOnAnIDInUse: when the database gives the intake's
// callback_log INSERT an id already in use on the day (the partitioned
// table's AUTO_INCREMENT is kept by MariaDB's partition handler, which has
// been seen to hand out ids in use; forced here with SET insert_id on the
// store's one connection), the row is written again with new ids rather
// than the stored row being taken for it: the request is answered new,
// with its own row, the stored row unchanged, on the RETURNING path, the
// read-back path and the one-row path; the batch logs a warning, never
// "does not account for its rows".
func TestIntakeWritesAgainOnAnIDInUse(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	one, err := Open(Config{DSN: "root:@tcp(127.0.0.1:3306)/" + testDBName(t, st), MaxOpenConns: 1, MaxIdleConns: 1, DialTimeout: time.Second})
	require.NoError(t, err)
	defer one.Close()
	logs := &strings.Builder{}
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	n := 100
	for _, path := range []struct {
		name      string
		returning int32
		batch     bool
	}{{"batch, returning", returningYes, true}, {"batch, read back", returningNo, true}, {"one row, returning", returningYes, false}, {"one row, read back", returningNo, false}} {
		t.Run(path.name, func(t *testing.T) {
			stored, err := one.InsertCallback(t.Context(), pending(fmt.Sprintf("stored-%d", n), n).row)
			require.NoError(t, err)
			n++
			_, err = one.sql.Exec(`SET insert_id = ?`, stored.ID)
			require.NoError(t, err)
			rows := []*pendingInsert{pending(fmt.Sprintf("new-%d", n), n), pending(fmt.Sprintf("new-%d", n+1), n+1)}
			n += 2
			if path.batch {
				b := &Batcher{st: one, log: log, maxBatch: 10}
				b.returning.Store(path.returning)
				b.flush(rows)
			} else {
				one.ret.Store(path.returning)
				rows = rows[:1]
				rows[0].res, rows[0].err = one.insertOne(t.Context(), rows[0].row, path.returning == returningYes)
			}
			for _, p := range rows {
				require.NoError(t, p.err, p.row.EventID)
				require.False(t, p.res.Duplicate, p.row.EventID)
				require.NotEqual(t, stored.ID, p.res.ID, "%s: its own row", p.row.EventID)
				require.Equal(t, []int64{p.res.ID}, queryColumn[int64](t, st.sql, `SELECT id FROM callback_log WHERE event_id = ?`, p.row.EventID))
			}
			require.Equal(t, []int64{stored.ID}, queryColumn[int64](t, st.sql, `SELECT id FROM callback_log WHERE event_id = ?`, fmt.Sprintf("stored-%d", n-3)),
				"the stored row unchanged")
		})
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotContains(t, logs.String(), "does not account")
	require.Contains(t, logs.String(), "intake: the database gave out a callback_log id already in use")
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
