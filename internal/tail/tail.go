// Package tail lets a downstream developer watch the notifications callgate
// publishes, without the RabbitMQ management plugin: `worker tail` binds a
// temporary queue to <prefix>.downstream and prints each notification
// (routing key, message_id, correlation_id, traceparent, body) until it is
// stopped.
//
// It only reads. The queue is server-named, exclusive and auto-deleted, so
// it goes away with the command; the exchange is checked passively, never
// declared (internal/broker owns the topology, internal/downstream the
// publishing).
package tail

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"callgate/internal/broker"
)

// KeyDefault is the binding key when none is given: every notification.
const KeyDefault = "#"

// Config says what to tail.
type Config struct {
	// URLs of the broker's nodes (amqp.urls, or amqp.url), tried in turn.
	URLs []string
	// Exchange is the downstream exchange, <prefix>.downstream.
	Exchange string
	// Keys are the topic binding keys of the temporary queue (`*` one
	// word, `#` any number). Default [KeyDefault].
	Keys []string
}

// Command runs `worker tail` with args against exchange on the broker at
// urls (the first node that answers), printing notifications to stdout and what it does to stderr, until
// ctx ends. It returns the exit code: 0 once stopped, 1 when the broker
// refuses or drops it, 2 for bad arguments.
//
//	worker tail [--routing-key PATTERN]...
func Command(ctx context.Context, args []string, urls []string, exchange string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker tail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var keys []string
	fs.Func("routing-key", "binding key, a topic pattern such as points.* (repeatable; default "+KeyDefault+", every notification)", func(v string) error {
		if strings.TrimSpace(v) == "" {
			return errors.New("empty routing key")
		}
		keys = append(keys, v)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: worker [-config PATH] tail [--routing-key PATTERN]...")
		fmt.Fprintln(fs.Output(), "Prints the notifications published to "+exchange+" until Ctrl-C.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tail: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if err := Run(ctx, Config{URLs: urls, Exchange: exchange, Keys: keys}, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "tail: %v\n", err)
		return 1
	}
	return 0
}

// Run binds a temporary queue to cfg.Exchange with cfg.Keys and writes
// each notification routed to it to out until ctx ends (then it returns
// nil). status receives one line when the queue is bound and one when it
// stops.
func Run(ctx context.Context, cfg Config, out, status io.Writer) error {
	keys := cfg.Keys
	if len(keys) == 0 {
		keys = []string{KeyDefault}
	}
	var conn *amqp.Connection
	var errs []error
	for _, url := range cfg.URLs {
		c, err := amqp.DialConfig(url, amqp.Config{Properties: amqp.Table{"connection_name": "callgate-tail"}})
		if err == nil {
			conn = c
			break
		}
		errs = append(errs, fmt.Errorf("%s: %w", broker.NodeName(url), err))
	}
	if conn == nil {
		return fmt.Errorf("error connecting to the broker: %w", errors.Join(errs...))
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("error opening a channel: %w", err)
	}
	// Told when the broker closes the channel or the whole connection.
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	// Passive: the exchange keeps the arguments callgate declared it with.
	if err := ch.ExchangeDeclarePassive(cfg.Exchange, amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		return fmt.Errorf("no exchange %s (check amqp.prefix / CALLGATE_AMQP_PREFIX; the gateway and the worker declare it when they start): %w", cfg.Exchange, err)
	}
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return fmt.Errorf("error declaring the temporary queue: %w", err)
	}
	for _, k := range keys {
		if err := ch.QueueBind(q.Name, k, cfg.Exchange, false, nil); err != nil {
			return fmt.Errorf("error binding %s to %s with %s: %w", q.Name, cfg.Exchange, k, err)
		}
	}
	deliveries, err := ch.Consume(q.Name, "callgate-tail", true, true, false, false, nil)
	if err != nil {
		return fmt.Errorf("error consuming %s: %w", q.Name, err)
	}
	fmt.Fprintf(status, "tail: queue %s bound to %s with %s; Ctrl-C to stop\n", q.Name, cfg.Exchange, strings.Join(keys, ", "))
	fmt.Fprintf(status, "tail: while it runs, a notification that no other queue is bound for comes here, not to %s.unrouted, and is gone when tail stops\n", cfg.Exchange)
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(status, "tail: stopped")
			return nil
		case err := <-closed:
			if err != nil {
				return fmt.Errorf("the broker closed the channel: %w", err)
			}
			return errors.New("the broker closed the channel")
		case d, ok := <-deliveries:
			if !ok {
				return errors.New("the broker ended the subscription")
			}
			if _, err := io.WriteString(out, Format(d)); err != nil {
				return fmt.Errorf("error writing: %w", err)
			}
		}
	}
}

// Format renders one notification as a block of labelled lines followed by
// a blank line. Missing values show as "-"; a body that is not UTF-8 is
// quoted.
func Format(d amqp.Delivery) string {
	traceparent := ""
	if v, ok := d.Headers["traceparent"]; ok {
		traceparent = fmt.Sprint(v)
	}
	body := string(d.Body)
	if !utf8.Valid(d.Body) {
		body = fmt.Sprintf("%q", d.Body)
	}
	var b strings.Builder
	for _, f := range [][2]string{
		{"routing_key", d.RoutingKey},
		{"message_id", d.MessageId},
		{"correlation_id", d.CorrelationId},
		{"traceparent", traceparent},
		{"body", body},
	} {
		v := f[1]
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(&b, "%-15s %s\n", f[0]+":", v)
	}
	b.WriteString("\n")
	return b.String()
}
