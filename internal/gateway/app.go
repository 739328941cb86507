package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"callgate/internal/admin"
	"callgate/internal/broker"
	"callgate/internal/clientaddr"
	"callgate/internal/config"
	"callgate/internal/demo"
	"callgate/internal/ingest"
	"callgate/internal/intake"
	"callgate/internal/kinds"
	"callgate/internal/listen"
	"callgate/internal/metrics"
	"callgate/internal/platform"
	"callgate/internal/profiling"
	"callgate/internal/replay"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/tracing"
	"callgate/internal/wechatcerts"
)

// announceDrain bounds how long a stopping gateway keeps publishing the
// announcements it already accepted.
const announceDrain = 5 * time.Second

// Run wires the gateway process from cfg and serves on ln (nil: listen on
// http.addr) until ctx ends, and on http.admin_addr when it is set.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger, ln net.Listener) error {
	return RunListeners(ctx, cfg, log, Listeners{Public: ln})
}

// Listeners are listeners the caller opened (tests pick free ports). A nil
// one is opened from the config.
type Listeners struct {
	// Public serves the intake and health (http.addr).
	Public net.Listener
	// Admin serves /admin/ and /metrics (http.admin_addr). Giving one
	// separates them from Public even when http.admin_addr is unset.
	Admin net.Listener
}

