// Package logging builds the process logger: log/slog, JSON by default,
// with the trace id of the context added to every line (see
// internal/tracing).
package logging

import (
	"io"
	"log/slog"

	"callgate/internal/config"
	"callgate/internal/tracing"
)

// New returns the logger for cfg writing to w.
func New(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if cfg.Format == "text" {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(tracing.LogHandler{Handler: h})
}
