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

	"callgate/internal/callback"
)

// openTestStore is testenv.Store without the import cycle (testenv uses
// store): a fresh migrated database, dropped when the test ends.
func openTestStore(t *testing.T) *Store {
	t.Helper()
	name := fmt.Sprintf("callgate_t_st%d", time.Now().UnixNano())
	dsn := "root:@tcp(127.0.0.1:3306)/" + name
	_, err := CreateAndMigrate(dsn, 2*time.Second)
	require.NoError(t, err)
	st, err := Open(Config{DSN: dsn, MaxOpenConns: 8, MaxIdleConns: 8, DialTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = st.sql.Exec("DROP DATABASE IF EXISTS `" + name + "`")
		_ = st.Close()
	})
	return st
}

func pending(event string, n int) *pendingInsert {
	return &pendingInsert{row: &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
		Payload: []byte(`{}`), TraceID: fmt.Sprintf("%032x", n), ReceivedAt: time.Now().UTC().Truncate(time.Microsecond)},
		done: make(chan struct{})}
}

// waitForLockWait waits until an INSERT into callback_event of this
// database is in progress: in these tests, one blocked on a held key.
// (information_schema.INNODB_TRX does not always list such a statement on
// MariaDB 10.11; the process list does.)
func waitForLockWait(t *testing.T, db *sql.DB) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE db = DATABASE() AND command = 'Query' AND info LIKE 'INSERT INTO callback_event%'`).Scan(&n)
		return err == nil && n > 0
	}, 10*time.Second, 5*time.Millisecond, "the batch waits for the held key")
}

func eventsInTable(t *testing.T, st *Store) []string {
	t.Helper()
	rs, err := st.sql.Query(`SELECT event_id FROM callback_log ORDER BY id`)
	require.NoError(t, err)
	defer rs.Close()
	var got []string
	for rs.Next() {
		var s string
		require.NoError(t, rs.Scan(&s))
		got = append(got, s)
	}
	require.NoError(t, rs.Err())
	return got
}

// TestBatchInsertKeepsEveryRowWhenBatchesOverlap is the three-session
// interleaving that once made MariaDB drop rows of a batch whose duplicate
// clause assigned id, on the key that serializes one event's requests
// (callback_event's since migration 025 took callback_log's unique key):
// session 0 holds a0, batch 1 (a0 b c d e) waits on it, batch 2 (b
// x1..x4) commits, session 0 rolls back. Batch 1 must then store a0, c,
// d and e under ids of their own, answer b as batch 2's duplicate, and
// account for each of its rows.
func TestBatchInsertKeepsEveryRowWhenBatchesOverlap(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	ctx := t.Context()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	b1 := &Batcher{st: st, log: quiet, maxBatch: 10}
	b2 := &Batcher{st: st, log: quiet, maxBatch: 10}

	run := func(t *testing.T, ids int32) {
		b1.returning.Store(ids)
		b2.returning.Store(ids)
		for _, table := range []string{"callback_log", "callback_event"} {
			_, err := st.sql.Exec(`TRUNCATE TABLE ` + table)
			require.NoError(t, err)
		}
		tx, err := st.sql.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		holdEvent(t, tx, "paydemo", "a0")

		batch1 := []*pendingInsert{pending("a0", 1), pending("b", 2), pending("c", 3), pending("d", 4), pending("e", 5)}
		batch2 := []*pendingInsert{pending("b", 6), pending("x1", 7), pending("x2", 8), pending("x3", 9), pending("x4", 10)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			b1.flush(batch1)
		}()
		waitForLockWait(t, st.sql)
		b2.flush(batch2)
		require.NoError(t, tx.Rollback())
		<-done

		require.ElementsMatch(t, []string{"a0", "b", "c", "d", "e", "x1", "x2", "x3", "x4"}, eventsInTable(t, st),
			"every row of both batches is stored, b once")
		for _, p := range append(batch1, batch2...) {
			require.NoError(t, p.err, p.row.EventID)
			require.NotZero(t, p.res.ID, p.row.EventID)
		}
		require.Equal(t, batch2[0].res.ID, batch1[1].res.ID, "b is one row")
		require.True(t, batch1[1].res.Duplicate, "batch 1 met b as a duplicate")
		require.False(t, batch2[0].res.Duplicate)
		for _, p := range []*pendingInsert{batch1[0], batch1[2], batch1[3], batch1[4], batch2[1], batch2[2], batch2[3], batch2[4]} {
			require.False(t, p.res.Duplicate, "%s is new", p.row.EventID)
		}
		var stored int64
		require.NoError(t, st.sql.QueryRow(`SELECT id FROM callback_log WHERE event_id = 'c'`).Scan(&stored))
		require.Equal(t, stored, batch1[2].res.ID, "c's answer names c's row")
	}
	t.Run("batch answers, returning", func(t *testing.T) { run(t, returningYes) })
	t.Run("batch answers, read back", func(t *testing.T) { run(t, returningNo) })
}

// holdEvent writes event's callback_event row in tx, uncommitted: an
// intake writing that event waits for tx to end.
func holdEvent(t *testing.T, tx *sql.Tx, source, event string) {
	t.Helper()
	_, err := tx.Exec(`INSERT INTO callback_event (source, event_id, log_id, received_at) VALUES (?, ?, 0, NOW(6))`, source, event)
	require.NoError(t, err)
}

// TestBatchIDsFromTheInsertOnMariaDB: this MariaDB answers a batch's ids
// from the INSERT itself; MySQL and MariaDB before 10.5 get the read-back.
func TestBatchIDsFromTheInsertOnMariaDB(t *testing.T) {
	t.Parallel()
	b := &Batcher{st: openTestStore(t)}
	require.True(t, b.canReturn(t.Context()), "MariaDB 10.5+ answers INSERT ... RETURNING")
	for version, want := range map[string]bool{
		"10.11.19-MariaDB-0+deb12u1": true,
		"11.4.2-MariaDB":             true,
		"10.5.0-MariaDB":             true,
		"5.5.5-10.6.16-MariaDB":      true,
		"10.4.32-MariaDB":            false,
		"8.0.36":                     false,
		"8.4.2-commercial":           false,
	} {
		require.Equal(t, want, versionReturns(version), version)
	}
}

// TestBatchRowsGetIDsInArrivalOrder: with a writer held by a batch that
// waits on a key, 30 callbacks of one key arrive a millisecond apart and
// queue up for the next batch; their ids follow the order they arrived in,
// not the order of their event ids.
func TestBatchRowsGetIDsInArrivalOrder(t *testing.T) {
	t.Parallel()
	for _, writers := range []int{1, 2} {
		t.Run(fmt.Sprintf("writers=%d", writers), func(t *testing.T) {
			t.Parallel()
			st := openTestStore(t)
			b := NewBatcher(st, writers, 256, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			defer b.Close()
			ctx := t.Context()

			tx, err := st.sql.BeginTx(ctx, nil)
			require.NoError(t, err)
			holdEvent(t, tx, "shipdemo", "hold")
			mk := func(event string, n int) *callback.Log {
				return &callback.Log{Source: "shipdemo", Kind: "logistics", EventID: event, BusinessKey: "WB-1", Payload: []byte(`{}`),
					TraceID: fmt.Sprintf("%032x", n+1), ReceivedAt: time.Now().UTC().Truncate(time.Microsecond)}
			}
			holdDone := make(chan error, 1)
			go func() { _, err := b.InsertCallback(ctx, mk("hold", 1000)); holdDone <- err }()
			waitForLockWait(t, st.sql)

			// Sent in this order, a millisecond apart, each reaching the
			// batcher before the next is sent; their event ids sort the
			// other way round.
			const n = 30
			queue := b.queues[b.shard(mk("", 0))]
			results := make([]chan InsertResult, n)
			for i := range n {
				results[i] = make(chan InsertResult, 1)
				go func() {
					res, err := b.InsertCallback(ctx, mk(fmt.Sprintf("WB-1:%d", n-i), i))
					if err != nil {
						res = InsertResult{}
					}
					results[i] <- res
				}()
				require.Eventually(t, func() bool { return len(queue) == i+1 }, 5*time.Second, 100*time.Microsecond)
				time.Sleep(time.Millisecond)
			}
			require.NoError(t, tx.Rollback())
			require.NoError(t, <-holdDone)
			var ids []int64
			for i := range n {
				res := <-results[i]
				require.NotZero(t, res.ID, "callback %d stored", i)
				require.False(t, res.Duplicate)
				ids = append(ids, res.ID)
			}
			for i := 1; i < n; i++ {
				require.Less(t, ids[i-1], ids[i], "callback %d was sent before callback %d: ids %v", i-1, i, ids)
			}
		})
	}
}

// TestBatchBoundedByBytes: 20 rows of 1 MiB queue up behind a held batch
// (together more than MySQL's max_allowed_packet of 16 MiB). They are all
// stored, in statements that fit, and the pool hands no broken connection
// to the requests that follow.
func TestBatchBoundedByBytes(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	var logged strings.Builder
	b := NewBatcher(st, 1, 256, slog.New(slog.NewTextHandler(&syncWriter{w: &logged}, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	defer b.Close()
	ctx := t.Context()
	tx, err := st.sql.BeginTx(ctx, nil)
	require.NoError(t, err)
	holdEvent(t, tx, "paydemo", "hold")
	errs := make(chan error, 21)
	go func() { _, err := b.InsertCallback(ctx, pending("hold", 1).row); errs <- err }()
	waitForLockWait(t, st.sql)

	const n = 20
	payload := []byte(`{"pad":"` + strings.Repeat("x", 1<<20-10) + `"}`)
	for i := range n {
		r := pending(fmt.Sprintf("big-%d", i), 100+i).row
		r.Payload = payload
		go func() { _, err := b.InsertCallback(ctx, r); errs <- err }()
	}
	require.Eventually(t, func() bool { return len(b.queues[0]) == n }, 10*time.Second, 5*time.Millisecond, "the large rows queue up")
	require.NoError(t, tx.Rollback())
	for range n + 1 {
		require.NoError(t, <-errs)
	}
	var stored int
	require.NoError(t, st.sql.QueryRow(`SELECT COUNT(*) FROM callback_log WHERE LENGTH(payload) = ?`, len(payload)).Scan(&stored))
	require.Equal(t, n, stored)
	require.Empty(t, logged.String(), "no statement was refused (no fallback to row by row)")
	for i := range 16 {
		_, err := b.InsertCallback(ctx, pending(fmt.Sprintf("small-%d", i), 200+i).row)
		require.NoError(t, err, "small callback %d after the burst", i)
	}
}

// syncWriter serialises writes from the batcher's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestBatchCommitsAfterThePreviousIsAnswered: a writer runs the next
// batch's statements while the previous batch is still on its way (its
// COMMIT, its announcement), but commits and answers it only after the
// previous one is answered, so rows are committed and announced in the
// order they were written. Here the first batch's announcement is held:
// the second batch's row is written (seen by a dirty read) but neither
// committed nor answered until the first is released; then both are
// announced in order.
func TestBatchCommitsAfterThePreviousIsAnswered(t *testing.T) {
	t.Parallel()
	st := openTestStore(t)
	release := make(chan struct{})
	var mu sync.Mutex
	var announced []int64
	onNew := func(rows []Inserted) {
		mu.Lock()
		first := len(announced) == 0
		for _, r := range rows {
			announced = append(announced, r.ID)
		}
		mu.Unlock()
		if first {
			<-release
		}
	}
	b := NewBatcher(st, 1, 256, slog.New(slog.NewTextHandler(io.Discard, nil)), onNew)
	defer b.Close()
	var releaseOnce sync.Once
	releaseFirst := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseFirst() // before Close, should the test fail first
	ctx := t.Context()
	type answer struct {
		res InsertResult
		err error
	}
	send := func(event string, n int) chan answer {
		ch := make(chan answer, 1)
		go func() {
			res, err := b.InsertCallback(ctx, pending(event, n).row)
			ch <- answer{res, err}
		}()
		return ch
	}
	first := send("first", 1)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(announced) == 1
	}, 10*time.Second, time.Millisecond, "the first batch is committed and being announced")
	second := send("second", 2)

	dirty, err := st.sql.Conn(ctx)
	require.NoError(t, err)
	defer dirty.Close()
	_, err = dirty.ExecContext(ctx, `SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var n int
		err := dirty.QueryRowContext(ctx, `SELECT COUNT(*) FROM callback_log WHERE event_id = 'second'`).Scan(&n)
		return err == nil && n == 1
	}, 10*time.Second, time.Millisecond, "the second batch's statements run while the first is being announced")
	require.Zero(t, logRows(t, st, "second"), "not committed before the first batch is answered")
	select {
	case a := <-second:
		t.Fatalf("the second batch was answered before the first: %+v", a)
	default:
	}
	_, _ = dirty.ExecContext(ctx, `SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED`)

	releaseFirst()
	a1, a2 := <-first, <-second
	require.NoError(t, a1.err)
	require.NoError(t, a2.err)
	require.Less(t, a1.res.ID, a2.res.ID)
	require.Equal(t, 1, logRows(t, st, "second"))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int64{a1.res.ID, a2.res.ID}, announced)
}