// RunListeners is Run on the given listeners. Shutdown order: stop
// accepting and finish in-flight requests on every listener, publish what
// was accepted (bounded), close the broker, then the database.
func RunListeners(ctx context.Context, cfg *config.Config, log *slog.Logger, ls Listeners) error {
	sources, disabled, err := intake.NewSources(cfg.Sources, cfg.Demo)
	if err != nil {
		return err
	}
	// The admin tokens are read before anything connects: a mistyped role
	// stops the start, naming the token.
	tokens, err := admin.ParseTokens(cfg.Admin.Token)
	if err != nil {
		return err
	}
	if tokens.Enabled() {
		log.Info("gateway: admin tokens", "tokens", tokens.Summary())
	}
	if cfg.HTTP.AdminAddr == "" && !cfg.Metrics.Public {
		log.Info("gateway: /metrics is not served (no http.admin_addr, metrics.public false; CALLGATE_METRICS_PUBLIC=1 serves it on the public listener)")
	}
	proxies, err := clientaddr.ParseProxies(cfg.Admin.TrustedProxies)
	if err != nil {
		return fmt.Errorf("admin.%w", err)
	}
	disabledWhy := make(map[string]string, len(disabled))
	if len(disabled) > 0 {
		// A short line naming them, then one per source with its reason
		// (together they made a 600-character line).
		names := make([]string, len(disabled))
		for i, d := range disabled {
			names[i] = d.Name
			disabledWhy[d.Name] = d.Reason
		}
		log.Warn("gateway: sources disabled (they answer 404)", "sources", strings.Join(names, ", "))
		for _, d := range disabled {
			log.Info("gateway: source disabled", "source", d.Name, "reason", d.Reason)
		}
	}
	if cfg.Demo {
		log.Warn("gateway: demo mode (" + config.EnvDemo + "=1): the sources with the README's demo secrets serve; never in production")
	}
	st, err := store.Open(cfg.MySQL)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkRowsFit(ctx, st, cfg, log); err != nil {
		return err
	}
	if cfg.MySQL.Durability == store.DurabilityReplica {
		// A gateway restarted during a failover must come up: only a server
		// that says it does not replicate semi-synchronously stops it; one
		// that cannot be asked now is checked at every callback anyway.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := st.CheckReplication(cctx)
		cancel()
		switch {
		case errors.Is(err, store.ErrReplicationSettings):
			return fmt.Errorf("mysql.durability: replica: %w", err)
		case err != nil:
			log.Warn("gateway: could not read the primary's semi-sync settings now; every callback is checked all the same", "error", err)
		}
		log.Info("gateway: a callback is accepted once a replica acknowledges it (mysql.durability: replica)")
	}

	spans, err := tracing.NewSpanRecorder(ctx, cfg.Tracing.OTLPEndpoint, "callgate-gateway")
	if err != nil {
		return err
	}
	defer func() { _ = spans.Shutdown(context.WithoutCancel(ctx)) }()

	m := metrics.New("gateway")
	// WeChat Pay platform certificates renew themselves in the background
	// (a source with certificates and the merchant's credentials), from
	// those stored in MySQL by any process: the start never waits for
	// WeChat Pay.
	certsCtx, stopCerts := context.WithCancel(ctx)
	defer stopCerts()
	if _, err := wechatcerts.Start(certsCtx, cfg.Sources, presetsOf(sources), st, log, m); err != nil {
		return err
	}
	topo := broker.NewTopology(cfg.AMQP, kinds.Names())
	mq := broker.Start(cfg.AMQP, "callgate-gateway", topo, announceDrain, m.BrokerReconnects.Inc, log)
	defer mq.Stop()
	// A broker that refuses the login stops the start before anything is
	// served; one that is down is redialled in the background, as always.
	if err := mq.Started(ctx, broker.FirstRoundWait); err != nil {
		return err
	}
	conn, ann := mq.Conn, mq.Announcer
	// The intake announces what it stores: a group-commit batch's new
	// callbacks in one announcement per kind. (Closed before the broker
	// stops, so its last announcements are published.)
	announceNew := ingest.AnnounceNew(ann, log)
	var inserter ingest.Inserter = ingest.OneByOne{Store: st, Announce: announceNew}
	if cfg.MySQL.GroupCommit {
		b := store.NewBatcher(st, cfg.MySQL.GroupCommitWriters, cfg.MySQL.GroupCommitMaxBatch, log, announceNew)
		defer b.Close()
		inserter = b
	}
	m.ObserveAnnouncer(ann.Published, ann.Dropped, ann.Nacked)
	ready := map[string]Pinger{
		"mysql": st,
		"rabbitmq": PingerFunc(func(context.Context) error {
			_, err := conn.Current()
			return err
		}),
	}
	var replicaState func(context.Context) error
	if cfg.MySQL.Durability == store.DurabilityReplica {
		replicaState = st.PingReplica
		go watchReplica(ctx, st, log)
		ready["mysql_replica"] = PingerFunc(st.PingReplica)
		m.ObserveReplica(func() float64 {
			if on, _, _ := st.ReplicaAcknowledging(); on {
				return 1
			}
			return 0
		}, func() float64 {
			_, clients, _ := st.ReplicaAcknowledging()
			return float64(clients)
		})
	}

	gcfg := Config{
		Addr:            cfg.HTTP.Addr,
		ShutdownTimeout: cfg.HTTP.ShutdownTimeout,
		Server:          cfg.HTTP,
		Log:             log,
		Metrics:         m,
		MetricsPublic:   cfg.Metrics.Public,
		Tracing:         spans,
		Intake: &intake.Handler{
			Sources:         sources,
			Disabled:        disabledWhy,
			Store:           inserter,
			Events:          kinds.Registry(cfg.WorkerSettings()),
			Log:             log,
			StoreTimeout:    cfg.MySQL.IntakeTimeout,
			ReannounceAfter: cfg.Scheduler.Compensation.Threshold,
			Now:             time.Now,
			Metrics:         m,
			DeadLetters:     deadLetters(cfg, sources, st),
		},
		Ready: ready,
	}
	gcfg.Admin = &admin.Handler{
		Tokens:  tokens,
		Proxies: proxies,
		Log:     log,
		Secure:  cfg.HTTP.TLSCertFile != "" || cfg.Admin.SecureCookie,
		Service: &admin.Service{
			Store:         st,
			Masks:         masks(cfg.Sources),
			Unrouted:      func() (int, error) { return topo.UnroutedDepth(conn) },
			UnroutedLimit: cfg.AMQP.UnroutedMaxLength,
			Replica:       replicaState,
			Log:           log,
		},
		Replays: &replay.Replayer{
			Store:      st,
			Announcer:  ann,
			Threshold:  cfg.Scheduler.Compensation.Threshold,
			Cap:        cfg.Admin.Replay.Cap,
			Log:        log,
			OnReplayed: m.Replayed.WithLabelValues("single").Inc,
		},
	}
	if o := cfg.Admin.OIDC; o.Issuer != "" {
		gcfg.Admin.SSO = admin.NewSSO(admin.SSOConfig{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
			RedirectURL: o.RedirectURL, RolesClaim: o.RolesClaim, Operators: o.Operators, Viewers: o.Viewers,
			Only: o.Only, MaxSession: o.MaxSession, Scopes: o.Scopes},
			func(ctx context.Context) ([]byte, error) { return st.DeploymentKey(ctx, store.DeploymentKeySSOFlow) }, log)
		// The flow cookie's key is the fleet's, in MySQL: read now, so that
		// sign-ins work as soon as the gateway serves. A database that
		// cannot be reached yet does not stop the start, as it stops
		// nothing else here: Run reads the key again until it can, and
		// "Sign in with SSO" answers 503 meanwhile.
		if err := gcfg.Admin.SSO.LoadFlowKey(ctx); err != nil {
			log.Warn("gateway: single sign-on waits for its flow cookie key from MySQL", "error", err)
		}
		// An unreachable provider is a warning and a retry, not a crash:
		// the token form (unless only) and the intake carry on.
		go gcfg.Admin.SSO.Run(ctx)
	}
	if cfg.HTTP.PprofAddr != "" {
		stopPprof, at, err := profiling.Serve("http.pprof_addr", config.EnvHTTPPprofAddr, cfg.HTTP.PprofAddr, log)
		if err != nil {
			return err
		}
		defer stopPprof()
		gcfg.PprofAt = at
	}
	if ls.Admin != nil {
		gcfg.Server.AdminAddr = ls.Admin.Addr().String()
	}
	served, err := openListeners(cfg.HTTP, ls)
	if err != nil {
		return err
	}
	if err := demoTokenOnLoopback(cfg, served); err != nil {
		closeListener(served.Public)
		closeListener(served.Admin)
		return err
	}
	if cfg.Demo {
		gcfg.Listening = func() {
			if cfg.Admin.Token == demo.AdminToken {
				console := baseURL(served.Public, cfg.HTTP)
				if served.Admin != nil {
					console = baseURL(served.Admin, cfg.HTTP)
				}
				log.Info("gateway: demo: the console is at "+console+"/admin/, log in with the demo admin token "+demo.AdminToken,
					"url", console+"/admin/", "token", demo.AdminToken)
			}
			log.Info("gateway: demo: try scripts/demo-callback.sh paydemo", "url", baseURL(served.Public, cfg.HTTP))
		}
	}
	// A broker that refuses the login later (it took longer than
	// FirstRoundWait to answer, and was never connected) stops the
	// gateway too.
	sctx, stopServing := context.WithCancel(ctx)
	defer stopServing()
	go func() {
		select {
		case <-mq.Failed():
			stopServing()
		case <-sctx.Done():
		}
	}()
	// What each serves, as NewRouter and NewAdminRouter mount it, for the
	// start-up line.
	ll := []Listener{{Name: "public", Listener: served.Public, Handler: NewRouter(gcfg),
		Operator: served.Admin == nil, Metrics: served.Admin == nil && gcfg.MetricsPublic}}
	if served.Admin != nil {
		ll = append(ll, Listener{Name: "admin", Listener: served.Admin, Handler: NewAdminRouter(gcfg), Operator: true, Metrics: true})
	}
	err = ServeListeners(sctx, gcfg, ll...)
	if refused := mq.Conn.Refused(); refused != nil {
		return refused
	}
	return err
}

