package store_test

import (
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/store"
	"callgate/internal/testenv"
)

func TestMigrateTwiceAndConcurrently(t *testing.T) {
	t.Parallel()
	c, err := mysql.ParseDSN(testenv.MySQLServerDSN())
	require.NoError(t, err)
	c.DBName = "callgate_t_" + testenv.Suffix()
	dsn := c.FormatDSN()
	t.Cleanup(func() {
		root, _ := sql.Open("mysql", testenv.MySQLServerDSN())
		_, _ = root.Exec("DROP DATABASE IF EXISTS `" + c.DBName + "`")
		_ = root.Close()
	})

	// Two processes at once on a database that does not exist yet.
	var wg sync.WaitGroup
	versions := make([]uint, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { versions[i], errs[i] = store.CreateAndMigrate(dsn, time.Second) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, versions[0], versions[1])
	require.NotZero(t, versions[0])

	// And once more: nothing to do, same version.
	v, err := store.Migrate(dsn, time.Second)
	require.NoError(t, err)
	require.Equal(t, versions[0], v)

	st := testenv.Store(t, &config.Config{MySQL: store.Config{DSN: dsn, MaxOpenConns: 2, MaxIdleConns: 2, DialTimeout: time.Second}})
	for _, table := range []string{"callback_log", "orders", "shipments", "shipment_events"} {
		var n int
		require.NoError(t, st.SQL.QueryRow("SELECT COUNT(*) FROM "+table).Scan(&n), table)
	}
}

func TestInsertCallbackDuplicateReturnsExistingID(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	st := testenv.Store(t, cfg)
	row := func(event string) *callback.Log {
		return &callback.Log{Source: "paydemo", Kind: "payment", EventID: event, BusinessKey: "K",
			Payload: []byte(`{"a":1}`), Headers: []byte(`{}`), TraceID: "0123456789abcdef0123456789abcdef", ReceivedAt: time.Now()}
	}
	a, err := st.InsertCallback(t.Context(), row("e1"))
	require.NoError(t, err)
	require.False(t, a.Duplicate)
	b, err := st.InsertCallback(t.Context(), row("e2"))
	require.NoError(t, err)
	require.False(t, b.Duplicate)
	require.NotEqual(t, a.ID, b.ID)

	again, err := st.InsertCallback(t.Context(), row("e1"))
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, a.ID, again.ID)

	got, err := st.GetCallback(t.Context(), a.ID)
	require.NoError(t, err)
	require.Equal(t, callback.StatusPending, got.Status)
	require.Equal(t, 0, got.Attempts)
	require.NotNil(t, got.NextAttemptAt, "due at once")

	_, err = st.GetCallback(t.Context(), 999999)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestUnavailableWhenServerIsGone(t *testing.T) {
	t.Parallel()
	st, err := store.Open(store.Config{DSN: "root:@tcp(127.0.0.1:1)/x", MaxOpenConns: 1, MaxIdleConns: 1, DialTimeout: 500 * time.Millisecond})
	require.NoError(t, err, "opening does not need the server")
	defer st.Close()
	err = st.Ping(t.Context())
	require.ErrorIs(t, err, store.ErrUnavailable)
}
