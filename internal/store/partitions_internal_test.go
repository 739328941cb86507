package store

import (
	"database/sql"
	"fmt"
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

// TestMigration025PartitionsByDay: after the migrations, callback_log,
// callback_attempt and outbox are partitioned by RANGE COLUMNS(retain_day)
// into p_old (before the migration's day) and p_future only, their
// primary keys are (id, retain_day), and callback_log and outbox have no
// unique key besides.
func TestMigration025PartitionsByDay(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	today := utcToday().Format(time.DateOnly)
	for _, table := range DayPartitioned {
		require.Equal(t, []string{"p_old<" + today, "p_future<MAXVALUE"}, partitionNames(t, st, table), table)
		var method, expr string
		require.NoError(t, st.sql.QueryRow(`SELECT DISTINCT PARTITION_METHOD, PARTITION_EXPRESSION FROM information_schema.PARTITIONS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table).Scan(&method, &expr))
		require.Equal(t, "RANGE COLUMNS", method, table)
		require.Equal(t, "`retain_day`", expr, table)
		uniques := queryColumn[string](t, st.sql, `SELECT CONCAT(INDEX_NAME, ':', GROUP_CONCAT(COLUMN_NAME ORDER BY SEQ_IN_INDEX)) FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND NON_UNIQUE = 0 GROUP BY INDEX_NAME`, table)
		require.Equal(t, []string{"PRIMARY:id,retain_day"}, uniques, table)
	}
	// A row written now is of today.
	res, err := st.InsertCallback(t.Context(), pending("today", 1).row)
	require.NoError(t, err)
	var day string
	require.NoError(t, st.sql.QueryRow(`SELECT DATE_FORMAT(retain_day, "%Y-%m-%d") FROM callback_log WHERE id = ?`, res.ID).Scan(&day))
	require.Equal(t, today, day)
}

// TestEnsureDayPartitions: the partitions job's statement creates one
// partition per day from today through today + days ahead on each table,
// moving the rows p_future held already; a second run changes nothing;
// a later day adds only the days missing; two runs at once both succeed
// and create each partition once; a row whose retain_day is past the
// created days still lands (p_future).
func TestEnsureDayPartitions(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	today := utcToday()
	// A row of today, written before the split: in p_future.
	early, err := st.InsertCallback(t.Context(), pending("early", 1).row)
	require.NoError(t, err)
	count := func(table, part string) int {
		var n int
		require.NoError(t, st.sql.QueryRow(`SELECT COUNT(*) FROM `+table+` PARTITION (`+part+`)`).Scan(&n))
		return n
	}
	require.Equal(t, 1, count("callback_log", "p_future"))

	want := func(days int) []string {
		out := []string{"p_old<" + today.Format(time.DateOnly)}
		for d := range days + 1 {
			day := today.AddDate(0, 0, d)
			out = append(out, DayPartitionName(day)+"<"+day.AddDate(0, 0, 1).Format(time.DateOnly))
		}
		return append(out, "p_future<MAXVALUE")
	}
	n, err := st.EnsureDayPartitions(t.Context(), time.Now(), 7, 3*time.Second)
	require.NoError(t, err)
	require.Equal(t, 3*8, n)
	for _, table := range DayPartitioned {
		require.Equal(t, want(7), partitionNames(t, st, table), table)
	}
	require.Equal(t, 1, count("callback_log", DayPartitionName(today)), "the row p_future held is in today's partition")
	require.Zero(t, count("callback_log", "p_future"))
	var id int64
	require.NoError(t, st.sql.QueryRow(`SELECT id FROM callback_log WHERE event_id = 'early'`).Scan(&id))
	require.Equal(t, early.ID, id)

	n, err = st.EnsureDayPartitions(t.Context(), time.Now(), 7, 3*time.Second)
	require.NoError(t, err)
	require.Zero(t, n, "a second run changes nothing")
	for _, table := range DayPartitioned {
		require.Equal(t, want(7), partitionNames(t, st, table), table)
	}

	// Three days later (or fewer days ahead): only the missing days.
	n, err = st.EnsureDayPartitions(t.Context(), today.AddDate(0, 0, 3), 7, 3*time.Second)
	require.NoError(t, err)
	require.Equal(t, 3*3, n)
	for _, table := range DayPartitioned {
		require.Equal(t, want(10), partitionNames(t, st, table), table)
	}
	n, err = st.EnsureDayPartitions(t.Context(), time.Now(), 2, 3*time.Second)
	require.NoError(t, err)
	require.Zero(t, n)

	// Beyond the created days: p_future.
	_, err = st.sql.Exec(`INSERT INTO callback_log (source, kind, event_id, business_key, status, payload, trace_id, received_at, retain_day)
		VALUES ('paydemo', 'payment', 'far', 'K', 'PENDING', '{}', 't', NOW(6), CURRENT_DATE + INTERVAL 60 DAY)`)
	require.NoError(t, err)
	_, err = st.sql.Exec(`INSERT INTO callback_attempt (log_id, attempt, started_at, finished_at, outcome, worker_id, retain_day)
		VALUES (1, 1, NOW(6), NOW(6), 'SUCCESS', 'w', CURRENT_DATE + INTERVAL 60 DAY)`)
	require.NoError(t, err)
	_, err = st.sql.Exec(`INSERT INTO outbox (callback_log_id, exchange, routing_key, message_id, payload, created_at, retain_day)
		VALUES (1, 'x', 'k', 'far', '{}', NOW(6), CURRENT_DATE + INTERVAL 60 DAY)`)
	require.NoError(t, err)
	for _, table := range DayPartitioned {
		require.Equal(t, 1, count(table, "p_future"), table)
	}
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
		wg.Go(func() { created[i], errs[i] = other.EnsureDayPartitions(t.Context(), time.Now(), 7, 3*time.Second) })
	}
	wg.Wait()
	total := 0
	for i := range workers {
		require.NoError(t, errs[i], "worker %d", i)
		total += created[i]
	}
	require.Equal(t, 3*8, total, "each partition created once")
	for _, table := range DayPartitioned {
		require.Len(t, partitionNames(t, st, table), 10, table)
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
// (and of today) with every row kept and its values equal, each row's
// retain_day its own day (received_at, started_at, created_at), the days
// before the migration's in p_old; its down migration gives the tables
// back as they were (rows and definitions), and up again works.
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
		var old, future int
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM `+table+` PARTITION (p_old)`).Scan(&old))
		require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM `+table+` PARTITION (p_future)`).Scan(&future))
		if now.Truncate(24 * time.Hour).Equal(today) {
			require.Equal(t, 9, old, table)
			require.Equal(t, 3, future, "%s: today's rows wait in p_future for the job's split", table)
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
	require.Len(t, partitionNames(t, st, "callback_log"), 2)
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
				wg.Go(func() { _, errA = st.writeIntake(t.Context(), a, paths.a) })
				wg.Go(func() { _, errB = st.writeIntake(t.Context(), b, paths.b) })
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
