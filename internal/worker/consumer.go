package worker

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"callgate/internal/broker"
	"callgate/internal/callback"
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
	// batchSize is how many callbacks a batch gathers at most.
	batchSize int
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
	c.logger.Info("worker: consuming", "queue", c.queue, "prefetch", c.prefetch, "concurrency", c.concurrency, "batch_size", c.batchSize)
	var carry *amqp.Delivery // the delivery that did not fit the last batch
	for {
		// A free slot first, then the batch: what queued up while every
		// slot was busy goes into the next batch (batches grow with the
		// load, and a lone message is processed at once).
		select {
		case <-ctx.Done():
			return c.stop(ch)
		case sem <- struct{}{}:
		}
		var batch []amqp.Delivery
		if carry != nil {
			batch, carry = c.gather(*carry, deliveries)
		} else {
			select {
			case <-ctx.Done():
				<-sem
				return c.stop(ch)
			case d, ok := <-deliveries:
				if !ok {
					<-sem
					return amqp.ErrClosed
				}
				batch, carry = c.gather(d, deliveries)
			}
		}
		inflight.Add(1)
		go func() {
			defer inflight.Done()
			defer func() { <-sem }()
			c.handle(workCtx, batch)
		}()
	}
}

// stop cancels the subscription: the prefetched messages not started go
// back to the broker when the channel closes.
func (c *consumer) stop(ch *amqp.Channel) error {
	_ = ch.Cancel(c.tag, false)
	return nil
}

// gatherYields is how often gather lets other goroutines run before it
// takes an empty channel for an idle queue: amqp091-go hands deliveries
// over one at a time from a goroutine of its own, so a receive right after
// the last one finds the channel empty although more are prefetched.
const gatherYields = 3

// gather adds to first the deliveries already waiting, without waiting for
// more, as long as they carry at most batchSize callbacks together; the
// delivery that would overflow the batch is returned to start the next.
func (c *consumer) gather(first amqp.Delivery, deliveries <-chan amqp.Delivery) (batch []amqp.Delivery, carry *amqp.Delivery) {
	batch = []amqp.Delivery{first}
	n := announcedCount(first.Body)
	for misses := 0; n < c.batchSize && misses <= gatherYields; {
		select {
		case d, ok := <-deliveries:
			if !ok {
				return batch, nil
			}
			k := announcedCount(d.Body)
			if n+k > c.batchSize {
				return batch, &d
			}
			batch = append(batch, d)
			n += k
			misses = 0
		default:
			misses++
			runtime.Gosched()
		}
	}
	return batch, nil
}

// announcedCount is how many callbacks a message announces (1 for one that
// cannot be read: it is dropped in handle).
func announcedCount(body []byte) int {
	ids, err := broker.ParseAnnouncement(body)
	if err != nil {
		return 1
	}
	return len(ids)
}

// handle processes the callbacks of a batch of deliveries and settles each
// delivery, each callback on its own: a delivery whose callbacks are all
// done for now is acked; one whose callbacks could none be recorded (the
// database away, a stopping worker) goes back to the broker after a pause
// that holds the slot; otherwise the delivery is acked and only the
// callbacks that must run again are announced again, after the pause
// (the slot free meanwhile), so their message-mates are not delivered
// again. (A mate that did come again would be skipped: a
// settled callback is terminal, a retrying one not due before its
// backoff.)
func (c *consumer) handle(ctx context.Context, batch []amqp.Delivery) {
	perDelivery := make([][]int64, len(batch))
	var all []int64
	for i, d := range batch {
		ids, err := broker.ParseAnnouncement(d.Body)
		if err != nil {
			// Not something we announced: nothing to process, nothing to
			// retry.
			c.logger.Warn("worker: unreadable message dropped", "queue", c.queue, "body", callback.Truncate(string(d.Body), 200))
			_ = d.Ack(false)
			continue
		}
		perDelivery[i] = ids
		all = append(all, ids...)
	}
	if len(all) == 0 {
		return
	}
	results := c.proc.ProcessBatch(ctx, all)
	paused := false
	pause := func() {
		if !paused {
			paused = true
			select {
			case <-time.After(requeuePause):
			case <-ctx.Done():
			}
		}
	}
	for i, d := range batch {
		if perDelivery[i] == nil {
			continue
		}
		var again []int64
		away := false
		for _, id := range perDelivery[i] {
			switch results[id] {
			case Ack:
				continue
			case Requeue:
				away = true
			}
			again = append(again, id)
		}
		switch {
		case len(again) == 0:
			c.ack(d)
		case away && len(again) == len(perDelivery[i]):
			// None of its callbacks could be recorded, the database away
			// for them: the message goes back after a pause that holds
			// the slot, so a worker without its database slows down.
			pause()
			_ = d.Nack(false, true)
		default:
			// The message is acked now (its mates' outcomes stand, and
			// its prefetch credit comes back); only the callbacks that
			// must run again are announced again, alone, after a pause
			// (their row or key held by another transaction, or the
			// database away for them), without holding a slot meanwhile.
			// Their rows stay PENDING: should that announcement be lost
			// (a worker that dies within the second), the compensation
			// job announces them.
			c.ack(d)
			trace, _ := d.Headers["traceparent"].(string)
			an := broker.Announcement{LogIDs: again, Kind: c.kind, TraceParent: trace}
			time.AfterFunc(requeuePause, func() {
				if !c.proc.Announcer.Announce(an) {
					c.logger.Warn("worker: could not announce callbacks again, left to the compensation job", "log_ids", again)
				}
			})
		}
	}
}

func (c *consumer) ack(d amqp.Delivery) {
	if err := d.Ack(false); err != nil {
		// The channel is gone; the broker redelivers and idempotency
		// absorbs it.
		c.logger.Debug("worker: ack failed", "error", err)
	}
}
