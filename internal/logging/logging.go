// Package logging builds the process logger: log/slog, JSON by default,
// with the trace id of the context added to every line (see
// internal/tracing).
package logging

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"callgate/internal/tracing"
)

// New returns the logger for cfg writing to w.
func New(cfg Config, w io.Writer) *slog.Logger {
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

// Config configures the log: the file's log section.
type Config struct {
	// Level is debug, info (default), warn or error.
	Level string `yaml:"level"`
	// Format is json (default) or text.
	Format string `yaml:"format"`
}

// Config defaults.
const (
	LevelDefault  = "info"
	FormatDefault = "json"
)

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Level == "" {
		c.Level = LevelDefault
	}
	if c.Format == "" {
		c.Format = FormatDefault
	}
	return c
}

// Validate reports every problem at once, each naming its field.
func (c Config) Validate() error {
	var errs []error
	switch c.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("level: want debug, info, warn or error, got %q", c.Level))
	}
	switch c.Format {
	case "json", "text":
	default:
		errs = append(errs, fmt.Errorf("format: want json or text, got %q", c.Format))
	}
	return errors.Join(errs...)
}
