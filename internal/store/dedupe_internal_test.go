package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/migrations"
)

// forget does to callback id what retention does once its day is older
// than max_age: SUCCESS, on a day of its own (yesterday), which is
// dropped (DropDaysBefore).
func forget(t *testing.T, st *Store, id int64) {
	t.Helper()
	yesterday := splitYesterday(t, st)
	_, err := st.sql.Exec(`UPDATE callback_log SET status = 'SUCCESS', processed_at = NOW(6), retain_day = ? WHERE id = ?`, yesterday, id)
	require.NoError(t, err)
	days, err := st.DropDaysBefore(t.Context(), utcToday(), 100, 3*time.Second)
	require.NoError(t, err)
	require.NotEmpty(t, days)
	require.Equal(t, utcToday(), days[len(days)-1].Below, "yesterday dropped")
	var left int
	require.NoError(t, st.sql.QueryRow(`SELECT COUNT(*) FROM callback_log WHERE id = ?`, id).Scan(&left))
	require.Zero(t, left, "retention dropped the callback with its day")
}

// splitYesterday gives each day-partitioned table a partition of
// yesterday alone (the migration made today's on; a drop removed the
// days before), splitting its first partition, and returns yesterday.
func splitYesterday(t *testing.T, st *Store) time.Time {
	t.Helper()
	today := utcToday()
	yesterday := today.AddDate(0, 0, -1)
	def := func(name string, below time.Time) string {
		return fmt.Sprintf("PARTITION `%s` VALUES LESS THAN ('%s')", name, below.Format(time.DateOnly))
	}
	for _, table := range DayPartitioned {
		parts, err := st.DayPartitions(t.Context(), table)
		require.NoError(t, err)
		first := parts[0]
		var into []string
		switch {
		case first.Name == DayPartitionName(yesterday):
			continue
		case first.Below.Equal(today): // p_old
			into = []string{def(first.Name, yesterday), def(DayPartitionName(yesterday), today)}
		default: // today's
			require.Equal(t, today.AddDate(0, 0, 1), first.Below, table)
			into = []string{def(DayPartitionName(yesterday), today), def(first.Name, first.Below)}
		}
		_, err = st.sql.Exec("ALTER TABLE `" + table + "` REORGANIZE PARTITION `" + first.Name + "` INTO (" + strings.Join(into, ", ") + ")")
		require.NoError(t, err)
	}
	return yesterday
}

// logRows counts the callback_log rows of event.
func logRows(t *testing.T, st *Store, event string) int {
	t.Helper()
	var n int
	require.NoError(t, st.sql.QueryRow(`SELECT COUNT(*) FROM callback_log WHERE source = 'paydemo' AND event_id = ?`, event).Scan(&n))
	return n
}

