// Package listen opens the processes' TCP listeners with an error that
// names the setting and the address: "http.addr: listen :8080: address
// already in use", and for an address in use the ways to choose another.
package listen

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// Error is a listener that could not be opened.
type Error struct {
	setting string
	// env is the environment variable that overrides the setting ("":
	// none).
	env string
	// Addr is the address asked for.
	Addr string
	// Err is the system's error.
	Err error
}

// Setting is the config setting naming the address (http.addr, ...).
func (e *Error) Setting() string { return e.setting }

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: listen %s: %s", e.setting, e.Addr, reason(e.Err))
	if errors.Is(e.Err, syscall.EADDRINUSE) {
		// Often another copy of the process, or another service on a
		// default port: say how to choose another address, not only
		// which one is taken.
		how := e.setting
		if e.env != "" {
			how += " (or " + e.env + ")"
		}
		msg += "; set " + how + " to a free address"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// reason is the system's own words ("address already in use",
// "permission denied", "cannot assign requested address"), without the
// "listen tcp :8080: bind:" that repeats the address.
func reason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var sys *os.SyscallError
	if errors.As(err, &sys) {
		return sys.Err.Error()
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err.Error()
	}
	return err.Error()
}

// TCP listens on addr, which the config's setting gave; env is the
// environment variable that overrides the setting, "" when none does.
func TCP(setting, env, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &Error{setting: setting, env: env, Addr: addr, Err: err}
	}
	return ln, nil
}
