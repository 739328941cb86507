package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestInTxBoundedEndsTheTransactionOnTheServer: a transaction whose
// deadline passes while the server runs a long statement (here a
// SLEEP(5) after it locked a row) is ended on the server before
// InTxBounded returns: the row is free at once, the server no longer
// lists its thread, and the pool's connections still work.
func TestInTxBoundedEndsTheTransactionOnTheServer(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	_, err := st.SQL.Exec(`CREATE TABLE held (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`)
	require.NoError(t, err)
	_, err = st.SQL.Exec(`INSERT INTO held VALUES (1, 0)`)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var thread int64
	start := time.Now()
	err = st.InTxBounded(ctx, func(tx *store.Tx) error {
		g := tx.Gorm().WithContext(ctx)
		if err := g.Raw(`SELECT CONNECTION_ID()`).Scan(&thread).Error; err != nil {
			return err
		}
		if err := g.Exec(`UPDATE held SET v = v + 1 WHERE id = 1`).Error; err != nil {
			return err
		}
		return g.Exec(`SELECT SLEEP(5)`).Error
	}, nil)
	require.Error(t, err)
	require.True(t, errors.Is(err, context.DeadlineExceeded) || store.IsUnavailable(err), "%v", err)
	require.Less(t, time.Since(start), 4*time.Second, "returned long before the SLEEP would have ended")
	require.NotZero(t, thread)

	var listed int
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, thread).Scan(&listed))
	require.Zero(t, listed, "the server thread is gone")
	tx, err := st.SQL.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	var v int
	require.NoError(t, tx.QueryRow(`SELECT v FROM held WHERE id = 1 FOR UPDATE NOWAIT`).Scan(&v), "the row lock was released")
	require.Zero(t, v, "the update was rolled back")
	require.NoError(t, tx.Rollback())

	for range 20 { // every pooled connection still works
		require.NoError(t, st.Ping(t.Context()))
		require.NoError(t, st.InTxBounded(t.Context(), func(tx *store.Tx) error { return tx.Gorm().Exec(`SELECT 1`).Error }, nil))
	}
}

// TestLockWaitTimeoutPerSession: the pool's sessions get the configured
// wait for row locks (innodb_lock_wait_timeout) and for metadata locks
// (lock_wait_timeout): a statement on a table whose metadata another
// session locks gives up after it, as contention.
func TestLockWaitTimeoutPerSession(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t, func(c *config.Config) { c.MySQL.LockWaitTimeout = 3 * time.Second })
	st, err := store.Open(cfg.MySQL)
	require.NoError(t, err)
	defer st.Close()
	var waits struct {
		Row  int `gorm:"column:row_wait"`
		Meta int `gorm:"column:meta_wait"`
	}
	require.NoError(t, st.InTxBounded(t.Context(), func(tx *store.Tx) error {
		return tx.Gorm().Raw(`SELECT @@SESSION.innodb_lock_wait_timeout AS row_wait, @@SESSION.lock_wait_timeout AS meta_wait`).Scan(&waits).Error
	}, nil))
	require.Equal(t, 3, waits.Row)
	require.Equal(t, 3, waits.Meta)

	plain := testenv.Store(t, cfg) // its SQL: sessions with the server's defaults
	_, err = plain.SQL.Exec(`CREATE TABLE mdl (id INT PRIMARY KEY) ENGINE=InnoDB`)
	require.NoError(t, err)
	conn, err := plain.SQL.Conn(t.Context())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(t.Context(), `LOCK TABLES mdl WRITE`)
	require.NoError(t, err)
	defer func() { _, _ = conn.ExecContext(context.Background(), `UNLOCK TABLES`) }()
	start := time.Now()
	err = st.InTxBounded(t.Context(), func(tx *store.Tx) error { return tx.Gorm().Exec(`INSERT INTO mdl VALUES (1)`).Error }, nil)
	require.Error(t, err)
	require.True(t, store.IsTransient(err), "a metadata lock wait that ran out is contention: %v", err)
	require.Less(t, time.Since(start), 20*time.Second, "given up after 3 s, not the server's day")
}

