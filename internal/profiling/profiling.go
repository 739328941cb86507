// Package profiling serves Go's profiler (net/http/pprof) on a listener of
// its own, for the processes whose config asks for it (http.pprof_addr,
// worker.pprof_addr). Off by default; never expose it.
package profiling

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Serve listens on addr (the setting is named by key in errors and logs)
// and serves the profiler until the returned func is called; it returns
// the address bound, for the process's start-up line.
func Serve(key, addr string, log *slog.Logger) (func(), string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("error listening on %s %s: %w", key, addr, err)
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
