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
	conn := NewConnection(ConnectionConfig{
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

// Stop publishes what the announcer holds (up to its drain time), then
// closes the connection.
func (r *Runtime) Stop() {
	r.stopAnn()
	<-r.Announcer.Done()
	r.stopConn()
	<-r.connDone
}
