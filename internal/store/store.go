// Package store owns callgate's MySQL access: the connection pool, the
// migrations, and every statement on callgate's own tables (callback_log,
// callback_attempt, callback_key, outbox, scheduler_lease, replay_job,
// admin_audit, admin_session), one file per table or concern, as named
// operations. An operation that must join a caller's transaction takes it
// explicitly (the ...Tx variants and InTx). It translates driver errors
// into its own sentinels, so nothing above it sees a gorm or MySQL error
// of its statements, and it exports no handle of its own.
//
// Business tables (orders, shipments, a user's tables) are the handlers'
// own: a handler gets its callback's transaction as a *gorm.DB (Tx.Gorm)
// and writes them itself, committing together with the callback's status.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Store is the database handle shared by a process.
type Store struct {
	db  *gorm.DB
	sql *sql.DB
	// ctl and ctlSQL are the control pool: a few connections of their own
	// for ending expired transactions and taking their rows over
	// (InTxBounded), whatever the main pool is doing.
	ctl    *gorm.DB
	ctlSQL *sql.DB
	// replica: an intake insert counts only once a replica acknowledged
	// it (mysql.durability: replica; see replication.go).
	replica bool
	semi    semiSyncState
	// ret caches whether the server answers INSERT ... RETURNING
	// (returningUnknown until read; canReturn).
	ret atomic.Int32
	// floor caches the earliest day a PENDING callback can be on
	// (pendingDays).
	floor pendingFloor
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
func Open(cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	dsn, err := NormalizeDSN(cfg.DSN, cfg.DialTimeout)
	if err != nil {
		return nil, err
	}
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("invalid mysql.dsn: %w", err)
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("invalid mysql.dsn: %w", err)
	}
	sqlDB := sql.OpenDB(session{Connector: connector, lockWait: cfg.LockWaitTimeout})
	db, err := openGorm(sqlDB)
	if err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	if err := markErrors(db); err != nil {
		_ = sqlDB.Close()
		return nil, err
	}
	sqlDB.SetMaxOpenConns(cfg.MaxOpenConns)
	sqlDB.SetMaxIdleConns(cfg.MaxIdleConns)
	sqlDB.SetConnMaxLifetime(cfg.ConnMaxLifetime)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	ctlSQL := sql.OpenDB(session{Connector: connector, lockWait: takeoverLockWait})
	ctlSQL.SetMaxOpenConns(ctlConns)
	ctlSQL.SetMaxIdleConns(1)
	ctlSQL.SetConnMaxIdleTime(time.Minute)
	ctl, err := openGorm(ctlSQL)
	if err != nil {
		_ = sqlDB.Close()
		_ = ctlSQL.Close()
		return nil, err
	}
	return &Store{db: db, sql: sqlDB, ctl: ctl, ctlSQL: ctlSQL, replica: cfg.Durability == DurabilityReplica}, nil
}

// ctlConns bounds the control pool: each takeover holds one connection
// for its transaction and uses one for its poll and kill, for a fraction
// of a second.
const ctlConns = 8

func openGorm(sqlDB *sql.DB) (*gorm.DB, error) {
	db, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: sqlDB, SkipInitializeWithVersion: true}), &gorm.Config{
		Logger:                 logger.Discard,
		SkipDefaultTransaction: true,
		DisableAutomaticPing:   true,
		PrepareStmt:            false,
	})
	if err != nil {
		return nil, fmt.Errorf("error opening database: %w", err)
	}
	return db, nil
}

// markErrors wraps in a DBError the error of a statement run through db
// that says callgate's own database failed (the connection refused, reset,
// gone away, the server read only), so that it is told apart from a
// handler's own errors (IsUnavailable). A statement whose context ended
// failed because of that context (a handler's own deadline, the worker's),
// not the database, and other errors (a duplicate key, a row not found)
// are left exactly as the driver and gorm return them.
func markErrors(db *gorm.DB) error {
	mark := func(g *gorm.DB) {
		var de *DBError
		if g.Error == nil || errors.As(g.Error, &de) || !connectionFailure(g.Error) ||
			errors.Is(g.Error, context.DeadlineExceeded) || errors.Is(g.Error, context.Canceled) {
			return
		}
		if ctx := g.Statement.Context; ctx != nil && ctx.Err() != nil {
			return
		}
		g.Error = &DBError{Err: g.Error}
	}
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().After("*").Register("callgate:mark_errors", mark),
		cb.Query().After("*").Register("callgate:mark_errors", mark),
		cb.Update().After("*").Register("callgate:mark_errors", mark),
		cb.Delete().After("*").Register("callgate:mark_errors", mark),
		cb.Row().After("*").Register("callgate:mark_errors", mark),
		cb.Raw().After("*").Register("callgate:mark_errors", mark),
	} {
		if err != nil {
			return fmt.Errorf("error registering the error marker: %w", err)
		}
	}
	return nil
}

// SetDriverLogger sends go-sql-driver's own messages (bad idle connections
// and the like) to log at warn level instead of stderr.
func SetDriverLogger(log *slog.Logger) {
	_ = mysql.SetLogger(slog.NewLogLogger(log.Handler(), slog.LevelWarn))
}

// Close releases the pool.
func (s *Store) Close() error { return errors.Join(s.sql.Close(), s.ctlSQL.Close()) }

// Ping checks that MySQL answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.sql.PingContext(ctx); err != nil {
		return translate(err)
	}
	return nil
}
