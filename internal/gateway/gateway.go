// Package gateway wires the gateway process's HTTP surface: the intake
// endpoint, health and readiness, and the shared middleware (trace context,
// panic recovery, JSON errors). It owns the http.Server and its graceful
// shutdown; what each endpoint does lives in its own package.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"callgate/internal/admin"
	"callgate/internal/config"
	"callgate/internal/console"
	"callgate/internal/intake"
	"callgate/internal/metrics"
	"callgate/internal/tracing"
)

// Pinger reports whether a dependency answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// PingerFunc adapts a function to Pinger.
type PingerFunc func(ctx context.Context) error

// Ping implements Pinger.
func (f PingerFunc) Ping(ctx context.Context) error { return f(ctx) }

// Config is what the gateway serves.
type Config struct {
	Addr            string
	ShutdownTimeout time.Duration
	// Server holds the timeouts, header cap and TLS files.
	Server config.HTTP
	Intake *intake.Handler
	// Ready lists the dependencies /readyz checks, by name.
	Ready   map[string]Pinger
	Log     *slog.Logger
	Metrics *metrics.Metrics
	// MetricsPublic serves /metrics on the public listener when there is
	// no admin listener (metrics.public).
	MetricsPublic bool
	// Admin serves /admin/api/, and the console /admin/ (404 when no
	// token is set).
	Admin *admin.Handler
	// Tracing records request spans when configured (nil: off).
	Tracing *tracing.SpanRecorder
	// PprofAt is where the profiler listens (http.pprof_addr), for the
	// start-up line; empty when it is off.
	PprofAt string
	// Listening, when set, is called once every listener serves (after
	// the "listening" lines).
	Listening func()
}

// NewRouter builds the gin engine of the public listener: the intake and
// health endpoints, plus /metrics and the admin surface unless
// Server.AdminAddr moves those to NewAdminRouter's listener.
func NewRouter(cfg Config) *gin.Engine {
	r := newEngine(cfg)
	r.POST("/callbacks/:source", cfg.Intake.Callback)
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", readyz(cfg.Ready, cfg.Log))
	if cfg.Server.AdminAddr == "" {
		mountOperator(r, cfg, cfg.MetricsPublic)
	}
	return r
}

// NewAdminRouter builds the engine of the http.admin_addr listener:
// /metrics and the admin surface only.
func NewAdminRouter(cfg Config) *gin.Engine {
	r := newEngine(cfg)
	mountOperator(r, cfg, true)
	return r
}

// newEngine is a gin engine with the shared middleware and JSON 404/405.
func newEngine(cfg Config) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	_ = r.SetTrustedProxies(nil) // ClientIP is the TCP peer; X-Forwarded-For is not believed
	r.ContextWithFallback = true
	r.Use(traceContext(cfg.Tracing), recoverJSON(cfg.Log))
	r.NoRoute(func(c *gin.Context) { intake.WriteError(c, http.StatusNotFound, "not found") })
	r.NoMethod(func(c *gin.Context) { intake.WriteError(c, http.StatusMethodNotAllowed, "method not allowed") })
	return r
}

// mountOperator adds what operators use and platforms never need; metrics
// says whether /metrics is among it (on the public listener only with
// metrics.public).
func mountOperator(r *gin.Engine, cfg Config, metrics bool) {
	if metrics {
		r.GET("/metrics", gin.WrapH(cfg.Metrics.Handler()))
	}
	if cfg.Admin != nil {
		cfg.Admin.Mount(r)
		console.New(cfg.Admin).Mount(r)
	}
}

// traceContext puts the request's trace (incoming traceparent, or a new
// one) into its context and echoes the trace id to the caller.
func traceContext(exp *tracing.SpanRecorder) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, end := exp.StartRequest(c.Request.Context(), c.Request.Header, c.Request.Method+" "+c.FullPath())
		defer end()
		c.Request = c.Request.WithContext(ctx)
		c.Header("X-Trace-Id", tracing.TraceID(ctx))
		c.Next()
	}
}

// recoverJSON turns a panic into a 500 with a JSON body and a log line with
// the trace id and stack, never the stack to the caller.
func recoverJSON(log *slog.Logger) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, err any) {
		log.ErrorContext(c.Request.Context(), "gateway: panic serving request", "path", c.FullPath(), "panic", err)
		intake.WriteError(c, http.StatusInternalServerError, "internal error")
	})
}

