package store_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestMigrateNeedsTheDatabaseToExist: a DSN naming a database that does
// not exist (a typo: calgate) is refused with "database X does not
// exist", naming mysql.dsn, and nothing is created; only
// CreateAndMigrate (gateway migrate --create) creates it.
func TestMigrateNeedsTheDatabaseToExist(t *testing.T) {
	t.Parallel()
	c, err := mysql.ParseDSN(testenv.MySQLServerDSN())
	require.NoError(t, err)
	c.DBName = "callgate_t_typo_" + testenv.Suffix()
	dsn := c.FormatDSN()
	root, err := sql.Open("mysql", testenv.MySQLServerDSN())
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = root.Exec("DROP DATABASE IF EXISTS `" + c.DBName + "`")
		_ = root.Close()
	})
	exists := func() bool {
		var n int
		require.NoError(t, root.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", c.DBName).Scan(&n))
		return n == 1
	}

	_, err = store.Migrate(dsn, time.Second)
	require.Error(t, err)
	ae := store.AsAccessError(err, dsn)
	require.NotNil(t, ae, "an access error: %v", err)
	require.Equal(t, "mysql.dsn", ae.Setting())
	require.Contains(t, ae.Error(), `mysql.dsn: database "`+c.DBName+`" does not exist (MySQL at `+c.Addr+`): `+
		"fix the name, or create it with `gateway migrate --create`")
	require.False(t, exists(), "the database was created")

	v, err := store.CreateAndMigrate(dsn, time.Second)
	require.NoError(t, err)
	require.NotZero(t, v)
	require.True(t, exists())
	again, err := store.Migrate(dsn, time.Second)
	require.NoError(t, err, "an existing database needs no --create")
	require.Equal(t, v, again)
}
