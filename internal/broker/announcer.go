package broker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AnnouncerConfig configures an Announcer.
type AnnouncerConfig struct {
	// Exchange receives the announcements; the routing key is the kind.
	Exchange string
	// Buffer is how many announcements may wait for the broker. When it is
	// full Announce drops the announcement: the row is already committed as
	// PENDING and the compensation job announces it later.
	Buffer int
	// Window is how many publishes may await their confirm at once.
	Window int
	// AppID is set on every message.
	AppID string
}

// Announcer publishes announcements off the request path: Announce only
// queues, and one goroutine publishes with pipelined publisher confirms. A
// message is announced when RabbitMQ confirmed it (persisted); anything not
// confirmed goes back to the buffer, or, if that is full, is left to the
// compensation job. Nothing here ever blocks or fails an HTTP answer.
type Announcer struct {
	cfg     AnnouncerConfig
	conn    *Connection
	log     *slog.Logger
	queue   chan Announcement
	stopped chan struct{}

	published atomic.Int64
	dropped   atomic.Int64
	nacked    atomic.Int64
}

// NewAnnouncer returns an Announcer; call Run to start publishing.
func NewAnnouncer(cfg AnnouncerConfig, conn *Connection, log *slog.Logger) *Announcer {
	if cfg.Window < 1 {
		cfg.Window = ConfirmWindowDefault
	}
	return &Announcer{cfg: cfg, conn: conn, log: log, queue: make(chan Announcement, cfg.Buffer), stopped: make(chan struct{})}
}

// Announce queues a for publishing and reports whether it was queued.
func (a *Announcer) Announce(an Announcement) bool {
	select {
	case a.queue <- an:
		return true
	default:
		a.dropped.Add(1)
		return false
	}
}

// Published counts announcements the broker confirmed.
func (a *Announcer) Published() int64 { return a.published.Load() }

// Dropped counts announcements left to compensation (buffer full).
func (a *Announcer) Dropped() int64 { return a.dropped.Load() }

// Nacked counts publishes not confirmed or returned as unroutable (requeued,
// or dropped when the buffer is full).
func (a *Announcer) Nacked() int64 { return a.nacked.Load() }

// Run publishes until ctx ends. Then it keeps publishing what is buffered
// for up to drain, so that a graceful stop announces what it accepted, and
// returns.
func (a *Announcer) Run(ctx context.Context, drain time.Duration) {
	defer close(a.stopped)
	var again time.Duration // before the next channel after a refusal
	for ctx.Err() == nil {
		conn, err := a.conn.Wait(ctx)
		if err != nil {
			break
		}
		published := a.published.Load()
		err = a.publishOn(ctx, conn, false)
		if ctx.Err() != nil {
			break
		}
		if a.published.Load() > published {
			again = 0
		}
		var refused *refusedError
		switch {
		case errors.As(err, &refused):
			// The first retry goes at once, on a channel of its own: a
			// channel the broker refuses on keeps refusing (see
			// refusedError). A broker that refuses fresh channels too is
			// asked less often, up to refusedRetryMax apart.
			a.log.Error("announcer: the broker did not take an announcement; publishing it again on a new channel",
				"message_id", refused.id, "reason", refused.reason, "node", a.conn.Node(), "retry_in", again)
			sleep(ctx, again)
			again = min(max(2*again, refusedRetryMin), refusedRetryMax)
		case err != nil:
			a.log.Warn("announcer: channel failed, reopening", "error", err)
			sleep(ctx, 200*time.Millisecond)
		}
	}
	if drain <= 0 || len(a.queue) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if conn, err := a.conn.Current(); err == nil {
		_ = a.publishOn(dctx, conn, true)
	}
	if n := len(a.queue); n > 0 {
		a.log.Warn("announcer: stopped with announcements unsent; the compensation job will announce them", "count", n)
	}
}

// Backoff between fresh channels while the broker refuses announcements.
const (
	refusedRetryMin = 50 * time.Millisecond
	refusedRetryMax = 2 * time.Second
)

