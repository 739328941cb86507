package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Topology names and declares every exchange and queue of one prefix.
//
//	<prefix>.callbacks            direct exchange; routing key = kind
//	<prefix>.<kind>               durable queue per kind (payment, logistics, ...)
//	<prefix>.downstream           topic exchange the downstream systems bind to,
//	                              alternate exchange <prefix>.downstream.unrouted
//	<prefix>.downstream.unrouted  fanout exchange and durable queue keeping the
//	                              notifications no subscriber is bound for
type Topology struct {
	Prefix string
	Kinds  []string
	// Quorum declares the queues as quorum queues (for a RabbitMQ cluster).
	Quorum bool
	// UnroutedMaxLength and UnroutedMaxBytes bound the unrouted queue;
	// zero means the defaults (UnroutedMaxLengthDefault,
	// UnroutedMaxBytesDefault).
	UnroutedMaxLength int
	UnroutedMaxBytes  int64
	// Log receives the warning about a downstream exchange declared by an
	// older callgate (without its alternate exchange). Default:
	// slog.Default().
	Log *slog.Logger
}

// NewTopology is the topology of an AMQP config for the given kinds: the
// one place a process's exchange and queue names come from.
func NewTopology(cfg Config, kinds []string) Topology {
	cfg = cfg.WithDefaults()
	return Topology{Prefix: cfg.Prefix, Kinds: kinds, Quorum: cfg.QueueType == QueueTypeQuorum,
		UnroutedMaxLength: cfg.UnroutedMaxLength, UnroutedMaxBytes: cfg.UnroutedMaxBytes}
}

// argAlternateExchange is RabbitMQ's exchange argument (and policy key)
// naming where a message no binding matches goes.
const argAlternateExchange = "alternate-exchange"

// UnroutedExchange is the alternate exchange of a downstream exchange: the
// fanout exchange (and the name of its queue) where notifications that no
// queue is bound for are kept for an operator.
func UnroutedExchange(downstream string) string { return downstream + ".unrouted" }

// CallbacksExchange is where the gateway announces log ids.
func (t Topology) CallbacksExchange() string { return t.Prefix + ".callbacks" }

// Queue is the queue of one kind.
func (t Topology) Queue(kind string) string { return t.Prefix + "." + kind }

// DownstreamExchange is where the outbox publishes notifications.
func (t Topology) DownstreamExchange() string { return t.Prefix + ".downstream" }

// UnroutedExchange is the downstream exchange's alternate exchange.
func (t Topology) UnroutedExchange() string { return UnroutedExchange(t.DownstreamExchange()) }

// UnroutedQueue is the queue bound to the unrouted exchange (same name).
func (t Topology) UnroutedQueue() string { return t.UnroutedExchange() }

// QueueArgs are the arguments every queue is declared with.
func (t Topology) QueueArgs() amqp.Table {
	if t.Quorum {
		return amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}
	}
	return amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeClassic}
}

// UnroutedQueueArgs are the unrouted queue's arguments.
//
// It is bounded: a parking lot that nobody consumes until an operator looks
// must not grow until RabbitMQ's disk or memory alarm blocks every
// publisher, the intake's announcements included, which would let one
// downstream team that unbinds its queue stop the intake. At the bound the
// oldest parked notification is dropped (drop-head): the newest are the
// ones an operator still wants, a publisher is never refused (refusing
// would keep the worker re-publishing them for ever), and every dropped
// notification is still in the outbox table, SENT, until retention.
//
// A classic one is also lazy: its messages belong on disk, not in the
// broker's memory, and a lazy queue also takes a persistent message for
// less broker CPU (BENCHMARKS.md: RabbitMQ 0.49 -> 0.34 ms per callback in
// the open loop, its memory 1.1 GB -> 0.2 GB).
func (t Topology) UnroutedQueueArgs() amqp.Table {
	args := t.QueueArgs()
	args[argMaxLength] = t.unroutedMaxLength()
	args[argMaxLengthBytes] = t.unroutedMaxBytes()
	args[argOverflow] = overflowDropHead
	if !t.Quorum {
		args[argQueueMode] = "lazy"
	}
	return args
}

