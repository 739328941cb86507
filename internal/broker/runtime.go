package broker

import (
	"context"
	"log/slog"
	"time"
)

// Runtime is a process's running broker side: the self-healing connection
// and the announcer publishing on it.
type Runtime struct {
	Conn      *Connection
	Announcer *Announcer
	stopAnn   context.CancelFunc
	stopConn  context.CancelFunc
	connDone  chan struct{}
}

// Start connects (in the background, redialing forever) with topo declared
// on every connect, and starts the announcer. Stop undoes it.
func Start(cfg Config, name string, topo Topology, drain time.Duration, onReconnect func(), log *slog.Logger) *Runtime {
	cfg = cfg.WithDefaults()
	topo.Log = log
	setting := "amqp.url"
	if len(cfg.URLs) > 0 {
		setting = "amqp.urls"
	}
	conn := NewConnection(ConnectionConfig{
		Setting:      setting,
		URLs:         cfg.Nodes(),
		Name:         name,
		ReconnectMin: cfg.ReconnectMin,
		ReconnectMax: cfg.ReconnectMax,
		Setup:        topo.Declare,
		OnReconnect:  onReconnect,
	}, log)
	r := &Runtime{Conn: conn, connDone: make(chan struct{})}
	var connCtx, annCtx context.Context
	connCtx, r.stopConn = context.WithCancel(context.Background())
	go func() { defer close(r.connDone); conn.Run(connCtx) }()
	r.Announcer = NewAnnouncer(AnnouncerConfig{
		Exchange: topo.CallbacksExchange(),
		Buffer:   cfg.AnnounceBuffer,
		Window:   cfg.ConfirmWindow,
		AppID:    name,
	}, conn, log)
	annCtx, r.stopAnn = context.WithCancel(context.Background())
	go r.Announcer.Run(annCtx, drain)
	return r
}

// FirstRoundWait bounds how long a process waits at start for its first
// round of dials, so that a broker refusing the login stops it before it
// serves: RabbitMQ answers a wrong password in about 3 s, a node that
// does not answer at all takes the dial's 5 s timeout.
const FirstRoundWait = 6 * time.Second

// Started waits, at most wait or until ctx ends, for the first round of
// dials, and returns the broker's refusal (*RefusedError) when it refused
// the login, the vhost or the topology. It returns nil when the broker
// connected, or could not be reached (the connection redials in the
// background, as always), or did not answer within wait: a refusal after
// that shows in Failed.
func (r *Runtime) Started(ctx context.Context, wait time.Duration) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-r.Conn.FirstRound():
	case <-t.C:
	case <-ctx.Done():
	}
	if refused := r.Conn.Refused(); refused != nil {
		return refused
	}
	return nil
}

// Failed is closed when the connection gave up on a refusal (see
// Connection.Run); Refused says why.
func (r *Runtime) Failed() <-chan struct{} { return r.Conn.Failed() }

// Stop publishes what the announcer holds (up to its drain time), then
// closes the connection.
func (r *Runtime) Stop() {
	r.stopAnn()
	<-r.Announcer.Done()
	r.stopConn()
	<-r.connDone
}
