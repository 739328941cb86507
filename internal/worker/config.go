package worker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"callgate/internal/broker"
	"callgate/internal/replay"
	"callgate/internal/scheduler"
	"callgate/internal/source"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Config configures the worker process's consumers: the file's worker
// section.
type Config struct {
	// ID names this worker in callback_attempt rows. Default: hostname-pid.
	ID string `yaml:"id"`
	// HandlerTimeout bounds one callback's handler; a batch's transaction
	// gets it once per callback it holds. When it passes, the transaction
	// is ended on the server too before anything else claims its rows.
	// Default 30s.
	HandlerTimeout time.Duration `yaml:"handler_timeout"`
	// ShutdownTimeout bounds how long in-flight callbacks may finish after
	// SIGTERM. Default 20s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// MetricsAddr serves GET /metrics and /healthz. Default
	// "127.0.0.1:9090": this machine only, since the series name sources,
	// queues and failure reasons and nothing asks who reads them; an
	// address given (":9090" for every interface) is served as it is.
	// "off" disables it. Env CALLGATE_WORKER_METRICS_ADDR (MetricsAddrEnv).
	MetricsAddr string `yaml:"metrics_addr"`
	// PprofAddr serves net/http/pprof on a separate listener (for
	// profiling, e.g. "127.0.0.1:6061"). Default "": off. Never expose it.
	// Env CALLGATE_WORKER_PPROF_ADDR (PprofAddrEnv).
	PprofAddr string `yaml:"pprof_addr"`
	// BatchSize is how many callbacks one transaction processes at most.
	// 1 is exactly one transaction per callback. Default BatchSizeDefault.
	BatchSize int `yaml:"batch_size"`
	// Kinds holds per-kind consumer settings, keyed by kind.
	Kinds map[string]KindConfig `yaml:"kinds"`
	// OrderGrace is how long after it was received a payment event whose
	// order does not exist (yet: it raced the shop's own commit, or a
	// replica's lag) is retried with its source's backoff before it is
	// FAILED "order not found". Default 10m.
	OrderGrace time.Duration `yaml:"order_grace"`
}

// KindConfig is one kind's consumer settings.
type KindConfig struct {
	// Concurrency is how many batches of this kind run at once (with
	// batch_size 1: callbacks). Default 2: with the gateway, MariaDB and
	// RabbitMQ on the same two cores, 4 drained 4 % faster but took the
	// intake's p99 from ~40 to ~70 ms at 0.2x the baseline (BENCHMARKS.md);
	// raise it where the worker has cores of its own and waits on a remote
	// database.
	Concurrency int `yaml:"concurrency"`
	// Prefetch bounds unacked deliveries (messages, each announcing one or
	// more callbacks). Default: enough for every slot to gather a full
	// batch of single announcements, Concurrency x BatchSize.
	Prefetch int `yaml:"prefetch"`
}

// Config defaults.
const (
	HandlerTimeoutDefault  = 30 * time.Second
	ShutdownTimeoutDefault = 20 * time.Second
	MetricsAddrDefault     = "127.0.0.1:9090"
	ConcurrencyDefault     = 2
	BatchSizeDefault       = 64
	BatchSizeLimit         = 1000
	OrderGraceDefault      = 10 * time.Minute
)

// MetricsAddrEnv is the environment variable that overrides
// worker.metrics_addr (internal/config's overrides read it; named here for
// the error of an address in use).
const MetricsAddrEnv = "CALLGATE_WORKER_METRICS_ADDR"

// PprofAddrEnv is the environment variable that overrides
// worker.pprof_addr (read by internal/config, like MetricsAddrEnv).
const PprofAddrEnv = "CALLGATE_WORKER_PPROF_ADDR"

// LockWaitFor is the worker's innodb_lock_wait_timeout and
// lock_wait_timeout (row and metadata locks) for a handler timeout: half
// of it, in whole seconds, between 1 and the server's default 50, so a
// lock wait ends on the server (contention, run again without an attempt)
// before the callback's deadline (a failed attempt). Under 2 s the
// server's least, 1 s, is not half.
func LockWaitFor(handlerTimeout time.Duration) time.Duration {
	return min(max(handlerTimeout/2, time.Second), 50*time.Second).Truncate(time.Second)
}

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.HandlerTimeout == 0 {
		c.HandlerTimeout = HandlerTimeoutDefault
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = ShutdownTimeoutDefault
	}
	if c.MetricsAddr == "" {
		c.MetricsAddr = MetricsAddrDefault
	}
	if c.BatchSize == 0 {
		c.BatchSize = BatchSizeDefault
	}
	if c.OrderGrace == 0 {
		c.OrderGrace = OrderGraceDefault
	}
	kinds := make(map[string]KindConfig, len(c.Kinds))
	for name, k := range c.Kinds {
		kinds[name] = k.WithDefaults(c.BatchSize)
	}
	c.Kinds = kinds
	return c
}

// WithDefaults returns a copy with every unset field at its default, for
// batches of batchSize.
func (k KindConfig) WithDefaults(batchSize int) KindConfig {
	if k.Concurrency == 0 {
		k.Concurrency = ConcurrencyDefault
	}
	if k.Prefetch == 0 {
		k.Prefetch = k.Concurrency * max(1, batchSize)
	}
	return k
}

// Kind returns the consumer settings of kind, defaults filled.
func (c Config) Kind(kind string) KindConfig {
	return c.Kinds[kind].WithDefaults(c.WithDefaults().BatchSize)
}

// Validate reports every problem at once, each naming its field. kinds are
// the callback kinds this build knows.
func (c Config) Validate(kinds []string) error {
	var errs []error
	if c.HandlerTimeout < 0 || c.ShutdownTimeout < 0 || c.OrderGrace < 0 {
		errs = append(errs, errors.New("handler_timeout, shutdown_timeout, order_grace: must not be negative"))
	}
	if c.BatchSize < 1 || c.BatchSize > BatchSizeLimit {
		errs = append(errs, fmt.Errorf("batch_size: want 1 to %d", BatchSizeLimit))
	}
	for kind, k := range c.Kinds {
		field := "kinds." + kind
		if !slices.Contains(kinds, kind) {
			errs = append(errs, fmt.Errorf("%s: unknown kind %q (want one of %s)", field, kind, strings.Join(kinds, ", ")))
		}
		if k.Concurrency < 1 {
			errs = append(errs, fmt.Errorf("%s.concurrency: must be at least 1", field))
		}
		if k.Prefetch < k.Concurrency {
			errs = append(errs, fmt.Errorf("%s.prefetch: must be at least the concurrency (%d)", field, k.Concurrency))
		}
	}
	return errors.Join(errs...)
}

// Settings is everything the worker process is configured with: its own
// section and the parts of the others it uses.
type Settings struct {
	Worker    Config
	Store     store.Config
	Broker    broker.Config
	Scheduler scheduler.Config
	Replay    replay.Config
	Tracing   tracing.Config
	Sources   []source.Config
}