// readyz answers which dependency is down, never its error text (a
// database user, a broker's address): that goes to the log, with the
// request's trace id, once per change (anyone may ask /readyz as often as
// they like; the log is not theirs to fill).
func readyz(deps map[string]Pinger, log *slog.Logger) gin.HandlerFunc {
	if log == nil {
		log = slog.Default()
	}
	var mu sync.Mutex
	last := map[string]string{} // dependency -> "down" or "" (ok), as last logged
	changed := func(name, now string) bool {
		mu.Lock()
		defer mu.Unlock()
		if last[name] == now {
			return false
		}
		last[name] = now
		return true
	}
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
		defer cancel()
		body := gin.H{}
		ok := true
		for name, p := range deps {
			if err := p.Ping(ctx); err != nil {
				ok = false
				body[name] = "unavailable"
				if changed(name, "down") {
					log.WarnContext(c.Request.Context(), "gateway: not ready", "dependency", name, "error", err)
				}
			} else {
				body[name] = "ok"
				if changed(name, "") {
					log.InfoContext(c.Request.Context(), "gateway: ready", "dependency", name)
				}
			}
		}
		if ok {
			body["status"] = "ready"
			c.JSON(http.StatusOK, body)
			return
		}
		body["status"] = "unready"
		c.JSON(http.StatusServiceUnavailable, body)
	}
}

// Listener is an open listener and what it serves.
type Listener struct {
	// Name tells the listeners apart in the log ("public", "admin").
	Name     string
	Listener net.Listener
	Handler  http.Handler
	// Operator and Metrics say whether Handler serves the console and
	// admin API, and /metrics: the start-up line names where they are.
	Operator, Metrics bool
}

// ServeListeners serves every listener until ctx ends or one of them fails,
// then shuts them all down together: stop accepting, let in-flight requests
// finish within ShutdownTimeout, close what is left. It returns the first
// failure, or nil after a shutdown asked for by ctx.
func ServeListeners(ctx context.Context, cfg Config, ls ...Listener) error {
	servers := make([]*http.Server, len(ls))
	errc := make(chan error, len(ls))
	// One line names every address as bound (the port of a ":0", the
	// interface of ":8080"), and which of them serves the operator side
	// and /metrics: whoever reads it sees at once what reaches the
	// network.
	at := map[string]string{"admin": "off", "metrics": "off"}
	for i, l := range ls {
		srv := newServer(cfg, l.Handler)
		servers[i] = srv
		go func() { errc <- serve(srv, l.Listener, cfg.Server) }()
		addr := l.Listener.Addr().String()
		if l.Name == "public" {
			at["public"] = addr
		}
		if l.Operator {
			at["admin"] = addr
		}
		if l.Metrics {
			at["metrics"] = addr
		}
	}
	pprofAt := "off"
	if cfg.PprofAt != "" {
		pprofAt = cfg.PprofAt
	}
	cfg.Log.Info("gateway: listening", "public", at["public"], "admin", at["admin"], "metrics", at["metrics"], "pprof", pprofAt)
	if cfg.Listening != nil {
		cfg.Listening()
	}
	var first error
	pending := len(ls)
	select {
	case first = <-errc:
		pending--
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Go(func() {
			if err := srv.Shutdown(sctx); errors.Is(err, context.DeadlineExceeded) {
				cfg.Log.Warn("gateway: shutdown timed out, closing remaining connections", "listener", ls[i].Name)
				_ = srv.Close()
			}
		})
	}
	wg.Wait()
	for ; pending > 0; pending-- {
		if err := <-errc; first == nil && !errors.Is(err, http.ErrServerClosed) {
			first = err
		}
	}
	if first != nil && !errors.Is(first, http.ErrServerClosed) {
		return first
	}
	return nil
}

// newServer is an http.Server with the configured timeouts and header cap.
func newServer(cfg Config, handler http.Handler) *http.Server {
	sc := cfg.Server
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: sc.ReadHeaderTimeout,
		ReadTimeout:       sc.ReadTimeout,
		WriteTimeout:      sc.WriteTimeout,
		IdleTimeout:       sc.IdleTimeout,
		MaxHeaderBytes:    sc.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(cfg.Log.Handler(), slog.LevelWarn),
	}
}

// serve runs srv on ln, with TLS when the files are configured.
func serve(srv *http.Server, ln net.Listener, sc config.HTTP) error {
	if sc.TLSCertFile != "" {
		return srv.ServeTLS(ln, sc.TLSCertFile, sc.TLSKeyFile)
	}
	return srv.Serve(ln)
}
