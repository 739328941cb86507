package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
)

// Sentinels for what callers branch on.
var (
	// ErrUnavailable: MySQL could not be reached or did not answer in time.
	// The caller should answer 503 / retry later, never fail the callback.
	ErrUnavailable = errors.New("database unavailable")
	// ErrNotFound: the row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrLockNotAvailable: a NOWAIT locking read found the row locked by
	// another transaction.
	ErrLockNotAvailable = errors.New("row locked by another transaction")
)

// MySQL error numbers we act on.
const (
	errDeadlock        = 1213
	errLockWaitTimeout = 1205
	errPacketTooLarge  = 1153
	errDuplicateKey    = 1062
)

// translate maps driver errors onto the store's sentinels, keeping the
// cause. Every operation's error passes through it.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, gorm.ErrRecordNotFound) || errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if connectionFailure(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if isLockNotAvailable(err) {
		return fmt.Errorf("%w: %w", ErrLockNotAvailable, err)
	}
	return err
}

// DBError marks the failure of callgate's own database under a statement
// run through the store's pool (the store's own operations and the
// statements a handler runs on the transaction it is given, Tx.Gorm): the
// connection refused, reset or gone away, the server read only. Only such
// an error says that callgate's database is unavailable; a handler's
// other errors (an HTTP call to a service that is down, a deadline of its
// own, a statement the server refused) are the handler's, whatever they
// wrap.
type DBError struct{ Err error }

func (e *DBError) Error() string { return e.Err.Error() }
func (e *DBError) Unwrap() error { return e.Err }

// IsUnavailable reports whether err says that callgate's own database
// could not be reached or did not answer in time (refused, reset, gone
// away, read only, its own pool's deadline), as opposed to refusing a
// statement: ErrUnavailable from a store operation, or a connection
// failure of a statement on the store's connection (DBError). A network
// error or a deadline that did not come from that connection is not.
func IsUnavailable(err error) bool {
	var de *DBError
	return errors.Is(err, ErrUnavailable) || errors.As(err, &de)
}

// connectionFailure reports a driver error that means the connection, or
// the server, failed: what translate turns into ErrUnavailable.
func connectionFailure(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		// Too many connections, server shutting down, can't connect,
		// server gone away, lost connection, the server is read only
		// (a replica, or a primary being switched), connection killed.
		switch myErr.Number {
		case 1040, 1053, 2002, 2003, 2006, 2013, 1927, 1290, 1836:
			return true
		}
	}
	return false
}

// isLockNotAvailable reports a NOWAIT locking read that found the row
// locked (MariaDB answers 1205, MySQL 8 answers 3572).
func isLockNotAvailable(err error) bool {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == errLockWaitTimeout || myErr.Number == 3572
	}
	return false
}

// isDuplicateKey reports a row refused for a unique key already there.
func isDuplicateKey(err error) bool {
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == errDuplicateKey
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
	if connectionFailure(err) || errors.Is(err, context.Canceled) || errors.Is(err, mysql.ErrPktTooLarge) {
		return true
	}
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == errPacketTooLarge
}
