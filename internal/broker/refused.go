package broker

import (
	"errors"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// RefusedError is the broker refusing what amqp.url(s) names: the user and
// password (403 ACCESS_REFUSED), the vhost (530 NOT_ALLOWED), or the
// user's permissions on callgate's exchanges and queues (403 on a
// declaration). Unlike a broker that is down, it lasts until the URL or
// the broker's users change, so a process that never connected stops on
// it. Its text names the setting, the node, the user and the vhost, never
// the password.
type RefusedError struct {
	// setting is amqp.url or amqp.urls.
	setting string
	// Node is host:port/vhost; User and Vhost are the URL's.
	Node, User, Vhost string
	// Err is the broker's answer.
	Err error
	// declaring: refused on a declaration, after the login.
	declaring bool
}

// Setting is the config setting to fix.
func (e *RefusedError) Setting() string { return e.setting }

func (e *RefusedError) Error() string {
	var what string
	var ae *amqp.Error
	switch {
	case e.declaring:
		what = fmt.Sprintf("RabbitMQ at %s refused user %q callgate's exchanges and queues (the user needs configure, write and read permissions on them)", e.Node, e.User)
	case errors.Is(e.Err, amqp.ErrVhost) || errors.As(e.Err, &ae) && ae.Code == amqp.NotAllowed:
		what = fmt.Sprintf("RabbitMQ at %s refused user %q the vhost %q (it does not exist, or the user has no permission on it)", e.Node, e.User, e.Vhost)
	default:
		what = fmt.Sprintf("RabbitMQ at %s refused user %q: wrong user or password", e.Node, e.User)
	}
	reason := e.Err.Error()
	if errors.As(e.Err, &ae) {
		reason = fmt.Sprintf("%d: %s", ae.Code, ae.Reason)
	}
	return fmt.Sprintf("%s: %s (%s)", e.setting, what, reason)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// asRefused returns err, from dialling url and declaring the topology, as
// a RefusedError when the broker refused the login, the vhost or a
// declaration's permissions, else nil. A connection limit (530 "...
// limit ... is reached") passes with time, so it is not a refusal.
func asRefused(err error, setting, url string) *RefusedError {
	var ae *amqp.Error
	switch {
	case errors.Is(err, amqp.ErrCredentials), errors.Is(err, amqp.ErrVhost):
	case errors.As(err, &ae) && ae.Server && ae.Code == amqp.AccessRefused:
	case errors.As(err, &ae) && ae.Server && ae.Code == amqp.NotAllowed && !strings.Contains(strings.ToLower(ae.Reason), "limit"):
	default:
		return nil
	}
	var de *declareError
	r := &RefusedError{setting: setting, Node: NodeName(url), Err: err, declaring: errors.As(err, &de)}
	if u, perr := amqp.ParseURI(url); perr == nil {
		r.User, r.Vhost = u.Username, u.Vhost
	}
	// Keep the broker's own answer, not the wrapping that names the URL.
	if errors.As(err, &ae) {
		r.Err = ae
	}
	return r
}

// declareError marks a failure of the topology's declaration, after the
// login succeeded.
type declareError struct{ err error }

func (e *declareError) Error() string { return e.err.Error() }
func (e *declareError) Unwrap() error { return e.err }
