// Package downstream publishes notifications to the systems that subscribe
// to callgate: persistent messages on the <prefix>.downstream topic exchange,
// each with a stable message_id, the callback log id as correlation_id and
// the trace context in its headers, confirmed by the broker before they
// count as sent.
//
// Notifications are published mandatory. The downstream exchange's
// alternate exchange (<prefix>.downstream.unrouted, see internal/broker)
// keeps what no subscriber is bound for, and RabbitMQ then returns nothing.
// Where the exchange lacks it (declared by an older callgate, no policy
// yet), RabbitMQ returns such a message before confirming it: the publisher
// then parks it in the unrouted exchange itself, and a message that cannot
// be parked either is reported not confirmed, so it is never marked SENT
// while dropped.
//
// It owns the publishing channel (confirm mode, reopened after a reconnect
// of the shared broker.Connection). What to publish and when to mark it SENT
// is internal/outbox's business.
package downstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// ErrUnroutable reports notifications that no queue is bound for and that
// could not be parked in the unrouted exchange either (its queue is gone).
var ErrUnroutable = errors.New("no queue bound for the notification, nor for the unrouted exchange")

// ConfirmTimeout bounds the wait for the broker's confirms of one batch.
const ConfirmTimeout = 10 * time.Second

// Publisher publishes batches with publisher confirms, pipelined: a batch
// is written in one go and its confirms awaited together.
type Publisher struct {
	conn    *broker.Connection
	appID   string
	mu      sync.Mutex
	ch      *amqp.Channel
	returns *broker.ReturnTracker // of ch
}

// NewPublisher returns a Publisher on conn.
func NewPublisher(conn *broker.Connection, appID string) *Publisher {
	return &Publisher{conn: conn, appID: appID}
}

// Publish sends msgs and reports, per message, whether the broker confirmed
// it. A message not confirmed may or may not have reached the broker: the
// caller keeps it PENDING and publishes it again (at least once). A message
// the broker returned as unroutable counts as confirmed only once it is
// confirmed in the unrouted exchange.
func (p *Publisher) Publish(ctx context.Context, msgs []Message) ([]bool, error) {
	if len(msgs) == 0 {
		return []bool{}, nil
	}
	acked, returned, err := p.publishConfirmed(ctx, msgs)
	if len(returned) == 0 {
		return acked, err
	}
	parked := make([]Message, len(returned))
	for j, i := range returned {
		parked[j] = msgs[i]
		parked[j].Exchange = broker.UnroutedExchange(msgs[i].Exchange)
	}
	parkedAcked, lost, perr := p.publishConfirmed(ctx, parked)
	for j, i := range returned {
		acked[i] = parkedAcked[j]
	}
	if len(lost) > 0 {
		ids := make([]string, len(lost))
		for j, i := range lost {
			ids[j] = parked[i].MessageID
		}
		perr = errors.Join(perr, fmt.Errorf("%w: %s", ErrUnroutable, strings.Join(ids, ", ")))
	}
	return acked, errors.Join(err, perr)
}

// publishConfirmed publishes msgs and reports, per message, whether the
// broker confirmed it without returning it, and which were confirmed but
// returned (no queue bound for them).
func (p *Publisher) publishConfirmed(ctx context.Context, msgs []Message) (acked []bool, returned []int, err error) {
	acked = make([]bool, len(msgs))
	refused := false
	dcs, rt, err := p.publish(ctx, msgs)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ConfirmTimeout)
	defer cancel()
	for i, dc := range dcs {
		if dc == nil {
			continue
		}
		// A confirm outstanding when the channel closes resolves as not
		// acked, with no error.
		ok, werr := dc.WaitContext(wctx)
		if !ok && werr == nil {
			refused = true
		}
		if !ok || werr != nil || !rt.Wait(wctx, dc.DeliveryTag) {
			continue
		}
		if rt.Take(msgs[i].MessageID) {
			returned = append(returned, i)
			continue
		}
		acked[i] = true
	}
	if refused {
		p.drop(rt)
	}
	return acked, returned, err
}

// drop gives up the channel of rt after the broker refused (nacked) a
// message on it: the next batch opens a fresh one. A refusing channel can
// keep refusing while a new one is taken (see broker's refusedError: a
// channel registered with a quorum queue's lost leader).
func (p *Publisher) drop(rt *broker.ReturnTracker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch != nil && p.returns == rt {
		_ = p.ch.Close()
		p.ch = nil
	}
}

func (p *Publisher) publish(ctx context.Context, msgs []Message) ([]*amqp.DeferredConfirmation, *broker.ReturnTracker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dcs := make([]*amqp.DeferredConfirmation, len(msgs))
	ch, err := p.channel()
	if err != nil {
		return dcs, nil, err
	}
	rt := p.returns
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
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.WithoutCancel(ctx), m.Exchange, m.RoutingKey, true, false, pub)
		if err != nil {
			_ = ch.Close()
			p.ch = nil
			return dcs, rt, fmt.Errorf("error publishing %s: %w", m.MessageID, err)
		}
		dcs[i] = dc
	}
	return dcs, rt, nil
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
	p.returns = broker.WatchReturns(ch)
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
