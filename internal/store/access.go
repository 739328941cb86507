package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// MySQL error numbers that no retry fixes: the DSN is wrong.
const (
	errDBAccessDenied = 1044 // ER_DBACCESS_DENIED_ERROR: the user may not use the database
	errAccessDenied   = 1045 // ER_ACCESS_DENIED_ERROR: wrong user or password (or host)
	errBadDB          = 1049 // ER_BAD_DB_ERROR: the database does not exist
)

// AccessError is MySQL refusing what mysql.dsn names: the user and
// password, or the database. Unlike a server that is down (which the
// processes wait for), it lasts until the DSN or the server's grants are
// changed, so a process stops at start on it. Its text names the setting,
// the server, the user and the database, never the password.
type AccessError struct {
	// Addr, User and DBName are the DSN's (no password).
	Addr, User, DBName string
	// Number is the MySQL error number (1044, 1045 or 1049).
	Number uint16
	// Err is the server's error.
	Err *mysql.MySQLError
}

// Setting is the config setting to fix.
func (e *AccessError) Setting() string { return "mysql.dsn" }

func (e *AccessError) Error() string {
	var what string
	switch e.Number {
	case errAccessDenied:
		what = fmt.Sprintf("MySQL at %s refused user %q: wrong user or password", e.Addr, e.User)
	case errBadDB:
		// Never created on its own: a mistyped name would get a new
		// empty database.
		what = fmt.Sprintf("database %q does not exist (MySQL at %s): fix the name, or create it with `gateway migrate --create`", e.DBName, e.Addr)
	default:
		what = fmt.Sprintf("MySQL at %s does not let user %q use database %q: grant it, or fix the DSN", e.Addr, e.User, e.DBName)
	}
	return fmt.Sprintf("%s: %s (%s)", e.Setting(), what, e.Err.Message)
}

func (e *AccessError) Unwrap() error { return e.Err }

// AsAccessError returns err as an *AccessError when MySQL refused dsn's
// user, password or database (1044, 1045, 1049), else nil: a server that
// is down, slow or refusing the connection is not one.
func AsAccessError(err error, dsn string) *AccessError {
	var my *mysql.MySQLError
	if !errors.As(err, &my) {
		return nil
	}
	switch my.Number {
	case errDBAccessDenied, errAccessDenied, errBadDB:
	default:
		return nil
	}
	e := &AccessError{Number: my.Number, Err: my}
	if c, perr := mysql.ParseDSN(dsn); perr == nil {
		e.Addr, e.User, e.DBName = c.Addr, c.User, c.DBName
	}
	return e
}

// CheckAccess pings MySQL once through st, whose DSN is dsn. It returns
// an *AccessError when the server refuses the user, the password or the
// database; the ping's error when the server cannot be reached now (the
// caller carries on: the pool dials again at every use); nil when it
// answers.
func CheckAccess(ctx context.Context, st *Store, dsn string) error {
	err := st.Ping(ctx)
	if ae := AsAccessError(err, dsn); ae != nil {
		return ae
	}
	return err
}
