package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math/rand/v2"
	"time"
)

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
