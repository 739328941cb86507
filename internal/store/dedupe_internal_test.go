package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
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

// forget does to callback id what retention does after max_age: SUCCESS,
// processed long ago, deleted with DeleteSucceededBefore.
func forget(t *testing.T, st *Store, id int64) {
	t.Helper()
	old := time.Now().UTC().Add(-60 * 24 * time.Hour)
	_, err := st.sql.Exec(`UPDATE callback_log SET status = 'SUCCESS', processed_at = ? WHERE id = ?`, old, id)
	require.NoError(t, err)
	n, err := st.DeleteSucceededBefore(t.Context(), old.Add(time.Hour), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "retention deleted the callback")
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
	migrateTo := func(v uint) {
		t.Helper()
		var name string
		require.NoError(t, st.sql.QueryRow(`SELECT DATABASE()`).Scan(&name))
		db, err := sql.Open("mysql", "root:@tcp(127.0.0.1:3306)/"+name+"?multiStatements=true")
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

	// A resend of a backfilled callback whose row is then deleted.
	var id int64
	require.NoError(t, st.sql.QueryRow(`SELECT id FROM callback_log WHERE event_id = 'old-1'`).Scan(&id))
	forget(t, st, id)
	res, err := st.InsertCallback(t.Context(), pending("old-1", 9).row)
	require.NoError(t, err)
	require.Equal(t, InsertResult{ID: id, Duplicate: true}, res)
}
