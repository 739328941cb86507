package callback

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"
)

// Handler processes one callback of its kind inside the worker's
// transaction. It updates the business tables through tx and writes the
// downstream notifications through out; both commit together with the
// callback's SUCCESS, or not at all.
//
// A Handler must be idempotent: the same callback may come again (a broker
// redelivery after a crash, an operator's replay) and must then change
// nothing and write no new notification.
//
// The error says what happens next: nil is SUCCESS; Permanent(err) sends the
// callback to FAILED at once; RetryAfter(d, err) is a failed attempt whose
// next one comes after d; any other error is a failed attempt retried with
// the source's backoff until its max_attempts, then FAILED, whatever it
// wraps (a network error, a deadline of the handler's own). Only a
// failure of callgate's own database connection (a statement on tx that
// could not reach the server) is not the callback's fault: it uses no
// attempt and the callback runs again when the database answers.
type Handler interface {
	Handle(ctx context.Context, tx *gorm.DB, cb *Log, out Outbox) error
}

// BatchHandler is a Handler that can also process several callbacks of its
// kind at once, inside a batch's transaction, in a constant number of
// statements rather than a few per callback: read and lock every row the
// batch touches with one statement, decide each callback in id order on
// what it read (a later callback of the batch sees the earlier ones'
// effects), and write the changes with one statement per table.
//
// HandleBatch must give each callback the outcome Handle would give it if
// the callbacks ran one after the other. The way to make that hold by
// construction is River's: Handle is HandleBatch applied to a batch of one
// (as the payment and logistics handlers do), or both call one function
// that decides a callback's effects; never two hand-kept copies of a rule.
// It returns one error per callback
// (nil, NoEffect, or a failure), and writes the notifications of cbs[i]
// through outs[i]. Any failure, of a callback or of a statement, makes the
// worker roll the whole batch back and run each callback alone through
// Handle, so a handler may stop at its first failure, and it never records
// anything Handle would not have.
type BatchHandler interface {
	Handler
	HandleBatch(ctx context.Context, tx *gorm.DB, cbs []*Log, outs []Outbox) []error
}

// EventChecker is a Handler that reads every callback of its kind as one
// canonical event (PaymentEvent, CarrierEvent). CheckEvent reads body with
// the very function the handler reads a callback's event with, and says
// why it could not: the intake calls it (through Registry.CheckEvent) on
// the body of a configured JSON source before storing it, so that a field
// of the wrong type is the sender's 400 rather than a FAILED callback.
// It checks only that the body reads: what the event means (a status, a
// field its type requires) stays the handler's to decide.
type EventChecker interface {
	Handler
	CheckEvent(body []byte) error
}

// FailBatch sets every one of a batch's results to err and returns them: a
// BatchHandler's answer when a statement for the whole batch failed.
func FailBatch(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, tx *gorm.DB, cb *Log, out Outbox) error

// Handle implements Handler.
func (f HandlerFunc) Handle(ctx context.Context, tx *gorm.DB, cb *Log, out Outbox) error {
	return f(ctx, tx, cb, out)
}

// Message is one downstream notification.
type Message struct {
	// RoutingKey on the <prefix>.downstream topic exchange, e.g.
	// "warehouse.ship".
	RoutingKey string
	// Payload is marshalled to JSON.
	Payload any
}

// Outbox takes a handler's notifications into its transaction.
type Outbox interface {
	Add(ctx context.Context, msg Message) error
}

// PermanentError marks a failure that no retry can fix (the order does not
// exist, the amount is wrong, the payload can never parse).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so the callback goes to FAILED without retries.
func Permanent(err error) error { return &PermanentError{Err: err} }

// Permanentf is Permanent(fmt.Errorf(format, args...)).
func Permanentf(format string, args ...any) error { return Permanent(fmt.Errorf(format, args...)) }