// TestLockKeysRefreshesKeysInUse: locking keys for a batch takes a key
// row that exists (its locked_at 40 days old, older than the retention
// job's cut-off) and writes its locked_at again, creates the row of a key
// met for the first time, and reports a key another transaction holds as
// busy, without waiting for it or touching it.
func TestLockKeysRefreshesKeysInUse(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	old := time.Now().UTC().Add(-40 * 24 * time.Hour)
	for _, k := range []string{"ORD-OLD", "ORD-HELD"} {
		_, err := st.SQL.Exec(`INSERT INTO callback_key (kind, business_key, locked_at) VALUES ('payment', ?, ?)`, k, old)
		require.NoError(t, err)
	}
	other, err := st.SQL.BeginTx(t.Context(), nil)
	require.NoError(t, err)
	defer func() { _ = other.Rollback() }()
	_, err = other.Exec(`SELECT 1 FROM callback_key WHERE kind = 'payment' AND business_key = 'ORD-HELD' FOR UPDATE`)
	require.NoError(t, err)

	keys := []store.Key{{Kind: "payment", BusinessKey: "ORD-OLD"}, {Kind: "payment", BusinessKey: "ORD-NEW"}, {Kind: "payment", BusinessKey: "ORD-HELD"}}
	var busy map[store.Key]bool
	require.NoError(t, st.InTx(t.Context(), func(tx *store.Tx) error {
		busy, err = st.LockKeysTx(t.Context(), tx, keys)
		return err
	}))
	require.Equal(t, map[store.Key]bool{keys[2]: true}, busy)
	require.NoError(t, other.Rollback())
	lockedAt := map[string]time.Time{}
	rows, err := st.SQL.Query(`SELECT business_key, locked_at FROM callback_key WHERE kind = 'payment'`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var k string
		var at time.Time
		require.NoError(t, rows.Scan(&k, &at))
		lockedAt[k] = at
	}
	require.NoError(t, rows.Err())
	require.WithinDuration(t, time.Now(), lockedAt["ORD-OLD"], time.Minute, "a key in use is refreshed")
	require.WithinDuration(t, time.Now(), lockedAt["ORD-NEW"], time.Minute, "a new key is created")
	require.WithinDuration(t, old, lockedAt["ORD-HELD"], time.Second, "a busy key is left alone")
}

// TestTakeoverHoldsTheRowBeforeAnyoneElse: when a transaction's deadline
// passes, the takeover's transaction gets the callback's row the moment
// the expired transaction lets it go. Another session trying to lock the
// row without waiting (as the worker's claims do), as fast as it can, only
// ever finds it after the takeover committed what it records; whether the
// expired transaction was running a statement on the server or idle
// (a handler busy elsewhere, ignoring its context), which database/sql
// would roll back the moment the context ended.
func TestTakeoverHoldsTheRowBeforeAnyoneElse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		busy func(ctx context.Context, g *gorm.DB) error
	}{
		{"statement", func(ctx context.Context, g *gorm.DB) error { return g.Exec(`SELECT SLEEP(5)`).Error }},
		{"idle", func(context.Context, *gorm.DB) error { time.Sleep(3 * time.Second); return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testTakeover(t, c.busy)
		})
	}
}

func testTakeover(t *testing.T, busy func(ctx context.Context, g *gorm.DB) error) {
	// The sessions' lock wait as short as a worker with a 2 s handler
	// timeout has it: the takeover's own wait must not be that one.
	cfg := testenv.Config(t, func(c *config.Config) { c.MySQL.LockWaitTimeout = time.Second })
	st := testenv.Store(t, cfg)
	res, err := st.InsertCallback(t.Context(), &callback.Log{Source: "paydemo", Kind: "payment", EventID: "takeover", BusinessKey: "ORD-T",
		Payload: []byte(`{}`), ReceivedAt: time.Now().UTC()})
	require.NoError(t, err)
	id := res.ID

	locked := make(chan struct{})
	seen := make(chan string, 1)
	go func() { // the competitor
		<-locked
		for t.Context().Err() == nil {
			tx, err := st.SQL.BeginTx(t.Context(), nil)
			if err != nil {
				continue
			}
			var lastError sql.NullString
			err = tx.QueryRow(`SELECT last_error FROM callback_log WHERE id = ? FOR UPDATE NOWAIT`, id).Scan(&lastError)
			_ = tx.Rollback()
			if err == nil {
				seen <- lastError.String
				return
			}
		}
	}()

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	done := errors.New("Done not called")
	err = st.InTxBounded(ctx, func(tx *store.Tx) error {
		g := tx.Gorm().WithContext(ctx)
		var got []int64
		if err := g.Raw(`SELECT id FROM callback_log WHERE id = ? FOR UPDATE`, id).Scan(&got).Error; err != nil {
			return err
		}
		close(locked)
		return busy(ctx, g)
	}, &store.Takeover{
		Row: func() int64 { return id },
		Then: func(ctx context.Context, tx *store.Tx) error {
			return tx.Gorm().WithContext(ctx).Exec(`UPDATE callback_log SET last_error = 'taken over' WHERE id = ?`, id).Error
		},
		Done: func(err error) { done = err },
	})
	require.Error(t, err)
	require.NoError(t, done, "the takeover committed")
	select {
	case got := <-seen:
		require.Equal(t, "taken over", got, "nobody had the row between the expired transaction and the takeover")
	case <-time.After(10 * time.Second):
		t.Fatal("the competitor never got the row")
	}
}
