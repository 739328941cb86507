package broker

import (
	"context"
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

// Nacked counts publishes not confirmed (requeued or dropped).
func (a *Announcer) Nacked() int64 { return a.nacked.Load() }

// Run publishes until ctx ends. Then it keeps publishing what is buffered
// for up to drain, so that a graceful stop announces what it accepted, and
// returns.
func (a *Announcer) Run(ctx context.Context, drain time.Duration) {
	defer close(a.stopped)
	for ctx.Err() == nil {
		conn, err := a.conn.Wait(ctx)
		if err != nil {
			break
		}
		if err := a.publishOn(ctx, conn, false); err != nil && ctx.Err() == nil {
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

type pendingConfirm struct {
	dc *amqp.DeferredConfirmation
	an Announcement
}

// confirmGrace bounds the wait for outstanding confirms once publishing on a
// channel stops; what is still unconfirmed then is left to compensation.
const confirmGrace = 5 * time.Second

// publishOn publishes from the buffer on one fresh confirm-mode channel until
// ctx ends or the channel closes; with untilEmpty, also when the buffer is
// empty.
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

	pending := make(chan pendingConfirm, a.cfg.Window)
	waitCtx, giveUp := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := range pending {
			// A confirm outstanding when the channel closes resolves as
			// not acked: treat it as not published.
			if acked, _ := p.dc.WaitContext(waitCtx); acked {
				a.published.Add(1)
				continue
			}
			a.nacked.Add(1)
			a.requeue(p.an)
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
		conf, err := ch.PublishWithDeferredConfirmWithContext(context.WithoutCancel(ctx), a.cfg.Exchange, an.Kind, false, false, msg)
		if err != nil {
			a.requeue(an)
			return err
		}
		// Blocks when Window confirms are outstanding: back-pressure fills
		// the buffer, never the HTTP path.
		pending <- pendingConfirm{dc: conf, an: an}
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