// refusedError is an announcement the broker answered on an open channel
// without taking it: nacked, or returned as unroutable (published
// mandatory; no queue bound for its kind). The channel is given up at once.
// A nack has one known cause that a new channel cures: RabbitMQ 3.10's
// quorum queue client registers a channel as a publisher on the first
// publish, asking the queue's leader as the queue record names it; a
// channel that first publishes while that leader is on a node just lost
// is refused, every publish and for as long as that node is down, while a
// channel opened a moment later finds the new leader.
type refusedError struct{ id, reason string }

func (e *refusedError) Error() string { return "announcement " + e.id + " " + e.reason }

type pendingConfirm struct {
	dc *amqp.DeferredConfirmation
	an Announcement
	id string // the message id
}

// confirmGrace bounds the wait for outstanding confirms once publishing on a
// channel stops; what is still unconfirmed then is left to compensation.
const confirmGrace = 5 * time.Second

// publishOn publishes from the buffer on one fresh confirm-mode channel until
// ctx ends, the channel closes, or the broker refuses an announcement on it
// (a *refusedError); with untilEmpty, also when the buffer is empty. What
// is not confirmed goes back to the buffer.
func (a *Announcer) publishOn(ctx context.Context, conn *amqp.Connection, untilEmpty bool) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	returns := WatchReturns(ch)
	refused := make(chan *refusedError, 1)

	pending := make(chan pendingConfirm, a.cfg.Window)
	waitCtx, giveUp := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := range pending {
			// A confirm outstanding when the channel closes resolves as
			// not acked: treat it as not published.
			acked, _ := p.dc.WaitContext(waitCtx)
			reason := "not confirmed"
			switch {
			case !acked:
			case !returns.Wait(waitCtx, p.dc.DeliveryTag):
			case returns.Take(p.id):
				reason = "returned: no queue bound for its kind"
			default:
				a.published.Add(1)
				continue
			}
			a.nacked.Add(1)
			a.requeue(p.an)
			if !ch.IsClosed() {
				select {
				case refused <- &refusedError{id: p.id, reason: reason}:
				default:
				}
			}
		}
	}()
	defer func() {
		close(pending)
		t := time.AfterFunc(confirmGrace, giveUp)
		wg.Wait()
		t.Stop()
		giveUp()
	}()

	body := make([]byte, 0, 32)
	for {
		if untilEmpty && len(a.queue) == 0 {
			return nil
		}
		var an Announcement
		select {
		case <-ctx.Done():
			return ctx.Err()
		case amqpErr := <-closed:
			if amqpErr != nil {
				return amqpErr
			}
			return ErrNotConnected
		case r := <-refused:
			// Closed before the deferred wait, so that what else is
			// outstanding on it comes back at once.
			_ = ch.Close()
			return r
		case an = <-a.queue:
		}
		body = an.appendBody(body[:0])
		msg := amqp.Publishing{
			ContentType:  "application/json",
			DeliveryMode: amqp.Persistent,
			MessageId:    announcementID(an),
			Timestamp:    time.Now(),
			Type:         an.Kind,
			AppId:        a.cfg.AppID,
			Body:         append([]byte(nil), body...),
		}
		if an.TraceParent != "" {
			msg.Headers = amqp.Table{"traceparent": an.TraceParent}
		}
		conf, err := ch.PublishWithDeferredConfirmWithContext(context.WithoutCancel(ctx), a.cfg.Exchange, an.Kind, true, false, msg)
		if err != nil {
			a.requeue(an)
			return err
		}
		// Blocks when Window confirms are outstanding: back-pressure fills
		// the buffer, never the HTTP path.
		pending <- pendingConfirm{dc: conf, an: an, id: msg.MessageId}
	}
}

func (a *Announcer) requeue(an Announcement) {
	select {
	case a.queue <- an:
	default:
		a.dropped.Add(1)
	}
}

// Done is closed when Run has returned.
func (a *Announcer) Done() <-chan struct{} { return a.stopped }

// announcementID names a message by its first log id and how many it
// carries ("callback-42", "callback-42+17").
func announcementID(an Announcement) string {
	if len(an.LogIDs) == 0 {
		return "callback-none"
	}
	id := "callback-" + strconv.FormatInt(an.LogIDs[0], 10)
	if n := len(an.LogIDs); n > 1 {
		id += "+" + strconv.Itoa(n-1)
	}
	return id
}