// UnroutedLimit is the unrouted queue's bound in messages.
func (t Topology) UnroutedLimit() int { return t.unroutedMaxLength() }

func (t Topology) unroutedMaxLength() int {
	if t.UnroutedMaxLength > 0 {
		return t.UnroutedMaxLength
	}
	return UnroutedMaxLengthDefault
}

func (t Topology) unroutedMaxBytes() int64 {
	if t.UnroutedMaxBytes > 0 {
		return t.UnroutedMaxBytes
	}
	return UnroutedMaxBytesDefault
}

// RabbitMQ's queue arguments (the policy keys drop the "x-") choosing a
// classic queue's storage and bounding a queue.
const (
	argQueueMode      = "x-queue-mode"
	argMaxLength      = "x-max-length"
	argMaxLengthBytes = "x-max-length-bytes"
	argOverflow       = "x-overflow"
	overflowDropHead  = "drop-head"
)

// unroutedArgs are the unrouted queue's arguments an older callgate did
// not declare it with.
var unroutedArgs = []string{argQueueMode, argMaxLength, argMaxLengthBytes, argOverflow}

// UnroutedQueuePolicy is the rabbitmqctl command that gives an unrouted
// queue declared by an older callgate (unbounded, perhaps not lazy) the
// same bound and storage: a queue's arguments cannot change, a policy
// applies to it as it is, messages kept. Its priority 1 wins over the
// lazy-only policy an earlier callgate asked for.
func (t Topology) UnroutedQueuePolicy() string {
	def := fmt.Sprintf(`"max-length":%d,"max-length-bytes":%d,"overflow":"%s"`,
		t.unroutedMaxLength(), t.unroutedMaxBytes(), overflowDropHead)
	if !t.Quorum {
		def = `"queue-mode":"lazy",` + def
	}
	return fmt.Sprintf(`rabbitmqctl set_policy %s-unrouted-queue '%s' '{%s}' --priority 1 --apply-to queues`,
		t.Prefix, exactPattern(t.UnroutedQueue()), def)
}

// DownstreamArgs are the arguments of the downstream exchange.
func (t Topology) DownstreamArgs() amqp.Table {
	return amqp.Table{argAlternateExchange: t.UnroutedExchange()}
}

// UnroutedPolicy is the rabbitmqctl command that gives an existing
// downstream exchange, declared without the alternate exchange by an older
// callgate, the same alternate exchange (an exchange's arguments cannot
// change; a policy applies to it as it is, bindings kept).
func (t Topology) UnroutedPolicy() string {
	return fmt.Sprintf(`rabbitmqctl set_policy %s-downstream-unrouted '%s' '{"%s":"%s"}' --apply-to exchanges`,
		t.Prefix, exactPattern(t.DownstreamExchange()), argAlternateExchange, t.UnroutedExchange())
}

// exactPattern is a regular expression matching name only, with its dots
// as [.] rather than \. so that the command survives JSON logs unchanged.
func exactPattern(name string) string {
	return "^" + strings.ReplaceAll(regexp.QuoteMeta(name), `\.`, "[.]") + "$"
}

