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
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
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

// execRetrying runs one autocommit statement on a connection of its own,
// re-running it after deadlocks and lock wait timeouts (with a short
// jittered pause) until it succeeds, fails otherwise, or ctx ends. When the
// connection cannot be trusted after an error it is discarded, never handed
// back to the pool for the next caller to trip over.
func (s *Store) execRetrying(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := retryTransient(ctx, func() (err error) {
		res, err = s.execOwnConn(ctx, query, args...)
		return err
	})
	return res, err
}

// queryRetrying is execRetrying for an autocommit statement that answers
// rows (INSERT ... RETURNING): scan is given the rows of each try, and a
// try counts only once every row is read and the server's closing packet,
// sent after the commit, says the statement succeeded.
func (s *Store) queryRetrying(ctx context.Context, scan func(*sql.Rows) error, query string, args ...any) error {
	return retryTransient(ctx, func() error { return s.queryOwnConn(ctx, scan, query, args...) })
}

// retryTransient runs try until it succeeds or fails with an error other
// than a deadlock or a lock wait timeout, pausing a short jittered while
// between tries, or until ctx ends.
func retryTransient(ctx context.Context, try func() error) error {
	for n := 0; ; n++ {
		err := try()
		if err == nil || !IsTransient(err) {
			return err
		}
		pause := time.Duration(rand.Int64N(int64(min(50, 1<<min(n, 6))) * int64(time.Millisecond)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (after %d tries): %w", ctx.Err(), n+1, err)
		case <-time.After(pause):
		}
	}
}

func (s *Store) execOwnConn(ctx context.Context, query string, args ...any) (sql.Result, error) {
	conn, err := s.sql.Conn(ctx)
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

func (s *Store) queryOwnConn(ctx context.Context, scan func(*sql.Rows) error, query string, args ...any) error {
	conn, err := s.sql.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	err = queryRows(ctx, conn, scan, query, args...)
	if err != nil && brokenConn(err) {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return err
}

// queryRows runs query on conn and hands its rows to scan; it succeeds
// only if scan does and the rows end without an error.
func queryRows(ctx context.Context, conn *sql.Conn, scan func(*sql.Rows) error, query string, args ...any) error {
	rs, err := conn.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	if err := scan(rs); err != nil {
		return err
	}
	if err := rs.Close(); err != nil {
		return err
	}
	return rs.Err()
}

// returning reports whether the server can answer an INSERT with its rows
// (INSERT ... RETURNING: MariaDB 10.5 and later; MySQL cannot).
func (s *Store) returning(ctx context.Context) (bool, error) {
	var version string
	if err := s.sql.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return false, fmt.Errorf("error reading the server's version: %w", translate(err))
	}
	return versionReturns(version), nil
}

// versionReturns reads a VERSION() string such as "10.11.19-MariaDB-0+deb12u1"
// (some builds put "5.5.5-" before it for old clients' sake).
func versionReturns(version string) bool {
	if !strings.Contains(version, "MariaDB") {
		return false
	}
	version = strings.TrimPrefix(version, "5.5.5-")
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 10 || major == 10 && minor >= 5
}

// MaxAllowedPacket reads the server's max_allowed_packet: the largest
// statement it takes.
func (s *Store) MaxAllowedPacket(ctx context.Context) (int64, error) {
	var n int64
	if err := s.sql.QueryRowContext(ctx, `SELECT @@max_allowed_packet`).Scan(&n); err != nil {
		return 0, fmt.Errorf("error reading max_allowed_packet: %w", translate(err))
	}
	return n, nil
}

// Tx is a transaction of the store: the callers' handle for the ...Tx
// operations, and a handler's way to its business tables (Gorm).
type Tx struct{ g *gorm.DB }

// Gorm is the transaction for the handler's own (business) tables, which
// commit or roll back with the callback's status.
func (tx *Tx) Gorm() *gorm.DB { return tx.g }

// InTx runs fn in one transaction (READ COMMITTED, the session's level:
// locking reads lock the rows they return and no gaps) and commits it when
// fn returns nil. A driver error is translated; fn's own errors are
// returned as they are.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	var fnErr error
	err := s.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		fnErr = fn(&Tx{g: g})
		return fnErr
	})
	if err == nil || (fnErr != nil && errors.Is(err, fnErr)) {
		return err
	}
	return translate(err) // BEGIN or COMMIT failed
}

// killWait bounds how long InTxBounded waits for the server to let a
// killed transaction go.
const killWait = 5 * time.Second

// Takeover is what InTxBounded does with a transaction's callback row
// when the deadline passes first: Row names the callback_log row the
// transaction holds (0: none yet, nothing to take over), and Then runs in
// a transaction of its own that holds that row, taken the moment the
// expired transaction lets it go, so that nothing else claims it in
// between.
type Takeover struct {
	Row  func() int64
	Then func(ctx context.Context, tx *Tx) error
	// Done, if set, learns how the takeover ended: nil when Then's
	// transaction committed, Then's error, or the store's.
	Done func(err error)
}

