package scheduler

import (
	"errors"
	"fmt"
	"time"

	"callgate/internal/outbox"
	"callgate/internal/reconcile"
)

// Config configures the worker's background jobs: the file's scheduler
// section.
type Config struct {
	// Lease is how long a worker holds the scheduler leadership without
	// renewing it; when the holder dies another takes over within it.
	// Default 15s.
	Lease        time.Duration      `yaml:"lease"`
	Compensation CompensationConfig `yaml:"compensation"`
	OutboxRelay  outbox.RelayConfig `yaml:"outbox_relay"`
	Stuck        StuckConfig        `yaml:"stuck"`
	Retention    RetentionConfig    `yaml:"retention"`
	Partitions   PartitionsConfig   `yaml:"partitions"`
	Gauges       GaugesConfig       `yaml:"gauges"`
	// Reconcile asks the platforms about orders nothing was heard of
	// (internal/reconcile).
	Reconcile reconcile.Config `yaml:"reconcile"`
}

// CompensationConfig configures the re-announcement of PENDING callbacks
// that are due: retries whose backoff has passed, and callbacks whose
// announcement was lost.
type CompensationConfig struct {
	// Interval between scans. Default 1s.
	Interval time.Duration `yaml:"interval"`
	// Threshold: a PENDING callback is announced again when it has not
	// been processed this long after it was received or last announced.
	// The gateway sets next_attempt_at = received_at + Threshold.
	// Default 1m.
	Threshold time.Duration `yaml:"threshold"`
	// BatchSize rows are claimed per transaction, oldest due first.
	// Default 500.
	BatchSize int `yaml:"batch_size"`
	// MaxQueued skips a kind whose queue already holds more ready messages
	// than this (a backlog: its announcements are still queued).
	// Default 1000.
	MaxQueued int `yaml:"max_queued"`
}

// StuckConfig configures the repair of impossible due times.
type StuckConfig struct {
	// Interval between runs. Default 1m.
	Interval time.Duration `yaml:"interval"`
	// BatchSize rows per statement. Default 500.
	BatchSize int `yaml:"batch_size"`
}

// RetentionConfig configures the dropping of old days (SUCCESS
// callbacks, their attempts, SENT outbox rows), the deletion of old
// callback_key rows, and of old dead letters and events.
type RetentionConfig struct {
	// Interval between runs. Default 10m.
	Interval time.Duration `yaml:"interval"`
	// MaxAge: a day of callback_log, callback_attempt and outbox is
	// dropped once it ended this long ago (its rows go between MaxAge and
	// MaxAge plus a day after they were received, written or moved), and
	// callback_key rows not locked for this long go; 0 keeps them (so
	// WithDefaults leaves it alone: the file's default is
	// RetentionMaxAgeDefault). Callbacks that are not SUCCESS and outbox
	// rows not SENT are moved to today's day first: FAILED callbacks are
	// never dropped, dead letters go at DeadLetterMaxAge.
	MaxAge time.Duration `yaml:"max_age"`
	// DeadLetterMaxAge: dead letters (FAILED callbacks whose event is a
	// callback.Unreadable: signed and ours, but never readable) FAILED
	// longer ago than this go, with their attempts; 0 keeps them (the
	// file's default is RetentionDeadLetterMaxAgeDefault). At least
	// MaxAge when both are set.
	DeadLetterMaxAge time.Duration `yaml:"dead_letter_max_age"`
	// DedupeMaxAge: a callback's (source, event_id) is remembered in
	// callback_event this long after it was received (a platform's resend
	// is a duplicate meanwhile, even once MaxAge deleted the callback),
	// and never less than the callback itself is kept; 0 keeps them (the
	// file's default is RetentionDedupeMaxAgeDefault). At least MaxAge and
	// at least RetentionDedupeMinAge when set.
	DedupeMaxAge time.Duration `yaml:"dedupe_max_age"`
	// BatchSize rows per short transaction. Default 500.
	BatchSize int `yaml:"batch_size"`
}

