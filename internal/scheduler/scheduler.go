// Package scheduler runs the worker's periodic jobs on gocron: compensation
// (announce due callbacks: retries and lost announcements), stuck (repair
// impossible due times), retention (drop the old days of callbacks,
// attempts and outbox rows, keeping what is unresolved), partitions
// (create the day partitions ahead) and the backlog gauges. With several
// workers, the Elector (a MySQL lease) lets one instance run the jobs per
// tick; each job is still harmless when run twice at once (rows are
// claimed with SKIP LOCKED or deleted idempotently, partition changes
// serialized by a lock of their own).
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-co-op/gocron/v2"

	"callgate/internal/metrics"
)

// ErrNotYet, wrapped in a job's error, says that the job skipped what
// needs something not yet there at start (the broker's first connection):
// not a failure, so it is not logged as one. Once the broker has been
// connected, its absence is a failure again.
var ErrNotYet = errors.New("not connected yet since start")

// Job is one periodic job.
type Job struct {
	Name     string
	Interval time.Duration
	Run      func(ctx context.Context) error
	// Deferred: the first run comes one Interval after Start, not at
	// once. For a job whose work cannot be due at a worker's start and
	// that must not add to it (the partitions job's DDL).
	Deferred bool
}

// Scheduler wraps gocron.
type Scheduler struct {
	s   gocron.Scheduler
	log *slog.Logger
}

// New builds a scheduler with jobs; Start runs them. Each run counts in
// callgate_scheduler_job_runs_total{job}.
func New(log *slog.Logger, m *metrics.Metrics, jobs []Job, opts ...gocron.SchedulerOption) (*Scheduler, error) {
	opts = append([]gocron.SchedulerOption{gocron.WithStopTimeout(10 * time.Second)}, opts...)
	s, err := gocron.NewScheduler(opts...)
	if err != nil {
		return nil, fmt.Errorf("error creating scheduler: %w", err)
	}
	for _, j := range jobs {
		run := j.Run
		name := j.Name
		jobOpts := []gocron.JobOption{gocron.WithName(name), gocron.WithSingletonMode(gocron.LimitModeReschedule)}
		if !j.Deferred {
			jobOpts = append(jobOpts, gocron.WithStartAt(gocron.WithStartImmediately()))
		}
		_, err := s.NewJob(
			gocron.DurationJob(j.Interval),
			gocron.NewTask(func(ctx context.Context) {
				m.JobRuns.WithLabelValues(name).Inc()
				err := run(ctx)
				switch {
				case err == nil || ctx.Err() != nil:
				case errors.Is(err, ErrNotYet):
					log.Debug("scheduler: job skipped a part, not ready yet", "job", name, "reason", err)
				default:
					log.Warn("scheduler: job failed", "job", name, "error", err)
				}
			}),
			jobOpts...,
		)
		if err != nil {
			return nil, fmt.Errorf("error adding job %s: %w", name, err)
		}
	}
	return &Scheduler{s: s, log: log}, nil
}

// Start runs the jobs in the background.
func (s *Scheduler) Start() { s.s.Start() }

// Stop stops the jobs, waiting for running ones (bounded).
func (s *Scheduler) Stop() error { return s.s.Shutdown() }
