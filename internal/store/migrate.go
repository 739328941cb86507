package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"callgate/migrations"
)

// Migrate applies every pending migration in migrations/ and returns the
// schema version. It is idempotent, and safe from several processes at once:
// golang-migrate holds a MySQL GET_LOCK while it works, and a process that
// waited for it finds nothing left to do.
//
// The DSN's database must exist: one that does not is MySQL's "unknown
// database" (1049; AsAccessError makes it "database X does not exist"),
// so that a mistyped name (calgate) is not created and migrated as a new,
// empty database. CreateAndMigrate creates it.
func Migrate(dsn string, dialTimeout time.Duration) (uint, error) {
	return migrateDSN(dsn, dialTimeout, false)
}

// CreateAndMigrate is Migrate on a database it first creates when it does
// not exist (`gateway migrate --create`, and the tests' fresh databases).
func CreateAndMigrate(dsn string, dialTimeout time.Duration) (uint, error) {
	return migrateDSN(dsn, dialTimeout, true)
}

func migrateDSN(dsn string, dialTimeout time.Duration, create bool) (uint, error) {
	norm, err := NormalizeDSN(dsn, dialTimeout)
	if err != nil {
		return 0, err
	}
	c, err := mysql.ParseDSN(norm)
	if err != nil {
		return 0, fmt.Errorf("invalid mysql.dsn: %w", err)
	}
	// Migration files hold several statements each.
	c.MultiStatements = true
	// golang-migrate's driver needs server-side parameters for its own queries.
	c.InterpolateParams = false
	if create {
		if err := createDatabase(*c); err != nil {
			return 0, err
		}
	}
	// Reached before golang-migrate is: its errors wrap this one in
	// words of its own.
	if err := ping(c.FormatDSN()); err != nil {
		return 0, err
	}

	// The lock wait of golang-migrate's MySQL driver is 10 s; a second
	// process that gives up waiting tries again. Giving up is the
	// driver's database.ErrLocked (GET_LOCK timed out: another process
	// was migrating for longer, as migration 025 may on a loaded
	// machine) or migrate's own lock errors.
	var lastErr error
	for try := 0; try < 6; try++ {
		v, err := migrateOnce(c.FormatDSN())
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, migrate.ErrLocked) && !errors.Is(err, migrate.ErrLockTimeout) && !errors.Is(err, database.ErrLocked) {
			return 0, err
		}
		lastErr = err
		time.Sleep(time.Second)
	}
	return 0, fmt.Errorf("error applying migrations: %w", lastErr)
}

// ping connects to the DSN's database once: MySQL's refusal (no such
// database, wrong password) as it said it.
func ping(dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return fmt.Errorf("error opening database for migration: %w", err)
	}
	defer db.Close()
	if err := db.Ping(); err != nil {
		return fmt.Errorf("error connecting for migration: %w", translate(err))
	}
	return nil
}

// migrateOnce applies what is pending on the DSN's database and returns
// the schema version. Each try has a pool and a connection of its own,
// closed at its end whatever happened: golang-migrate's driver takes the
// lock on its connection as it is made, and when that fails (another
// process migrating) WithInstance returns without closing the connection
// it took, hence WithConnection on one of ours.
func migrateOnce(dsn string) (v uint, err error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return 0, fmt.Errorf("error opening database for migration: %w", err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("error connecting for migration: %w", translate(err))
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		_ = conn.Close()
		return 0, fmt.Errorf("error reading embedded migrations: %w", err)
	}
	drv, err := migratemysql.WithConnection(ctx, conn, &migratemysql.Config{})
	if err != nil {
		_ = src.Close()
		_ = conn.Close()
		return 0, fmt.Errorf("error preparing migration: %w", translate(err))
	}
	m, err := migrate.NewWithInstance("iofs", src, "mysql", drv)
	if err != nil {
		_ = src.Close()
		_ = drv.Close()
		return 0, fmt.Errorf("error preparing migration: %w", err)
	}
	defer func() {
		if serr, derr := m.Close(); err == nil && (serr != nil || derr != nil) {
			err = fmt.Errorf("error closing migration: %w", errors.Join(serr, derr))
		}
	}()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return 0, fmt.Errorf("error applying migrations: %w", err)
	}
	v, _, err = m.Version()
	if err != nil {
		return 0, fmt.Errorf("error reading schema version: %w", err)
	}
	return v, nil
}

// createDatabase creates the DSN's database when it does not exist, so that
// a fresh server needs nothing but `gateway migrate --create`.
func createDatabase(c mysql.Config) error {
	name := c.DBName
	if name == "" {
		return fmt.Errorf("mysql.dsn names no database")
	}
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return fmt.Errorf("error opening server for migration: %w", err)
	}
	defer db.Close()
	q := "CREATE DATABASE IF NOT EXISTS `" + strings.ReplaceAll(name, "`", "``") + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
	if _, err := db.Exec(q); err != nil {
		return fmt.Errorf("error creating database %s: %w", name, translate(err))
	}
	return nil
}