// PartitionsConfig configures the creation of day partitions ahead of
// time (callback_log, callback_attempt, outbox: migration 025).
type PartitionsConfig struct {
	// Interval between runs, the first one an interval after a worker
	// starts. Default 1h.
	Interval time.Duration `yaml:"interval"`
	// DaysAhead: a partition exists for every UTC day from today through
	// today + DaysAhead. Default 7; at least 2.
	DaysAhead int `yaml:"days_ahead"`
}

// GaugesConfig configures the backlog gauges' refresh.
type GaugesConfig struct {
	// Interval between refreshes. Default 15s.
	Interval time.Duration `yaml:"interval"`
}

// Config defaults.
const (
	LeaseDefault                 = 15 * time.Second
	CompensationIntervalDefault  = time.Second
	CompensationThresholdDefault = time.Minute
	CompensationBatchDefault     = 500
	CompensationMaxQueuedDefault = 1000
	StuckIntervalDefault         = time.Minute
	StuckBatchDefault            = 500
	RetentionIntervalDefault     = 10 * time.Minute
	RetentionMaxAgeDefault       = 30 * 24 * time.Hour
	RetentionBatchDefault        = 500
	GaugesIntervalDefault        = 15 * time.Second
	PartitionsIntervalDefault    = time.Hour
	PartitionsDaysAheadDefault   = 7
	// PartitionsDaysAheadMin leaves a day's margin past tomorrow: a
	// worker fleet down over a midnight still finds tomorrow's partition.
	PartitionsDaysAheadMin = 2
)

// RetentionMaxAgeMin is the shortest max_age taken (0 aside): a day.
const RetentionMaxAgeMin = 24 * time.Hour

// RetentionDeadLetterMaxAgeDefault, 90 days, is three times the longest
// platform retry window (Adyen's 30 days), and longer than the default
// max_age: the operator has that long to fix a configuration and replay
// what its preset could not read.
const RetentionDeadLetterMaxAgeDefault = 90 * 24 * time.Hour

// RetentionDeadLetterMinAge is the shortest dead_letter_max_age taken: the
// longest platform retry window (Adyen resends for 30 days), so that a dead
// letter is never deleted while its platform may still resend it.
const RetentionDeadLetterMinAge = 30 * 24 * time.Hour

// RetentionDedupeMaxAgeDefault, 90 days, is three times the longest
// platform retry window (Adyen's 30 days) and the default max_age.
const RetentionDedupeMaxAgeDefault = 90 * 24 * time.Hour

// RetentionDedupeMinAge is the shortest dedupe_max_age taken: the longest
// platform retry window (Adyen resends for 30 days).
const RetentionDedupeMinAge = 30 * 24 * time.Hour

// WithDefaults returns a copy with every unset field at its default.
func (c Config) WithDefaults() Config {
	if c.Lease == 0 {
		c.Lease = LeaseDefault
	}
	c.Compensation = c.Compensation.WithDefaults()
	c.OutboxRelay = c.OutboxRelay.WithDefaults()
	c.Reconcile = c.Reconcile.WithDefaults()
	if c.Stuck.Interval == 0 {
		c.Stuck.Interval = StuckIntervalDefault
	}
	if c.Stuck.BatchSize == 0 {
		c.Stuck.BatchSize = StuckBatchDefault
	}
	if c.Retention.Interval == 0 {
		c.Retention.Interval = RetentionIntervalDefault
	}
	if c.Retention.BatchSize == 0 {
		c.Retention.BatchSize = RetentionBatchDefault
	}
	if c.Gauges.Interval == 0 {
		c.Gauges.Interval = GaugesIntervalDefault
	}
	if c.Partitions.Interval == 0 {
		c.Partitions.Interval = PartitionsIntervalDefault
	}
	if c.Partitions.DaysAhead == 0 {
		c.Partitions.DaysAhead = PartitionsDaysAheadDefault
	}
	return c
}

