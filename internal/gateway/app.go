package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"callgate/internal/admin"
	"callgate/internal/broker"
	"callgate/internal/config"
	"callgate/internal/intake"
	"callgate/internal/kinds"
	"callgate/internal/metrics"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// announceDrain bounds how long a stopping gateway keeps publishing the
// announcements it already accepted.
const announceDrain = 5 * time.Second

// Run wires the gateway process from cfg and serves on ln until ctx ends.
// Shutdown order: stop accepting and finish in-flight requests, publish what
// was accepted (bounded), close the broker, then the database.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, ln net.Listener) error {
	sources, err := intake.NewSources(cfg.Sources)
	if err != nil {
		return err
	}
	st, err := store.Open(cfg.MySQL)
	if err != nil {
		return err
	}
	defer st.Close()

	var inserter intake.Inserter = st
	if cfg.MySQL.GroupCommit {
		b := store.NewBatcher(st, cfg.MySQL.GroupCommitWriters, cfg.MySQL.GroupCommitMaxBatch, log)
		defer b.Close()
		inserter = b
	}

	exporter, err := tracing.NewExporter(ctx, cfg.Tracing.OTLPEndpoint, "callgate-gateway")
	if err != nil {
		return err
	}
	defer func() { _ = exporter.Shutdown(context.WithoutCancel(ctx)) }()

	m := metrics.New("gateway")
	topo := Topology(cfg)
	mq := broker.Start(cfg.AMQP, "callgate-gateway", topo, announceDrain, m.BrokerReconnects.Inc, log)
	defer mq.Stop()
	conn, ann := mq.Conn, mq.Announcer
	m.ObserveAnnouncer(ann.Published, ann.Dropped, ann.Nacked)

	gcfg := Config{
		Addr:            cfg.HTTP.Addr,
		ShutdownTimeout: cfg.HTTP.ShutdownTimeout,
		Server:          cfg.HTTP,
		Log:             log,
		Metrics:         m,
		Tracing:         exporter,
		Intake: &intake.Handler{
			Sources:         sources,
			Store:           inserter,
			Announcer:       ann,
			Log:             log,
			StoreTimeout:    cfg.MySQL.IntakeTimeout,
			ReannounceAfter: cfg.Scheduler.Compensation.Threshold,
			Now:             time.Now,
			Metrics:         m,
		},
		Ready: map[string]Pinger{
			"mysql": st,
			"rabbitmq": PingerFunc(func(context.Context) error {
				_, err := conn.Current()
				return err
			}),
		},
	}
	tokens, err := admin.ParseTokens(cfg.Admin.Token)
	if err != nil {
		return err
	}
	gcfg.Admin = &admin.Handler{
		Tokens: tokens,
		Log:    log,
		Secure: cfg.HTTP.TLSCertFile != "" || cfg.Admin.SecureCookie,
		Service: &admin.Service{
			DB:        st.DB,
			Announcer: ann,
			Threshold: cfg.Scheduler.Compensation.Threshold,
			Cap:       cfg.Admin.ReplayCap,
			Masks:     masks(cfg.Sources),
			Unrouted:  func() (int, error) { return topo.UnroutedDepth(conn) },
			Log:       log,
		},
	}
	if cfg.HTTP.PprofAddr != "" {
		stopPprof, err := servePprof(cfg.HTTP.PprofAddr, log)
		if err != nil {
			return err
		}
		defer stopPprof()
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.HTTP.Addr); err != nil {
			return fmt.Errorf("error listening on %s: %w", cfg.HTTP.Addr, err)
		}
	}
	return ServeListener(ctx, gcfg, NewRouter(gcfg), ln)
}

// Topology is the broker topology of cfg.
func Topology(cfg *config.Config) broker.Topology {
	return broker.Topology{
		Prefix: cfg.AMQP.Prefix,
		Kinds:  kinds.Names(),
		Quorum: cfg.AMQP.QueueType == config.QueueTypeQuorum,
	}
}

// masks collects each source's mask_fields.
func masks(sources []config.Source) map[string][]string {
	out := map[string][]string{}
	for _, s := range sources {
		if len(s.MaskFields) > 0 {
			out[s.Name] = s.MaskFields
		}
	}
	return out
}

// servePprof serves the Go profiler on its own listener, off by default.
func servePprof(addr string, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("error listening on http.pprof_addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Warn("gateway: pprof enabled", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}