// TestDuplicateAfterThePayloadIsGone: a callback whose callback_log row
// retention deleted, sent again, is answered as a duplicate with its
// original log_id, adds no callback_log row and is not announced, on
// every path the intake writes by: a batch with RETURNING, a batch read
// back, the row-by-row fallback of a refused batch, and
// Store.InsertCallback (with and without RETURNING). A new event in the
// same batch is stored and announced as usual.
func TestDuplicateAfterThePayloadIsGone(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var mu sync.Mutex
	var announced []int64
	b := &Batcher{st: st, log: quiet, maxBatch: 10, onNew: func(rows []Inserted) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rows {
			announced = append(announced, r.ID)
		}
	}}
	n := 0
	next := func() int { n++; return n }

	viaBatch := func(returning int32, bad bool) func(t *testing.T, resent, fresh *pendingInsert) {
		return func(t *testing.T, resent, fresh *pendingInsert) {
			b.returning.Store(returning)
			batch := []*pendingInsert{resent, fresh}
			if bad {
				p := pending(fmt.Sprintf("bad-%d", next()), next())
				p.row.Kind = string(make([]byte, 300)) // longer than the column: the batch is refused
				batch = append([]*pendingInsert{p}, batch...)
			}
			b.flush(batch)
			if bad {
				require.Error(t, batch[0].err, "the bad row is refused")
			}
		}
	}
	viaStore := func(returning int32) func(t *testing.T, resent, fresh *pendingInsert) {
		return func(t *testing.T, resent, fresh *pendingInsert) {
			st.ret.Store(returning)
			t.Cleanup(func() { st.ret.Store(returningUnknown) })
			for _, p := range []*pendingInsert{resent, fresh} {
				p.res, p.err = st.InsertCallback(t.Context(), p.row)
			}
		}
	}
	for _, path := range []struct {
		name  string
		write func(t *testing.T, resent, fresh *pendingInsert)
	}{
		{"batch, returning", viaBatch(returningYes, false)},
		{"batch, read back", viaBatch(returningNo, false)},
		{"row by row, returning", viaBatch(returningYes, true)},
		{"row by row, read back", viaBatch(returningNo, true)},
		{"store, returning", viaStore(returningYes)},
		{"store, read back", viaStore(returningNo)},
	} {
		t.Run(path.name, func(t *testing.T) {
			event := fmt.Sprintf("gone-%d", next())
			first := pending(event, next())
			path.write(t, first, pending(fmt.Sprintf("first-mate-%d", next()), next()))
			require.NoError(t, first.err)
			require.False(t, first.res.Duplicate)
			forget(t, st, first.res.ID)
			require.Zero(t, logRows(t, st, event))

			mu.Lock()
			announced = nil
			mu.Unlock()
			resent, fresh := pending(event, next()), pending(fmt.Sprintf("new-%d", next()), next())
			path.write(t, resent, fresh)
			require.NoError(t, resent.err)
			require.Equal(t, InsertResult{ID: first.res.ID, Duplicate: true}, resent.res, "the original log_id, as a duplicate")
			require.Zero(t, logRows(t, st, event), "no callback_log row added")
			require.NoError(t, fresh.err)
			require.False(t, fresh.res.Duplicate)
			require.Equal(t, 1, logRows(t, st, fresh.row.EventID))
			if path.name[:5] == "batch" || path.name[:3] == "row" {
				mu.Lock()
				require.Equal(t, []int64{fresh.res.ID}, announced, "only the new callback is announced")
				mu.Unlock()
			}
			stored, err := st.StoredEventIDs(t.Context(), "paydemo", []string{event, fresh.row.EventID, "never"})
			require.NoError(t, err)
			require.Equal(t, map[string]bool{event: true, fresh.row.EventID: true}, stored, "the dead letters' check sees the event whose payload is gone")
		})
	}
}

// TestDuplicatesAfterThePayloadIsGoneAtOnce: the same event, its payload
// gone, sent 60 times at once through two batchers (one reading back)
// and the one-by-one path: every answer is a duplicate with the original
// log_id, and no callback_log row is left behind.
func TestDuplicatesAfterThePayloadIsGoneAtOnce(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var announced sync.Map
	onNew := func(rows []Inserted) {
		for _, r := range rows {
			announced.Store(r.ID, true)
		}
	}
	b1 := NewBatcher(st, 2, 16, quiet, onNew)
	defer b1.Close()
	b2 := NewBatcher(st, 2, 16, quiet, onNew)
	defer b2.Close()
	b2.returning.Store(returningNo)

	first, err := st.InsertCallback(t.Context(), pending("storm", 0).row)
	require.NoError(t, err)
	forget(t, st, first.ID)

	const sends = 60
	insert := []func(context.Context, *callback.Log) (InsertResult, error){b1.InsertCallback, b2.InsertCallback, st.InsertCallback}
	answers := make([]InsertResult, sends)
	errs := make([]error, sends)
	var wg sync.WaitGroup
	for i := range sends {
		wg.Go(func() { answers[i], errs[i] = insert[i%len(insert)](t.Context(), pending("storm", i+1).row) })
	}
	wg.Wait()
	for i := range sends {
		require.NoError(t, errs[i], "send %d", i)
		require.Equal(t, InsertResult{ID: first.ID, Duplicate: true}, answers[i], "send %d", i)
	}
	require.Zero(t, logRows(t, st, "storm"))
	var events int
	require.NoError(t, st.sql.QueryRow(`SELECT COUNT(*) FROM callback_event WHERE event_id = 'storm' AND log_id = ?`, first.ID).Scan(&events))
	require.Equal(t, 1, events)
	announced.Range(func(k, _ any) bool { t.Errorf("callback %v announced", k); return true })
}

