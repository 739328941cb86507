package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/tracing"
)

// requeuePause slows the redelivery loop while the database is away.
const requeuePause = time.Second

// consumer consumes one kind's queue with its own channel, prefetch and
// concurrency: a backlog or a stuck handler of one kind never takes the
// slots of another.
type consumer struct {
	kind        string
	queue       string
	prefetch    int
	concurrency int
	conn        *broker.Connection
	proc        *Processor
	logger      *slog.Logger
	tag         string
}

// run consumes until ctx ends. Each delivery is processed under workCtx,
// which outlives ctx by the shutdown grace so in-flight transactions can
// finish and ack. run returns when consuming has stopped and the in-flight
// callbacks are done.
func (c *consumer) run(ctx, workCtx context.Context) {
	sem := make(chan struct{}, c.concurrency)
	for ctx.Err() == nil {
		conn, err := c.conn.Wait(ctx)
		if err != nil {
			return
		}
		if err := c.consumeOn(ctx, workCtx, conn, sem); err != nil && ctx.Err() == nil {
			c.logger.Warn("worker: consumer stopped, resubscribing", "kind", c.kind, "error", err)
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func (c *consumer) consumeOn(ctx, workCtx context.Context, conn *amqp.Connection, sem chan struct{}) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	// Closing the channel returns its unacked deliveries to the broker. A
	// delivery acks on the channel that delivered it, so an ack after a
	// reconnect fails instead of acking another message. The channel stays
	// open until this channel's in-flight callbacks are done and acked.
	var inflight sync.WaitGroup
	defer ch.Close()
	defer inflight.Wait()
	if err := ch.Qos(c.prefetch, 0, false); err != nil {
		return err
	}
	deliveries, err := ch.Consume(c.queue, c.tag, false, false, false, false, nil)
	if err != nil {
		return err
	}
	c.logger.Info("worker: consuming", "queue", c.queue, "prefetch", c.prefetch, "concurrency", c.concurrency)
	for {
		select {
		case <-ctx.Done():
			// Stop taking new messages; the prefetched ones not started go
			// back to the broker when the channel closes.
			_ = ch.Cancel(c.tag, false)
			return nil
		case d, ok := <-deliveries:
			if !ok {
				return amqp.ErrClosed
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				_ = d.Nack(false, true)
				continue
			}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				defer func() { <-sem }()
				c.handle(workCtx, d)
			}()
		}
	}
}

func (c *consumer) handle(ctx context.Context, d amqp.Delivery) {
	logID, err := broker.ParseAnnouncement(d.Body)
	if err != nil {
		// Not something we announced: nothing to process, nothing to retry.
		c.logger.Warn("worker: unreadable message dropped", "queue", c.queue, "body", callback.Truncate(string(d.Body), 200))
		_ = d.Ack(false)
		return
	}
	tp, _ := d.Headers[tracing.HeaderTraceParent].(string)
	switch c.proc.Process(ctx, logID, tp) {
	case Requeue:
		select {
		case <-time.After(requeuePause):
		case <-ctx.Done():
		}
		_ = d.Nack(false, true)
	default:
		if err := d.Ack(false); err != nil {
			// The channel is gone; the broker redelivers and idempotency
			// absorbs it.
			c.logger.Debug("worker: ack failed", "log_id", logID, "error", err)
		}
	}
}