// InTxBounded is InTx for a transaction bounded by ctx (the worker's, with
// its deadline). Cancelling a context only closes the client's side: a
// server thread in a lock wait, or in a long statement, keeps its
// transaction and its locks until it notices, and a handler that ignores
// its context goes on while database/sql rolls its transaction back. So
// the moment ctx ends before the transaction does, InTxBounded ends it on
// the server (KILL CONNECTION of its thread, waiting until the server no
// longer lists it, at most killWait) while fn may still run. With a
// takeover whose row is known, a second transaction first queues for that
// row's lock, then the thread is killed, and InnoDB hands the row to the
// queued transaction (claims never wait, so none is queued before it):
// what Then records, nothing else has claimed the row in between. The
// connection never goes back to the pool after that, nor after it broke.
func (s *Store) InTxBounded(ctx context.Context, fn func(tx *Tx) error, t *Takeover) error {
	var fnErr, txErr error
	err := s.db.WithContext(ctx).Connection(func(g *gorm.DB) error {
		conn, ok := g.Statement.ConnPool.(*sql.Conn)
		if !ok {
			return errors.New("store: no pinned connection")
		}
		var id int64
		_ = conn.Raw(func(dc any) error {
			if sc, ok := dc.(*sessionConn); ok {
				id = sc.id
			}
			return nil
		})
		endOnServer := func() {
			var row int64
			if t != nil && t.Row != nil {
				row = t.Row()
			}
			if row == 0 {
				s.killThread(id)
				return
			}
			s.takeOver(row, id, t)
		}
		watched := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(watched)
			endOnServer()
		})
		// BEGIN on a context that never ends: database/sql rolls a
		// transaction back the moment its context ends, which would let the
		// row go before the takeover is queued for it. fn's statements get
		// ctx; the server-side end is the kill's.
		txErr = g.WithContext(context.WithoutCancel(ctx)).Transaction(func(tg *gorm.DB) error {
			fnErr = fn(&Tx{g: tg.WithContext(ctx)})
			return fnErr
		})
		switch {
		case !stop():
			<-watched // ctx ended: the thread is killed, the takeover done
		case ctx.Err() != nil && txErr != nil:
			// ctx ended, and the driver, which closes the connection the
			// moment ctx's channel closes, failed the transaction before
			// the context package got round to starting the AfterFunc:
			// stop won the race, and the takeover is ours to do.
			endOnServer()
		}
		if ctx.Err() != nil || (txErr != nil && brokenConn(txErr)) {
			// The connection may be mid-statement or closed: never back to
			// the pool, and its server thread ended before we go on.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			s.killThread(id)
		}
		return nil
	})
	if err != nil {
		return translate(err) // no connection
	}
	if txErr == nil || (fnErr != nil && errors.Is(txErr, fnErr)) {
		return txErr
	}
	return translate(txErr) // BEGIN or COMMIT failed
}

// takeoverQueued bounds how long takeOver waits to see its lock request
// queued behind the expired transaction before it kills that anyway.
const takeoverQueued = time.Second

// takeoverLockWait is the control sessions' innodb_lock_wait_timeout: a
// takeover's locking read waits through the poll, the kill and the
// expired transaction's rollback.
const takeoverLockWait = 15 * time.Second

// takeOver queues a transaction for the lock of callback_log row, kills
// the server thread that holds it, runs t.Then in the queued transaction
// once InnoDB grants it the row, and tells t.Done how it ended. When the
// row was not held at all, Then simply runs. It runs on the control pool,
// so a worker pool taken up by expired transactions cannot stall it.
func (s *Store) takeOver(row, thread int64, t *Takeover) {
	ctx, cancel := context.WithTimeout(context.Background(), takeoverQueued+killWait+takeoverLockWait)
	defer cancel()
	queued := make(chan int64, 1) // the queued transaction's thread
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		var waiter int64
		select {
		case waiter = <-queued:
		case <-ctx.Done():
		}
		if waiter != 0 {
			s.awaitLockWait(ctx, waiter)
		}
		s.killThread(thread)
	}()
	err := s.ctl.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		var waiter int64
		if err := g.Raw(`SELECT CONNECTION_ID()`).Scan(&waiter).Error; err != nil {
			return err
		}
		queued <- waiter
		var ids []int64
		if err := g.Raw(`SELECT id FROM callback_log WHERE id = ? FOR UPDATE`, row).Scan(&ids).Error; err != nil {
			return err
		}
		<-killed // the expired transaction is gone from the server
		if t.Then == nil {
			return nil
		}
		return t.Then(ctx, &Tx{g: g})
	})
	select {
	case queued <- 0: // the transaction never got that far: kill at once
	default:
	}
	<-killed
	if t.Done != nil {
		t.Done(translate(err))
	}
}