// TestMigration024RemembersEveryStoredEvent: callbacks stored before
// migration 024 have their events in callback_event after it (so a resend
// of one is a duplicate once retention deleted it), and its down
// migration drops the table.
func TestMigration024RemembersEveryStoredEvent(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	migrateTo := func(v uint) { t.Helper(); migrateTestTo(t, st, v) }
	migrateTo(23)
	var tables int
	require.NoError(t, st.sql.QueryRow(`SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'callback_event'`).Scan(&tables))
	require.Zero(t, tables, "down: no callback_event")

	received := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	for i, event := range []string{"old-1", "old-2", "old-2 "} {
		_, err := st.sql.Exec(`INSERT INTO callback_log (source, kind, event_id, business_key, status, attempts, payload, trace_id, received_at, next_attempt_at)
			VALUES (?, 'payment', ?, 'K', 'SUCCESS', 1, '{}', '00000000000000000000000000000000', ?, ?)`, []string{"paydemo", "stripe", "stripe"}[i], event, received, received)
		require.NoError(t, err)
	}
	migrateTo(24)
	rs, err := st.sql.Query(`SELECT e.source, e.event_id, e.received_at FROM callback_event e JOIN callback_log l ON l.id = e.log_id
		AND l.source = e.source AND l.event_id = e.event_id AND l.received_at = e.received_at ORDER BY e.source, e.event_id`)
	require.NoError(t, err)
	defer rs.Close()
	var got []string
	for rs.Next() {
		var source, event string
		var at time.Time
		require.NoError(t, rs.Scan(&source, &event, &at))
		require.True(t, at.Equal(received))
		got = append(got, source+"/"+event)
	}
	require.NoError(t, rs.Err())
	require.Equal(t, []string{"paydemo/old-1", "stripe/old-2", "stripe/old-2 "}, got, "one event per stored callback, byte for byte")

	// A resend of a backfilled callback whose day is then dropped.
	migrateTo(25)
	var id int64
	require.NoError(t, st.sql.QueryRow(`SELECT id FROM callback_log WHERE event_id = 'old-1'`).Scan(&id))
	forget(t, st, id)
	res, err := st.InsertCallback(t.Context(), pending("old-1", 9).row)
	require.NoError(t, err)
	require.Equal(t, InsertResult{ID: id, Duplicate: true}, res)
}

// testDBName is the name of st's database.
func testDBName(t *testing.T, st *Store) string {
	t.Helper()
	var name string
	require.NoError(t, st.sql.QueryRow(`SELECT DATABASE()`).Scan(&name))
	return name
}

// migrateTestTo migrates st's database up or down to version v, the way
// golang-migrate's own command would: a connection of its own, with the
// server's session defaults.
func migrateTestTo(t *testing.T, st *Store, v uint) {
	t.Helper()
	db, err := sql.Open("mysql", "root:@tcp(127.0.0.1:3306)/"+testDBName(t, st)+"?multiStatements=true")
	require.NoError(t, err)
	defer db.Close()
	src, err := iofs.New(migrations.FS, ".")
	require.NoError(t, err)
	drv, err := migratemysql.WithInstance(db, &migratemysql.Config{})
	require.NoError(t, err)
	m, err := migrate.NewWithInstance("iofs", src, "mysql", drv)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Migrate(v))
}

