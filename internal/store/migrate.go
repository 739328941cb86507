package store

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"callgate/migrations"
)

// Migrate applies every pending migration in migrations/ and returns the
// schema version. It is idempotent, and safe from several processes at once:
// golang-migrate holds a MySQL GET_LOCK while it works, and a process that
// waited for it finds nothing left to do.
func Migrate(dsn string, dialTimeout time.Duration) (uint, error) {
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
	if err := createDatabase(*c); err != nil {
		return 0, err
	}
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return 0, fmt.Errorf("error opening database for migration: %w", err)
	}
	defer db.Close()

	// The lock wait of golang-migrate's MySQL driver is 10 s; a second
	// process that gives up waiting tries again.
	var lastErr error
	for try := 0; try < 6; try++ {
		v, err := migrateOnce(db)
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, migrate.ErrLocked) && !errors.Is(err, migrate.ErrLockTimeout) {
			return 0, err
		}
		lastErr = err
		time.Sleep(time.Second)
	}
	return 0, fmt.Errorf("error applying migrations: %w", lastErr)
}

// migrateOnce applies what is pending and returns the schema version. It
// closes what golang-migrate opened, including the connection its driver
// holds on to.
func migrateOnce(db *sql.DB) (v uint, err error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return 0, fmt.Errorf("error reading embedded migrations: %w", err)
	}
	drv, err := migratemysql.WithInstance(db, &migratemysql.Config{})
	if err != nil {
		_ = src.Close()
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
// a fresh server needs nothing but `gateway migrate`.
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
