package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"
)

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