// TestMigration024BackfillDoesNotBlockTheIntake: migration 024's file, run
// as golang-migrate runs it (one multi-statement exec on a connection of
// its own, with the server's default REPEATABLE READ) but with its
// backfill's transaction held open, locks no callback_log row and no gap:
// an older gateway's intake INSERT and this one's both go through at once
// (a rolling upgrade), rather than waiting for the backfill to end.
func TestMigration024BackfillDoesNotBlockTheIntake(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	migrateTestTo(t, st, 23)
	name := testDBName(t, st)
	received := time.Now().UTC().Truncate(time.Microsecond)
	oldInsert := `INSERT INTO callback_log (source, kind, event_id, business_key, status, attempts, payload, trace_id, received_at, next_attempt_at)
		VALUES ('paydemo', 'payment', ?, 'K', 'PENDING', 0, '{}', '00000000000000000000000000000000', ?, ?)`
	for i := range 5 {
		_, err := st.sql.Exec(oldInsert, fmt.Sprintf("before-%d", i), received, received)
		require.NoError(t, err)
	}

	// The backfill, its transaction left open (autocommit off: the
	// CREATE TABLE commits, the INSERT ... SELECT begins one).
	up, err := migrations.FS.ReadFile("024_callback_event.up.sql")
	require.NoError(t, err)
	mdb, err := sql.Open("mysql", "root:@tcp(127.0.0.1:3306)/"+name+"?multiStatements=true")
	require.NoError(t, err)
	defer mdb.Close()
	conn, err := mdb.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	var iso string
	require.NoError(t, conn.QueryRowContext(t.Context(), `SELECT @@tx_isolation`).Scan(&iso))
	require.Equal(t, "REPEATABLE-READ", iso, "the migration's connection starts with the server's default")
	_, err = conn.ExecContext(t.Context(), "SET autocommit = 0;\n"+string(up))
	require.NoError(t, err)
	defer func() { _, _ = conn.ExecContext(context.Background(), `ROLLBACK`) }()
	var backfilled int
	require.NoError(t, conn.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM callback_event`).Scan(&backfilled))
	require.Equal(t, 5, backfilled)

	// The intake meanwhile, with a lock wait of 1 s.
	other, err := Open(Config{DSN: "root:@tcp(127.0.0.1:3306)/" + name, MaxOpenConns: 4, MaxIdleConns: 4, DialTimeout: time.Second, LockWaitTimeout: time.Second})
	require.NoError(t, err)
	defer other.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = other.sql.ExecContext(ctx, oldInsert, "old-gateway", received, received)
	require.NoError(t, err, "an older gateway's INSERT is not held off by the backfill")
	res, err := other.InsertCallback(ctx, pending("new-gateway", 1).row)
	require.NoError(t, err, "nor is this gateway's intake")
	require.False(t, res.Duplicate)
}

// TestRetentionKeepsTheEventsOfDeadLettersWithout: dead letters with no
// event (an older gateway's rows, stored during a rolling upgrade to
// 024; migration 025 wrote the events of every row stored before it, so
// this is a safety net) get their events when retention deletes them, so
// a resend is answered as a duplicate with the original log_id, on both
// intake paths. An event already there (a callback whose day was dropped,
// stored again by an older gateway) is kept as it is. (SUCCESS callbacks
// go with their day, whose rows are not read: theirs are the intake's.)
func TestRetentionKeepsTheEventsOfDeadLettersWithout(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	long := time.Now().UTC().Add(-60 * 24 * time.Hour).Truncate(time.Microsecond)
	oldGateway := func(event, status string, normalized any) int64 {
		t.Helper()
		res, err := st.sql.Exec(`INSERT INTO callback_log (source, kind, event_id, business_key, status, attempts, payload, normalized, trace_id, received_at, next_attempt_at, processed_at)
			VALUES ('paydemo', 'payment', ?, 'K', ?, 1, '{}', ?, '00000000000000000000000000000000', ?, ?, ?)`, event, status, normalized, long, long, long.Add(time.Minute))
		require.NoError(t, err)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		return id
	}
	events := func(event string) map[int64]time.Time {
		t.Helper()
		rs, err := st.sql.Query(`SELECT log_id, received_at FROM callback_event WHERE source = 'paydemo' AND event_id = ?`, event)
		require.NoError(t, err)
		defer rs.Close()
		got := map[int64]time.Time{}
		for rs.Next() {
			var id int64
			var at time.Time
			require.NoError(t, rs.Scan(&id, &at))
			got[id] = at
		}
		require.NoError(t, rs.Err())
		return got
	}

	// A callback of this gateway whose payload retention deleted, stored
	// again by an older gateway (which dedupes on callback_log alone).
	first, err := st.InsertCallback(t.Context(), pending("again", 1).row)
	require.NoError(t, err)
	forget(t, st, first.ID)
	again := oldGateway("again", "FAILED", `{"unreadable":"no such field"}`)
	dead := oldGateway("old-dead", "FAILED", `{"unreadable":"no such field"}`)
	require.Empty(t, events("old-dead"), "an older gateway writes no event")

	n, _, _, err := st.DeleteDeadLettersBefore(t.Context(), long.Add(time.Hour), DeadLetterCursor{}, 100)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, e := range []string{"old-dead", "again"} {
		require.Zero(t, logRows(t, st, e), e)
	}
	require.Equal(t, map[int64]time.Time{dead: long}, events("old-dead"), "the event, with the row's received_at")
	require.Len(t, events("again"), 1)
	require.Contains(t, events("again"), first.ID, "an event already there is kept as it is, not %d", again)

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b := NewBatcher(st, 2, 16, quiet, func([]Inserted) {})
	defer b.Close()
	for i, c := range []struct {
		event string
		id    int64
	}{{"old-dead", dead}, {"again", first.ID}} {
		res, err := st.InsertCallback(t.Context(), pending(c.event, 10+i).row)
		require.NoError(t, err)
		require.Equal(t, InsertResult{ID: c.id, Duplicate: true}, res, "%s, Store.InsertCallback", c.event)
		res, err = b.InsertCallback(t.Context(), pending(c.event, 20+i).row)
		require.NoError(t, err)
		require.Equal(t, InsertResult{ID: c.id, Duplicate: true}, res, "%s, Batcher", c.event)
		require.Zero(t, logRows(t, st, c.event), c.event)
	}
}

// TestDeleteEventsBeforeWalksPastKeptEvents: a walk through the events
// received before the cutoff reads each one once, in (received_at,
// source, event_id) order, ties included: the kept ones (their callback
// still there) are read once and passed, the ones behind them whose
// callback is gone deleted, and a younger event is neither read nor
// deleted.
func TestDeleteEventsBeforeWalksPastKeptEvents(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	at := time.Now().UTC().Add(-100 * 24 * time.Hour).Truncate(time.Microsecond)
	for i := range 4 {
		_, err := st.InsertCallback(t.Context(), pending(fmt.Sprintf("kept-%d", i), i).row)
		require.NoError(t, err)
	}
	_, err := st.sql.Exec(`UPDATE callback_event SET received_at = ?`, at)
	require.NoError(t, err)
	gone := func(source, event string, received time.Time, logID int64) {
		t.Helper()
		_, err := st.sql.Exec(`INSERT INTO callback_event (source, event_id, log_id, received_at) VALUES (?, ?, ?, ?)`, source, event, logID, received)
		require.NoError(t, err)
	}
	for i := range 4 {
		gone([]string{"paydemo", "stripe"}[i%2], fmt.Sprintf("gone-%d", i), at, int64(900000+i))
	}
	gone("paydemo", "young", time.Now().UTC(), 900100)

	cutoff := time.Now().UTC().Add(-90 * 24 * time.Hour)
	var (
		cursor         EventCursor
		reads, deleted []int
	)
	for {
		n, next, read, err := st.DeleteEventsBefore(t.Context(), cutoff, cursor, 3)
		require.NoError(t, err)
		reads, deleted = append(reads, read), append(deleted, n)
		cursor = next
		if read < 3 {
			break
		}
	}
	// paydemo/gone-0, paydemo/gone-2, paydemo/kept-0 | kept-1, kept-2,
	// kept-3 | stripe/gone-1, stripe/gone-3.
	require.Equal(t, []int{3, 3, 2}, reads, "each event read once")
	require.Equal(t, []int{2, 0, 2}, deleted)
	require.Equal(t, EventCursor{ReceivedAt: at, Source: "stripe", EventID: "gone-3"}, cursor)
	rs, err := st.sql.Query(`SELECT event_id FROM callback_event ORDER BY event_id`)
	require.NoError(t, err)
	defer rs.Close()
	var left []string
	for rs.Next() {
		var e string
		require.NoError(t, rs.Scan(&e))
		left = append(left, e)
	}
	require.NoError(t, rs.Err())
	require.Equal(t, []string{"kept-0", "kept-1", "kept-2", "kept-3", "young"}, left)
}