// WithDefaults returns a copy with every unset field at its default.
func (c CompensationConfig) WithDefaults() CompensationConfig {
	if c.Interval == 0 {
		c.Interval = CompensationIntervalDefault
	}
	if c.Threshold == 0 {
		c.Threshold = CompensationThresholdDefault
	}
	if c.BatchSize == 0 {
		c.BatchSize = CompensationBatchDefault
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = CompensationMaxQueuedDefault
	}
	return c
}

// Validate reports every problem at once, each naming its field.
func (c Config) Validate() error {
	var errs []error
	if c.Lease < time.Second {
		errs = append(errs, errors.New("lease: must be at least 1s"))
	}
	if c.Compensation.Interval < 0 || c.Compensation.Threshold < 0 || c.Compensation.BatchSize < 1 {
		errs = append(errs, errors.New("compensation: interval and threshold must be positive, batch_size at least 1"))
	}
	if err := c.OutboxRelay.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("outbox_relay: %w", err))
	}
	if err := c.Reconcile.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Retention.MaxAge < 0 || c.Retention.BatchSize < 1 || c.Stuck.BatchSize < 1 {
		errs = append(errs, errors.New("retention: max_age must not be negative, batch sizes at least 1"))
	}
	// Retention drops whole UTC days. A batch that claimed its callbacks
	// just before midnight writes its outbox rows on the claim's day (so
	// that marking them SENT names their partition) until it commits, up
	// to its handler timeouts later: that day must not be dropped under
	// it, which an age of a day or more ensures.
	if m := c.Retention.MaxAge; m > 0 && m < RetentionMaxAgeMin {
		errs = append(errs, fmt.Errorf("retention.max_age: %s must be at least %s (retention drops whole UTC days), or 0 to keep everything", m, RetentionMaxAgeMin))
	}
	// A dead letter goes no sooner than a SUCCESS callback: its (source,
	// event id) must be remembered as long (a platform's resend is then a
	// duplicate, not a new row), and fixing the configuration to replay
	// it takes at least as long as anything else.
	if r := c.Retention; r.DeadLetterMaxAge < 0 || (r.DeadLetterMaxAge > 0 && r.DeadLetterMaxAge < r.MaxAge) {
		errs = append(errs, fmt.Errorf("retention.dead_letter_max_age: %s must be at least max_age (%s), or 0 to keep dead letters", r.DeadLetterMaxAge, r.MaxAge))
	} else if r.DeadLetterMaxAge > 0 && r.DeadLetterMaxAge < RetentionDeadLetterMinAge {
		errs = append(errs, fmt.Errorf("retention.dead_letter_max_age: %s must be at least %s, the longest platform retry window (Adyen's 30 days), or 0 to keep dead letters", r.DeadLetterMaxAge, RetentionDeadLetterMinAge))
	}
	// A resend must be a duplicate at least as long as the payload is
	// kept and as long as any platform resends.
	if r := c.Retention; r.DedupeMaxAge < 0 || (r.DedupeMaxAge > 0 && r.DedupeMaxAge < r.MaxAge) {
		errs = append(errs, fmt.Errorf("retention.dedupe_max_age: %s must be at least max_age (%s), or 0 to keep events", r.DedupeMaxAge, r.MaxAge))
	} else if r.DedupeMaxAge > 0 && r.DedupeMaxAge < RetentionDedupeMinAge {
		errs = append(errs, fmt.Errorf("retention.dedupe_max_age: %s must be at least %s, the longest platform retry window (Adyen's 30 days), or 0 to keep events", r.DedupeMaxAge, RetentionDedupeMinAge))
	}
	if c.Partitions.Interval < 0 {
		errs = append(errs, errors.New("partitions.interval: must not be negative"))
	}
	if c.Partitions.DaysAhead != 0 && c.Partitions.DaysAhead < PartitionsDaysAheadMin {
		errs = append(errs, fmt.Errorf("partitions.days_ahead: %d must be at least %d", c.Partitions.DaysAhead, PartitionsDaysAheadMin))
	}
	return errors.Join(errs...)
}
