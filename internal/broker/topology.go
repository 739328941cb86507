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
	// Log receives the warning about a downstream exchange declared by an
	// older callgate (without its alternate exchange). Default:
	// slog.Default().
	Log *slog.Logger
}

// NewTopology is the topology of an AMQP config for the given kinds: the
// one place a process's exchange and queue names come from.
func NewTopology(cfg Config, kinds []string) Topology {
	cfg = cfg.WithDefaults()
	return Topology{Prefix: cfg.Prefix, Kinds: kinds, Quorum: cfg.QueueType == QueueTypeQuorum}
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

// Declare creates (or confirms) everything. It is idempotent and runs after
// every connect.
//
// The downstream exchange comes last: on an installation whose downstream
// exchange was declared by an older callgate, without the alternate
// exchange, RabbitMQ refuses the declaration (406 PRECONDITION_FAILED,
// "inequivalent arg 'alternate-exchange'") and closes ch. That exchange
// exists, with the right type and durability (RabbitMQ compares those
// before the arguments), and stays usable as it is: Declare logs the
// one-time fix and returns nil, so the process keeps connecting. Until the
// fix, the publisher's mandatory flag catches what no queue is bound for
// (internal/downstream).
func (t Topology) Declare(ch *amqp.Channel) error {
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
	if _, err := ch.QueueDeclare(t.UnroutedQueue(), true, false, false, false, t.QueueArgs()); err != nil {
		return fmt.Errorf("error declaring queue %s: %w", t.UnroutedQueue(), err)
	}
	if err := ch.QueueBind(t.UnroutedQueue(), "", t.UnroutedExchange(), false, nil); err != nil {
		return fmt.Errorf("error binding queue %s: %w", t.UnroutedQueue(), err)
	}
	err := ch.ExchangeDeclare(t.DownstreamExchange(), amqp.ExchangeTopic, true, false, false, false, t.DownstreamArgs())
	if isAlternateExchangeMismatch(err) {
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

// isAlternateExchangeMismatch reports RabbitMQ's refusal to redeclare an
// exchange whose alternate-exchange argument differs (typically: absent).
func isAlternateExchangeMismatch(err error) bool {
	var amqpErr *amqp.Error
	return errors.As(err, &amqpErr) && amqpErr.Code == amqp.PreconditionFailed &&
		strings.Contains(amqpErr.Reason, "inequivalent arg '"+argAlternateExchange+"'")
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