// baseURL is the URL a user on this machine reaches ln at.
func baseURL(ln net.Listener, hc config.HTTP) string {
	scheme := "http"
	if hc.TLSCertFile != "" {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		return scheme + "://" + ln.Addr().String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// demoTokenOnLoopback refuses to serve the published demo admin token
// (demo mode without a token of one's own) where other machines reach it:
// anyone who read docs/getting-started.md could replay callbacks with it.
// It checks the listener serving the console and admin API, as bound
// (":8080" is every interface, "localhost:8080" loopback).
func demoTokenOnLoopback(cfg *config.Config, served Listeners) error {
	if !demo.HoldsAdminToken(cfg.Admin.Token) {
		return nil
	}
	e := &demoExposedError{setting: "http.addr", how: "listen on 127.0.0.1 (" + config.EnvHTTPAddr + "=127.0.0.1:8080, as make run does)", ln: served.Public}
	if served.Admin != nil {
		e = &demoExposedError{setting: "http.admin_addr", how: "put http.admin_addr on 127.0.0.1", ln: served.Admin}
	}
	host, _, err := net.SplitHostPort(e.ln.Addr().String())
	if ip := net.ParseIP(host); err == nil && ip != nil && ip.IsLoopback() {
		return nil
	}
	return e
}

// demoExposedError is demoTokenOnLoopback's refusal, a setting's fault
// (config.SettingError): the start-up error says where its value came
// from.
type demoExposedError struct {
	setting, how string
	ln           net.Listener
}

func (e *demoExposedError) Setting() string { return e.setting }

func (e *demoExposedError) Error() string {
	return fmt.Sprintf("%s: %s reaches other machines, and in demo mode the console and admin API there accept the published demo admin token: "+
		"%s, or set admin.token (CALLGATE_ADMIN_TOKEN) to a token of your own", e.setting, e.ln.Addr(), e.how)
}

// openListeners opens the listeners the caller did not: http.addr always,
// http.admin_addr when set. On failure nothing stays open.
func openListeners(hc config.HTTP, ls Listeners) (Listeners, error) {
	if ls.Public == nil {
		ln, err := listen.TCP("http.addr", config.EnvHTTPAddr, hc.Addr)
		if err != nil {
			closeListener(ls.Admin)
			return ls, err
		}
		ls.Public = ln
	}
	if ls.Admin == nil && hc.AdminAddr != "" {
		ln, err := listen.TCP("http.admin_addr", config.EnvHTTPAdminAddr, hc.AdminAddr)
		if err != nil {
			closeListener(ls.Public)
			return ls, err
		}
		ls.Admin = ln
	}
	return ls, nil
}

func closeListener(ln net.Listener) {
	if ln != nil {
		_ = ln.Close()
	}
}

// watchReplica reads the replica's state every second (for the metric
// between callbacks) and logs each change, until ctx ends. A reading the
// primary does not answer within a second is a failed one (the metric 0,
// not the last good reading): PingReplicaWithin tells its own deadline
// from ctx ending.
func watchReplica(ctx context.Context, st *store.Store, log *slog.Logger) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := ""
	for {
		state := admin.ReplicaAcknowledging
		if err := st.PingReplicaWithin(ctx, time.Second); err != nil {
			state = err.Error()
		}
		if state != last && ctx.Err() == nil {
			if state == admin.ReplicaAcknowledging {
				log.Info("gateway: a replica acknowledges commits: callbacks are accepted")
			} else {
				log.Warn("gateway: callbacks are answered 503 until a replica acknowledges commits", "reason", state)
			}
			last = state
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkRowsFit refuses to start when a source's max_body_bytes allows a
// callback that MySQL's max_allowed_packet could never take: such a
// callback would be answered 503 on every retry. When MySQL cannot be
// asked now (it is down at start), the check is skipped with a warning.
func checkRowsFit(ctx context.Context, st *store.Store, cfg *config.Config, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 2*cfg.MySQL.DialTimeout+time.Second)
	defer cancel()
	packet, err := st.MaxAllowedPacket(ctx)
	if ae := store.AsAccessError(err, cfg.MySQL.DSN); ae != nil {
		// The user, password or database is refused: no retry fixes it.
		return ae
	}
	if err != nil {
		log.Warn("gateway: could not check max_body_bytes against MySQL's max_allowed_packet", "error", err)
		return nil
	}
	var errs []error
	for i, s := range cfg.Sources {
		if !store.RowFits(s.MaxBodyBytes, int64(cfg.HTTP.MaxHeaderBytes), packet) {
			errs = append(errs, fmt.Errorf("sources[%d] (%s).max_body_bytes: %d is too large for MySQL's max_allowed_packet of %d "+
				"(a callback may need a %d-byte statement): lower max_body_bytes or raise max_allowed_packet",
				i, s.Name, s.MaxBodyBytes, packet, store.RowBytesNeeded(s.MaxBodyBytes, int64(cfg.HTTP.MaxHeaderBytes))))
		}
	}
	return errors.Join(errs...)
}

// masks collects each source's mask_fields.
func masks(sources []source.Config) map[string][]string {
	out := map[string][]string{}
	for _, s := range sources {
		if len(s.MaskFields) > 0 {
			out[s.Name] = s.MaskFields
		}
	}
	return out
}

// presetsOf is the preset of each source that has one, by name.
func presetsOf(sources map[string]*intake.Source) map[string]platform.Platform {
	out := map[string]platform.Platform{}
	for name, s := range sources {
		if s.Platform != nil {
			out[name] = s.Platform
		}
	}
	return out
}
