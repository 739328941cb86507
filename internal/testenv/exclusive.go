package testenv

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ManyConnections is for a test whose processes hold many of the MariaDB
// server's connections at once (several workers, pools of 24 or more):
// it waits until no other such test runs against the same server, in
// this make test or in another one beside it, and holds that until the
// test ends. The tests share one server of max_connections 151 (a
// distribution's default); two of them at once ran it out ("Error 1040:
// Too many connections") when two make test runs met. The turn is a
// named lock of the server, so it holds across processes and runs; it
// costs one connection.
// A test that already holds the turn (a second call) goes on.
func ManyConnections(t testing.TB) {
	t.Helper()
	if _, held := manyConnections.LoadOrStore(t, true); held {
		return
	}
	t.Cleanup(func() { manyConnections.Delete(t) })
	db, err := sql.Open("mysql", MySQLServerDSN())
	require.NoError(t, err)
	conn, err := db.Conn(context.Background())
	require.NoError(t, err, "connecting for the many-connections turn")
	var got sql.NullInt64
	start := time.Now()
	require.NoError(t, conn.QueryRowContext(context.Background(), "SELECT GET_LOCK('callgate_test_many_connections', 900)").Scan(&got))
	require.True(t, got.Valid && got.Int64 == 1, "no turn among the many-connections tests within 15 minutes")
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %s for another many-connections test to end", waited.Round(time.Second))
	}
	t.Cleanup(func() {
		_, _ = conn.ExecContext(context.Background(), "DO RELEASE_LOCK('callgate_test_many_connections')")
		_ = conn.Close()
		_ = db.Close()
	})
}

// manyConnections: the tests of this process holding the turn.
var manyConnections sync.Map
