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
	if IsUnavailable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if isLockNotAvailable(err) {
		return fmt.Errorf("%w: %w", ErrLockNotAvailable, err)
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

// isLockNotAvailable reports a NOWAIT locking read that found the row
// locked (MariaDB answers 1205, MySQL 8 answers 3572).
func isLockNotAvailable(err error) bool {
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
