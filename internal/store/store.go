// Package store owns callgate's MySQL access: the connection pool, the
// migrations, and the queries on callback_log. It translates driver errors
// into its own sentinels so that nothing above it sees MySQL error numbers.
//
// Business tables (orders, shipments) are written by the worker's handlers
// inside the transaction the worker opens; the outbox by internal/outbox.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"callgate/internal/config"
)

// Sentinels for what callers branch on.
var (
	// ErrUnavailable: MySQL could not be reached or did not answer in time.
	// The caller should answer 503 / retry later, never fail the callback.
	ErrUnavailable = errors.New("database unavailable")
	// ErrNotFound: the row does not exist.
	ErrNotFound = errors.New("not found")
)

// MySQL error numbers we act on.
const (
	errDeadlock        = 1213
	errLockWaitTimeout = 1205
	errPacketTooLarge  = 1153
)

// Store is the database handle shared by a process.
type Store struct {
	DB  *gorm.DB
	SQL *sql.DB
}

// NormalizeDSN forces the settings callgate relies on: times parsed as UTC,
// the session in UTC (NOW() matches Go's clock), client-side interpolation
// (one round trip per statement) and a dial timeout (a dead server answers
// fast instead of hanging the intake).
func NormalizeDSN(dsn string, dialTimeout time.Duration) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("invalid mysql.dsn: %w", err)
	}
	c.ParseTime = true
	c.Loc = time.UTC
	c.InterpolateParams = true
	// 0 makes the driver read the server's max_allowed_packet when it
	// connects, so an over-large statement is refused on this side and
	// the connection stays usable, instead of being sent, refused by the
	// server, and the connection closed under the pool.
	c.MaxAllowedPacket = 0
	if c.Timeout == 0 {
		c.Timeout = dialTimeout
	}
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["time_zone"] = "'+00:00'"
	if _, ok := c.Params["charset"]; !ok {
		c.Params["charset"] = "utf8mb4"
	}
	return c.FormatDSN(), nil
}

// Open connects the pool. It does not fail when MySQL is down: the pool dials
// lazily, so a process can start and report unready until MySQL is back.
func Open(cfg config.MySQL) (*Store, error) {
	dsn, err := NormalizeDSN(cfg.DSN, cfg.DialTimeout)
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{DSN: dsn, SkipInitializeWithVersion: true}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
		PrepareStmt:            false,
	})
	if err != nil {
		return nil, fmt.Errorf("error opening database: %w", err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("error opening database: %w", err)
	}
	sqlDB.SetMaxOpenConns(cfg.MaxOpenConns)
	sqlDB.SetMaxIdleConns(cfg.MaxIdleConns)
	sqlDB.SetConnMaxLifetime(cfg.ConnMaxLifetime)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	return &Store{DB: db, SQL: sqlDB}, nil
}

// SetDriverLogger sends go-sql-driver's own messages (bad idle connections
// and the like) to log at warn level instead of stderr.
func SetDriverLogger(log *slog.Logger) {
	_ = mysql.SetLogger(slog.NewLogLogger(log.Handler(), slog.LevelWarn))
}

// Close releases the pool.
func (s *Store) Close() error { return s.SQL.Close() }

// Ping checks that MySQL answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.SQL.PingContext(ctx); err != nil {
		return Translate(err)
	}
	return nil
}

// Translate maps driver errors onto the store's sentinels, keeping the cause.
func Translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, gorm.ErrRecordNotFound) || errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if IsUnavailable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// IsUnavailable reports whether err means MySQL could not be reached or did
// not answer in time, as opposed to refusing the statement.
func IsUnavailable(err error) bool {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		// Server shutting down, too many connections, server gone.
		switch myErr.Number {
		case 1040, 1053, 2002, 2003, 2006, 2013, 1927:
			return true
		}
	}
	return false
}

// IsLockNotAvailable reports a NOWAIT locking read that found the row
// locked (MariaDB answers 1205, MySQL 8 answers 3572).
func IsLockNotAvailable(err error) bool {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == errLockWaitTimeout || myErr.Number == 3572
	}
	return false
}

// IsTransient reports a deadlock or lock wait timeout: contention between
// transactions, not a fault of the statement, which can simply be run
// again (InnoDB rolled back the statement, or for a deadlock the whole
// transaction).
func IsTransient(err error) bool {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == errDeadlock || myErr.Number == errLockWaitTimeout
	}
	return false
}

// IsDeadlock reports a deadlock (1213) as opposed to a lock wait timeout.
func IsDeadlock(err error) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == errDeadlock
}

// brokenConn reports an error after which the connection that ran the
// statement cannot be trusted: the server may have closed it (a packet it
// refused, a lost connection) or the call was cut off mid-way.
func brokenConn(err error) bool {
	if IsUnavailable(err) || errors.Is(err, context.Canceled) || errors.Is(err, mysql.ErrPktTooLarge) {
		return true
	}
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == errPacketTooLarge
}

// execRetrying runs one autocommit statement on a connection of its own,
// re-running it after deadlocks and lock wait timeouts (with a short
// jittered pause) until it succeeds, fails otherwise, or ctx ends. When the
// connection cannot be trusted after an error it is discarded, never handed
// back to the pool for the next caller to trip over.
func (s *Store) execRetrying(ctx context.Context, query string, args ...any) (sql.Result, error) {
	for try := 0; ; try++ {
		res, err := s.execOwnConn(ctx, query, args...)
		if err == nil || !IsTransient(err) {
			return res, err
		}
		pause := time.Duration(rand.Int64N(int64(min(50, 1<<min(try, 6))) * int64(time.Millisecond)))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (after %d tries): %w", ctx.Err(), try+1, err)
		case <-time.After(pause):
		}
	}
}

func (s *Store) execOwnConn(ctx context.Context, query string, args ...any) (sql.Result, error) {
	conn, err := s.SQL.Conn(ctx)
	if err != nil {
		return nil, err
	}
	res, err := conn.ExecContext(ctx, query, args...)
	if err != nil && brokenConn(err) {
		// database/sql closes a connection whose Raw func reports it bad.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
	return res, err
}

// MaxAllowedPacket reads the server's max_allowed_packet: the largest
// statement it takes.
func (s *Store) MaxAllowedPacket(ctx context.Context) (int64, error) {
	var n int64
	if err := s.SQL.QueryRowContext(ctx, `SELECT @@max_allowed_packet`).Scan(&n); err != nil {
		return 0, fmt.Errorf("error reading max_allowed_packet: %w", Translate(err))
	}
	return n, nil
}
