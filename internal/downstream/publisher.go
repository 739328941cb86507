// Package downstream publishes notifications to the systems that subscribe
// to callgate: persistent messages on the <prefix>.downstream topic exchange,
// each with a stable message_id, the callback log id as correlation_id and
// the trace context in its headers, confirmed by the broker before they
// count as sent.
//
// It owns the publishing channel (confirm mode, reopened after a reconnect
// of the shared broker.Connection). What to publish and when to mark it SENT
// is internal/outbox's business.
package downstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"callgate/internal/broker"
)

// Message is one notification to publish.
type Message struct {
	Exchange      string
	RoutingKey    string
	MessageID     string
	CorrelationID string
	Payload       []byte
	// Headers go into the AMQP headers (traceparent among them).
	Headers   map[string]string
	Timestamp time.Time
}

// ConfirmTimeout bounds the wait for the broker's confirms of one batch.
const ConfirmTimeout = 10 * time.Second

// Publisher publishes batches with publisher confirms, pipelined: a batch
// is written in one go and its confirms awaited together.
type Publisher struct {
	conn  *broker.Connection
	appID string
	mu    sync.Mutex
	ch    *amqp.Channel
}

// NewPublisher returns a Publisher on conn.
func NewPublisher(conn *broker.Connection, appID string) *Publisher {
	return &Publisher{conn: conn, appID: appID}
}

// Publish sends msgs and reports, per message, whether the broker confirmed
// it. A message not confirmed may or may not have reached the broker: the
// caller keeps it PENDING and publishes it again (at least once).
func (p *Publisher) Publish(ctx context.Context, msgs []Message) ([]bool, error) {
	acked := make([]bool, len(msgs))
	if len(msgs) == 0 {
		return acked, nil
	}
	dcs, err := p.publish(ctx, msgs)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ConfirmTimeout)
	defer cancel()
	for i, dc := range dcs {
		if dc == nil {
			continue
		}
		// A confirm outstanding when the channel closes resolves as not
		// acked, with no error.
		ok, werr := dc.WaitContext(wctx)
		acked[i] = ok && werr == nil
	}
	return acked, err
}

func (p *Publisher) publish(ctx context.Context, msgs []Message) ([]*amqp.DeferredConfirmation, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dcs := make([]*amqp.DeferredConfirmation, len(msgs))
	ch, err := p.channel()
	if err != nil {
		return dcs, err
	}
	for i, m := range msgs {
		pub := amqp.Publishing{
			ContentType:   "application/json",
			DeliveryMode:  amqp.Persistent,
			MessageId:     m.MessageID,
			CorrelationId: m.CorrelationID,
			Timestamp:     m.Timestamp,
			Type:          m.RoutingKey,
			AppId:         p.appID,
			Body:          m.Payload,
		}
		if len(m.Headers) > 0 {
			pub.Headers = make(amqp.Table, len(m.Headers))
			for k, v := range m.Headers {
				pub.Headers[k] = v
			}
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.WithoutCancel(ctx), m.Exchange, m.RoutingKey, false, false, pub)
		if err != nil {
			_ = ch.Close()
			p.ch = nil
			return dcs, fmt.Errorf("error publishing %s: %w", m.MessageID, err)
		}
		dcs[i] = dc
	}
	return dcs, nil
}

// channel returns the open confirm-mode channel, opening one on the current
// connection if needed. It never waits for the broker: when the broker is
// away the caller leaves its rows to the relay.
func (p *Publisher) channel() (*amqp.Channel, error) {
	if p.ch != nil && !p.ch.IsClosed() {
		return p.ch, nil
	}
	conn, err := p.conn.Current()
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("error opening publish channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("error enabling publisher confirms: %w", err)
	}
	p.ch = ch
	return ch, nil
}

// Close closes the channel.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil {
		return nil
	}
	err := p.ch.Close()
	p.ch = nil
	if errors.Is(err, amqp.ErrClosed) {
		return nil
	}
	return err
}