// awaitLockWait returns once the server shows the transaction of thread
// waiting for a lock, or after takeoverQueued. InnoDB's view of its
// transactions is a cache refreshed only when no one read it for 0.1 s,
// hence the pace; without the PROCESS privilege the view is refused and
// a fixed pause stands in for it.
func (s *Store) awaitLockWait(ctx context.Context, thread int64) {
	deadline := time.Now().Add(takeoverQueued)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var n int
		err := s.ctlSQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX
			WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'`, thread).Scan(&n)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			return
		}
		if n > 0 {
			return
		}
		time.Sleep(110 * time.Millisecond)
	}
}

// killThread ends the server thread id (and so its transaction, rolled
// back) and waits until the server no longer lists it, up to killWait.
// Best effort: when the server cannot be reached, neither can the thread's
// locks be taken by anyone.
func (s *Store) killThread(id int64) {
	if id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	// 1094 (unknown thread): it ended already.
	_, _ = s.ctlSQL.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
	for ctx.Err() == nil {
		var n int
		if err := s.ctlSQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, id).Scan(&n); err != nil || n == 0 {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// q is the connection an operation runs on: tx's when it is given, the
// pool's otherwise.
func (s *Store) q(ctx context.Context, tx *Tx) *gorm.DB {
	if tx != nil {
		return tx.g.WithContext(ctx)
	}
	return s.db.WithContext(ctx)
}

// session prepares every new connection: READ COMMITTED, so that no
// transaction pays a SET TRANSACTION statement of its own (the statement
// works on MariaDB and MySQL alike, unlike the variable's name), the
// configured innodb_lock_wait_timeout, and the server's id of the
// connection, kept with it so that a transaction whose deadline passed can
// be ended on the server (see InTxBounded).
type session struct {
	driver.Connector
	lockWait time.Duration // 0: the server's
}

// Connect implements driver.Connector.
func (c session) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	fail := func(what string, err error) (driver.Conn, error) {
		_ = conn.Close()
		return nil, fmt.Errorf("error %s: %w", what, err)
	}
	ex, ok := conn.(driver.ExecerContext)
	qu, ok2 := conn.(driver.QueryerContext)
	if !ok || !ok2 {
		return fail("preparing the session", errors.New("mysql driver connection cannot execute statements"))
	}
	if _, err := ex.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", nil); err != nil {
		return fail("setting the session's isolation level", err)
	}
	if c.lockWait > 0 {
		// Row locks (InnoDB) and metadata locks (an ALTER TABLE, a
		// backup's FLUSH TABLES WITH READ LOCK) alike.
		secs := max(1, int(c.lockWait/time.Second))
		stmt := fmt.Sprintf("SET SESSION innodb_lock_wait_timeout = %d, SESSION lock_wait_timeout = %d", secs, secs)
		if _, err := ex.ExecContext(ctx, stmt, nil); err != nil {
			return fail("setting the session's lock wait timeouts", err)
		}
	}
	rows, err := qu.QueryContext(ctx, "SELECT CONNECTION_ID()", nil)
	if err != nil {
		return fail("reading the connection id", err)
	}
	vals := make([]driver.Value, 1)
	err = rows.Next(vals)
	_ = rows.Close()
	if err != nil {
		return fail("reading the connection id", err)
	}
	var id int64
	switch v := vals[0].(type) {
	case int64:
		id = v
	case uint64: // BIGINT UNSIGNED, as MySQL 8 types it
		id = int64(v)
	case []byte:
		id, err = strconv.ParseInt(string(v), 10, 64)
	}
	if id <= 0 {
		return fail("reading the connection id", fmt.Errorf("not a thread id: %v (%T): %w", vals[0], vals[0], err))
	}
	return &sessionConn{Conn: conn, id: id}, nil
}

// sessionConn is a driver connection that knows its id on the server. It
// passes every optional interface of the driver's connection through.
type sessionConn struct {
	driver.Conn
	id int64
}

var (
	_ driver.ConnBeginTx        = (*sessionConn)(nil)
	_ driver.ConnPrepareContext = (*sessionConn)(nil)
	_ driver.ExecerContext      = (*sessionConn)(nil)
	_ driver.QueryerContext     = (*sessionConn)(nil)
	_ driver.Pinger             = (*sessionConn)(nil)
	_ driver.SessionResetter    = (*sessionConn)(nil)
	_ driver.Validator          = (*sessionConn)(nil)
	_ driver.NamedValueChecker  = (*sessionConn)(nil)
)

func (c *sessionConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c *sessionConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *sessionConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c *sessionConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (c *sessionConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *sessionConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *sessionConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c *sessionConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}