// Declare creates (or confirms) everything, on channels of its own. It is
// idempotent and runs after every connect.
//
// Two differences from an installation declared by an older callgate are
// tolerated, because RabbitMQ refuses to change an existing queue's or
// exchange's arguments (406 PRECONDITION_FAILED, "inequivalent arg", which
// also closes the channel) while what exists stays usable: an unrouted
// queue that is not lazy, and a downstream exchange without its alternate
// exchange (it comes last for that reason). Declare logs the one-time fix
// (a policy) for each and goes on. Until the exchange's fix, the
// publisher's mandatory flag catches what no queue is bound for
// (internal/downstream).
func (t Topology) Declare(conn *amqp.Connection) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("error opening channel: %w", err)
	}
	defer func() { _ = ch.Close() }() // the channel in use at the end (see below)
	if err := ch.ExchangeDeclare(t.CallbacksExchange(), amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return fmt.Errorf("error declaring exchange %s: %w", t.CallbacksExchange(), err)
	}
	for _, kind := range t.Kinds {
		q := t.Queue(kind)
		if _, err := ch.QueueDeclare(q, true, false, false, false, t.QueueArgs()); err != nil {
			return fmt.Errorf("error declaring queue %s: %w", q, err)
		}
		if err := ch.QueueBind(q, kind, t.CallbacksExchange(), false, nil); err != nil {
			return fmt.Errorf("error binding queue %s: %w", q, err)
		}
	}
	if err := ch.ExchangeDeclare(t.UnroutedExchange(), amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
		return fmt.Errorf("error declaring exchange %s: %w", t.UnroutedExchange(), err)
	}
	_, err = ch.QueueDeclare(t.UnroutedQueue(), true, false, false, false, t.UnroutedQueueArgs())
	if isArgMismatch(err, unroutedArgs...) {
		t.logger().Warn("broker: the unrouted queue was declared with other arguments (unbounded, by an older callgate, or with another bound): "+
			"apply the policy in fix once to bound it and keep its notifications on disk "+
			"(a policy can lower a bound the queue was declared with, not raise it: to raise one, move the notifications and delete the queue; "+
			"this warning stays after the fix: a policy is not an argument)",
			"queue", t.UnroutedQueue(), "fix", t.UnroutedQueuePolicy(), "error", err)
		// RabbitMQ closed the channel with the 406: carry on on a new one.
		if ch, err = conn.Channel(); err != nil {
			return fmt.Errorf("error opening channel: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("error declaring queue %s: %w", t.UnroutedQueue(), err)
	}
	if err := ch.QueueBind(t.UnroutedQueue(), "", t.UnroutedExchange(), false, nil); err != nil {
		return fmt.Errorf("error binding queue %s: %w", t.UnroutedQueue(), err)
	}
	err = ch.ExchangeDeclare(t.DownstreamExchange(), amqp.ExchangeTopic, true, false, false, false, t.DownstreamArgs())
	if isArgMismatch(err, argAlternateExchange) {
		t.logger().Warn("broker: downstream exchange lacks its alternate exchange (declared by an older callgate): "+
			"apply the policy in fix once; until then the worker parks unroutable notifications itself "+
			"(this warning stays after the fix: a policy is not an argument)",
			"exchange", t.DownstreamExchange(), "alternate_exchange", t.UnroutedExchange(),
			"fix", t.UnroutedPolicy(), "error", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("error declaring exchange %s: %w", t.DownstreamExchange(), err)
	}
	return nil
}

// isArgMismatch reports RabbitMQ's refusal to redeclare a queue or
// exchange whose argument (one of args) differs (typically: absent).
func isArgMismatch(err error, args ...string) bool {
	var amqpErr *amqp.Error
	if !errors.As(err, &amqpErr) || amqpErr.Code != amqp.PreconditionFailed {
		return false
	}
	for _, arg := range args {
		if strings.Contains(amqpErr.Reason, "inequivalent arg '"+arg+"'") {
			return true
		}
	}
	return false
}

func (t Topology) logger() *slog.Logger {
	if t.Log != nil {
		return t.Log
	}
	return slog.Default()
}

// QueueDepth returns the ready messages of a kind's queue, on a short-lived
// channel of conn.
func (t Topology) QueueDepth(conn *Connection, kind string) (int, error) {
	return t.depth(conn, t.Queue(kind))
}

// UnroutedDepth returns the notifications waiting in the unrouted queue.
func (t Topology) UnroutedDepth(conn *Connection) (int, error) {
	return t.depth(conn, t.UnroutedQueue())
}

func (t Topology) depth(conn *Connection, queue string) (int, error) {
	c, err := conn.Current()
	if err != nil {
		return 0, err
	}
	ch, err := c.Channel()
	if err != nil {
		return 0, fmt.Errorf("error opening channel: %w", err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, t.QueueArgs())
	if err != nil {
		return 0, fmt.Errorf("error reading depth of queue %s: %w", queue, err)
	}
	return q.Messages, nil
}
