// Package profiling serves Go's profiler (net/http/pprof) on a listener of
// its own, for the processes whose config asks for it (http.pprof_addr,
// worker.pprof_addr). Off by default; never expose it.
package profiling

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"callgate/internal/listen"
)

// Serve listens on addr and serves the profiler until the returned func
// is called; it returns the address bound, for the process's start-up
// line. key is the setting that gave addr and env the variable that
// overrides it: an address in use names both (a *listen.Error).
func Serve(key, env, addr string, log *slog.Logger) (func(), string, error) {
	ln, err := listen.TCP(key, env, addr)
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Warn("profiling: pprof enabled", "setting", key, "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, ln.Addr().String(), nil
}