// RetryAfterError is a retryable failure whose next attempt is to come
// Delay after this one rather than after the source's backoff (a platform
// that said "try again in a minute", a rate limit of a service the handler
// calls). It counts as an attempt, within the source's budget.
type RetryAfterError struct {
	Delay time.Duration
	Err   error
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// RetryAfter wraps err so the next attempt comes d from now.
func RetryAfter(d time.Duration, err error) error { return &RetryAfterError{Delay: d, Err: err} }

// RetryDelay is the delay a RetryAfter asked for, if err holds one.
func RetryDelay(err error) (time.Duration, bool) {
	var r *RetryAfterError
	if errors.As(err, &r) && r.Delay > 0 {
		return r.Delay, true
	}
	return 0, false
}

// NotYetError is a retryable failure of a callback that came before what
// it depends on: its order (a notification that raced the shop's own
// commit), its payment (a refund or dispute of a payment whose
// notification has not been processed yet). It is a failed attempt,
// retried with the source's backoff within its budget like any other, but
// while it waits it does not hold up the later callbacks of its key, one
// of which may be what it waits for; callbacks that wait keep their order
// among themselves.
type NotYetError struct {
	Err error
	// Until, when set, is how long the callback waits whatever its retry
	// budget: it is retried until then, and FAILED only by an attempt
	// after it (worker.order_grace is a time, not a number of attempts).
	Until time.Time
}

func (e *NotYetError) Error() string { return e.Err.Error() }
func (e *NotYetError) Unwrap() error { return e.Err }

// NotYet wraps err: the callback waits for an event not processed yet.
func NotYet(err error) error { return &NotYetError{Err: err} }

// NotYetUntil wraps err: the callback waits until until, whatever its
// retry budget.
func NotYetUntil(err error, until time.Time) error { return &NotYetError{Err: err, Until: until} }

// WaitsUntil is the time a NotYetUntil waits for, if err is one.
func WaitsUntil(err error) (time.Time, bool) {
	var n *NotYetError
	if errors.As(err, &n) && !n.Until.IsZero() && !IsPermanent(err) {
		return n.Until, true
	}
	return time.Time{}, false
}

// IsNotYet reports whether err (or what it wraps) is a NotYet, and not
// also permanent.
func IsNotYet(err error) bool {
	var n *NotYetError
	return errors.As(err, &n) && !IsPermanent(err)
}

// IsPermanent reports whether err (or what it wraps) is permanent.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// ReasonError is a failure a handler names with a short, fixed code (e.g.
// "currency_mismatch"): a sentinel, wrapped with the detail by fmt.Errorf
// and %w. The worker counts the callbacks that go to FAILED by it
// (callgate_callback_failed_reasons_total{kind,reason}).
type ReasonError struct{ code, msg string }

// NewReason returns a sentinel failure with code (snake_case, a metric
// label) and msg (what operators read in last_error).
func NewReason(code, msg string) *ReasonError { return &ReasonError{code: code, msg: msg} }

func (e *ReasonError) Error() string { return e.msg }

// Code is the reason's code.
func (e *ReasonError) Code() string { return e.code }

// ReasonOf is the code of the ReasonError err wraps, or "other".
func ReasonOf(err error) string {
	var r *ReasonError
	if errors.As(err, &r) {
		return r.code
	}
	return "other"
}

// Registry maps kinds to their handlers.
type Registry struct {
	handlers map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{handlers: map[string]Handler{}} }

// Register adds the handler of kind. Registering a kind twice panics: it is
// a wiring mistake.
func (r *Registry) Register(kind string, h Handler) {
	if _, dup := r.handlers[kind]; dup {
		panic("callback: kind registered twice: " + kind)
	}
	r.handlers[kind] = h
}

// Handler returns the handler of kind.
func (r *Registry) Handler(kind string) (Handler, bool) {
	h, ok := r.handlers[kind]
	return h, ok
}

// CheckEvent reports why kind's handler could not read body as its event;
// nil when it could, or when the handler does not say (not an
// EventChecker) or kind has none.
func (r *Registry) CheckEvent(kind string, body []byte) error {
	if c, ok := r.handlers[kind].(EventChecker); ok {
		return c.CheckEvent(body)
	}
	return nil
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	out := make([]string, 0, len(r.handlers))
	for k := range r.handlers {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
