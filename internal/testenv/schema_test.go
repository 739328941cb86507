package testenv_test

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"callgate/internal/store"
	"callgate/internal/testenv"
)

// TestDatabaseIsWhatTheMigrationsMake: a test database (a copy of the
// schema migrated once per process) is the same as a database the
// migrations made: the database's defaults (tests create tables of their
// own), every table's definition and every seeded row.
func TestDatabaseIsWhatTheMigrationsMake(t *testing.T) {
	copied := testenv.DB(t)

	c, err := mysql.ParseDSN(testenv.MySQLServerDSN())
	require.NoError(t, err)
	c.DBName = "callgate_t_" + testenv.Suffix()
	c.ParseTime = false
	root, err := sql.Open("mysql", testenv.MySQLServerDSN())
	require.NoError(t, err)
	defer root.Close()
	t.Cleanup(func() { _, _ = root.Exec("DROP DATABASE IF EXISTS `" + c.DBName + "`") })
	_, err = store.CreateAndMigrate(c.FormatDSN(), 2*time.Second)
	require.NoError(t, err)

	require.Equal(t, describe(t, c.FormatDSN()), describe(t, copied))
}

// describe is a database as a test could see it, its own name left out.
func describe(t *testing.T, dsn string) []string {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	var name, charset, collation string
	require.NoError(t, db.QueryRow("SELECT DATABASE(), @@character_set_database, @@collation_database").Scan(&name, &charset, &collation))
	out := []string{"database " + charset + " " + collation}
	for _, tb := range columnOf(t, db, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name") {
		var ignored, create string
		require.NoError(t, db.QueryRow("SHOW CREATE TABLE `"+tb+"`").Scan(&ignored, &create))
		out = append(out, strings.ReplaceAll(create, name, "DB"))
		for _, r := range rowsOf(t, db, tb) {
			out = append(out, tb+": "+r)
		}
	}
	return out
}

// columnOf is the first column of q's rows.
func columnOf(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query(q)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	return out
}

// rowsOf is each row of table, its values quoted (NULL as NULL).
func rowsOf(t *testing.T, db *sql.DB, table string) []string {
	t.Helper()
	rows, err := db.Query("SELECT * FROM `" + table + "`")
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		var row []string
		for _, b := range raw {
			if b == nil {
				row = append(row, "NULL")
			} else {
				row = append(row, "'"+string(b)+"'")
			}
		}
		out = append(out, strings.Join(row, ","))
	}
	require.NoError(t, rows.Err())
	return out
}
