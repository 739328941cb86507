package broker

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Topology names and declares every exchange and queue of one prefix.
//
//	<prefix>.callbacks   direct exchange; routing key = kind
//	<prefix>.<kind>      durable queue per kind (payment, logistics, ...)
//	<prefix>.downstream  topic exchange the downstream systems bind to
type Topology struct {
	Prefix string
	Kinds  []string
	// Quorum declares the queues as quorum queues (for a RabbitMQ cluster).
	Quorum bool
}

// CallbacksExchange is where the gateway announces log ids.
func (t Topology) CallbacksExchange() string { return t.Prefix + ".callbacks" }

// Queue is the queue of one kind.
func (t Topology) Queue(kind string) string { return t.Prefix + "." + kind }

// DownstreamExchange is where the outbox publishes notifications.
func (t Topology) DownstreamExchange() string { return t.Prefix + ".downstream" }

// QueueArgs are the arguments every queue is declared with.
func (t Topology) QueueArgs() amqp.Table {
	if t.Quorum {
		return amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum}
	}
	return amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeClassic}
}

// Declare creates (or confirms) everything. It is idempotent and runs after
// every connect.
func (t Topology) Declare(ch *amqp.Channel) error {
	if err := ch.ExchangeDeclare(t.CallbacksExchange(), amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return fmt.Errorf("error declaring exchange %s: %w", t.CallbacksExchange(), err)
	}
	if err := ch.ExchangeDeclare(t.DownstreamExchange(), amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("error declaring exchange %s: %w", t.DownstreamExchange(), err)
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
	return nil
}

// QueueDepth returns the ready messages of a kind's queue, on a short-lived
// channel of conn.
func (t Topology) QueueDepth(conn *Connection, kind string) (int, error) {
	c, err := conn.Current()
	if err != nil {
		return 0, err
	}
	ch, err := c.Channel()
	if err != nil {
		return 0, err
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(t.Queue(kind), true, false, false, false, t.QueueArgs())
	if err != nil {
		return 0, err
	}
	return q.Messages, nil
}
