package store

import (
	"errors"
	"fmt"
	"time"
)

// Config configures the MySQL pool and the intake's inserts: the file's
// mysql section.
type Config struct {
	// DSN in go-sql-driver form; parseTime, UTC, interpolateParams and the
	// server's max_allowed_packet are forced by the store. Env
	// CALLGATE_MYSQL_DSN. Default DSNDefault.
	DSN string `yaml:"dsn"`
	// MaxOpenConns caps the pool. Default 64.
	MaxOpenConns int `yaml:"max_open_conns"`
	// MaxIdleConns keeps warm connections. Default MaxOpenConns.
	MaxIdleConns int `yaml:"max_idle_conns"`
	// ConnMaxLifetime recycles connections. Default 30m.
	ConnMaxLifetime time.Duration `yaml:"conn_max_lifetime"`
	// DialTimeout bounds connecting, so a dead server answers fast.
	// Default 1s.
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// IntakeTimeout bounds the intake's INSERT; past it the platform gets a
	// 503 and retries. Default 2s.
	IntakeTimeout time.Duration `yaml:"intake_timeout"`
	// GroupCommit makes concurrent intake requests share one multi-row
	// INSERT and commit (Batcher); false is one INSERT per request. The
	// file's default is GroupCommitDefault (true); the zero value is false.
	GroupCommit bool `yaml:"group_commit"`
	// GroupCommitWriters is how many batch writers run (a key always
	// goes to the same one). Default 1: one writer gathers while its
	// statement runs, so its batches are larger, and on the benchmark's
	// machine it took 1.12-1.13x the baseline against 1.01-1.03x for two
	// (BENCHMARKS.md).
	GroupCommitWriters int `yaml:"group_commit_writers"`
	// GroupCommitMaxBatch bounds a batch's rows. Default 256.
	GroupCommitMaxBatch int `yaml:"group_commit_max_batch"`
	// LockWaitTimeout is each session's innodb_lock_wait_timeout and
	// lock_wait_timeout (row and metadata locks; whole seconds, at least 1). 0 leaves the server's (50 s by default) for
	// the gateway; the worker sets half its handler_timeout, so that the
	// server gives up a lock wait (contention: run again, no attempt)
	// before the worker's deadline does (a failed attempt).
	LockWaitTimeout time.Duration `yaml:"lock_wait_timeout"`
	// Durability is what a 200 means: "primary" (default), the callback
	// is committed on the primary; "replica", also acknowledged by a
	// replica through lossless semi-synchronous replication, which the
	// gateway checks at start (docs/deployment.md). Env
	// CALLGATE_MYSQL_DURABILITY.
	Durability string `yaml:"durability"`
}

// Durability settings.
const (
	DurabilityPrimary = "primary"
	DurabilityReplica = "replica"
)

// Config defaults.
const (
	DSNDefault                 = "root:@tcp(127.0.0.1:3306)/callgate"
	MaxOpenConnsDefault        = 64
	ConnMaxLifetimeDefault     = 30 * time.Minute
	DialTimeoutDefault         = time.Second
	IntakeTimeoutDefault       = 2 * time.Second
	GroupCommitDefault         = true
	GroupCommitWritersDefault  = 1
	GroupCommitMaxBatchDefault = 256
	DurabilityDefault          = DurabilityPrimary
)

// WithDefaults returns a copy with every unset field at its default (but
// GroupCommit, whose zero value is a choice).
func (c Config) WithDefaults() Config {
	if c.DSN == "" {
		c.DSN = DSNDefault
	}
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = MaxOpenConnsDefault
	}
	if c.MaxIdleConns == 0 {
		c.MaxIdleConns = c.MaxOpenConns
	}
	if c.ConnMaxLifetime == 0 {
		c.ConnMaxLifetime = ConnMaxLifetimeDefault
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DialTimeoutDefault
	}
	if c.IntakeTimeout == 0 {
		c.IntakeTimeout = IntakeTimeoutDefault
	}
	if c.GroupCommitWriters == 0 {
		c.GroupCommitWriters = GroupCommitWritersDefault
	}
	if c.GroupCommitMaxBatch == 0 {
		c.GroupCommitMaxBatch = GroupCommitMaxBatchDefault
	}
	if c.Durability == "" {
		c.Durability = DurabilityDefault
	}
	return c
}

// Validate reports every problem at once, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if _, err := NormalizeDSN(c.DSN, c.DialTimeout); err != nil {
		errs = append(errs, fmt.Errorf("dsn: %w", err))
	}
	if c.MaxOpenConns < 1 {
		errs = append(errs, errors.New("max_open_conns: must be at least 1"))
	}
	if c.MaxIdleConns < 0 {
		errs = append(errs, errors.New("max_idle_conns: must not be negative"))
	}
	if c.DialTimeout < 0 || c.IntakeTimeout < 0 || c.ConnMaxLifetime < 0 || c.LockWaitTimeout < 0 {
		errs = append(errs, errors.New("dial_timeout, intake_timeout, conn_max_lifetime, lock_wait_timeout: must not be negative"))
	}
	if c.GroupCommitWriters < 1 || c.GroupCommitMaxBatch < 1 {
		errs = append(errs, errors.New("group_commit_writers, group_commit_max_batch: must be at least 1"))
	}
	if c.Durability != DurabilityPrimary && c.Durability != DurabilityReplica {
		errs = append(errs, fmt.Errorf("durability: want primary or replica, got %q", c.Durability))
	}
	return errors.Join(errs...)
}
