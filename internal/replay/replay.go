// Package replay makes callbacks run again on an operator's word: one
// FAILED (or, forced, SUCCESS) callback at once, or many through a bulk
// replay job that a worker works off at a bounded rate (Runner). Every
// replay, job and cancel is written to the audit trail in the same
// transaction as its effect. The console (internal/admin, internal/console)
// and the worker use it; it knows nothing of HTTP.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/store"
	"callgate/internal/tracing"
)

// Errors the console turns into answers. A callback or job that does not
// exist is store.ErrNotFound.
var (
	ErrReasonRequired = errors.New("a reason is required")
	ErrNotReplayable  = errors.New("only a FAILED callback can be replayed (a SUCCESS one with force)")
	ErrTooLarge       = errors.New("the replay matches more callbacks than the cap; confirm_large is required")
	ErrEmptyFilter    = errors.New("the filter must name at least status, source, kind, since, until, error_contains or ids")
	ErrBadFilter      = errors.New("invalid filter")
	ErrJobFinished    = errors.New("the replay job has already finished")
)

// Announcer queues a log id for the workers without blocking.
type Announcer interface {
	Announce(an broker.Announcement) bool
}

// Replayer carries out operators' replays.
type Replayer struct {
	Store     *store.Store
	Announcer Announcer
	// Threshold is the compensation threshold: a replayed callback whose
	// announcement is lost is announced again after it.
	Threshold time.Duration
	// Cap is the largest bulk replay allowed without confirm_large.
	Cap int
	Log *slog.Logger
	// OnReplayed counts single replays (metrics); nil: not counted.
	OnReplayed func()
}

// Replay makes one FAILED callback (or, with force, a SUCCESS one) PENDING
// again with a fresh retry budget, announces it, and records who did it
// and why. Replaying a SUCCESS callback redoes no effect: the handlers are
// idempotent.
func (r *Replayer) Replay(ctx context.Context, actor string, id int64, reason string, force bool) (*callback.Summary, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, ErrReasonRequired
	}
	var cb *callback.Log
	err := r.Store.InTx(ctx, func(tx *store.Tx) error {
		var err error
		if cb, err = r.Store.ClaimCallbackTx(ctx, tx, id, false); err != nil {
			return err
		}
		replayable := cb.Status == callback.StatusFailed || force && cb.Status == callback.StatusSuccess
		if !replayable {
			return ErrNotReplayable
		}
		if err := r.Store.MakePendingTx(ctx, tx, []int64{id}, time.Now().UTC().Add(r.Threshold)); err != nil {
			return err
		}
		cb.Status = callback.StatusPending
		return r.Store.InsertAuditTx(ctx, tx, store.AuditEntry{Actor: actor, Action: "replay", Target: fmt.Sprint(id), Reason: &reason, Count: 1}, nil)
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, ErrNotReplayable) {
			return nil, err
		}
		return nil, fmt.Errorf("error replaying callback %d: %w", id, err)
	}
	announce(r.Announcer, cb)
	if r.OnReplayed != nil {
		r.OnReplayed()
	}
	r.Log.InfoContext(ctx, "replay: callback replayed", "log_id", id, "actor", actor, "reason", reason, "force", force)
	sum := callback.Summarize(cb)
	return &sum, nil
}

// announceAll announces callbacks, one announcement per kind.
func announceAll(a Announcer, cbs []callback.Log) {
	for _, an := range broker.Announcements(len(cbs), func(i int) string { return cbs[i].Kind }, func(i int) int64 { return cbs[i].ID },
		func(i int) string { return tracing.TraceParentFromID(cbs[i].TraceID) }) {
		a.Announce(an)
	}
}

func announce(a Announcer, cb *callback.Log) {
	a.Announce(broker.Announcement{LogIDs: []int64{cb.ID}, Kind: cb.Kind, TraceParent: tracing.TraceParentFromID(cb.TraceID)})
}

// DryRunResult answers a dry run.
type DryRunResult struct {
	Matched int64              `json:"matched"`
	Sample  []callback.Summary `json:"sample"`
	// OverCap says confirm_large will be needed.
	OverCap bool `json:"over_cap"`
	Cap     int  `json:"cap"`
}

// dryRunSample is how many of the newest matches a dry run shows.
const dryRunSample = 10

// DryRun counts what a bulk replay would touch and shows the newest few.
func (r *Replayer) DryRun(ctx context.Context, f BulkFilter) (*DryRunResult, error) {
	f, err := f.Normalized()
	if err != nil {
		return nil, err
	}
	n, err := r.Store.CountCallbacks(ctx, f.selection())
	if err != nil {
		return nil, err
	}
	rows, err := r.Store.ListCallbacks(ctx, f.selection(), 0, dryRunSample)
	if err != nil {
		return nil, err
	}
	res := &DryRunResult{Matched: n, Sample: make([]callback.Summary, len(rows)), OverCap: n > int64(r.Cap), Cap: r.Cap}
	for i := range rows {
		res.Sample[i] = callback.Summarize(&rows[i])
	}
	return res, nil
}

// CreateJob records a bulk replay for the worker to carry out at the
// configured rate. Over the cap it needs confirmLarge.
func (r *Replayer) CreateJob(ctx context.Context, actor, reason string, f BulkFilter, confirmLarge bool) (*store.ReplayJob, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, ErrReasonRequired
	}
	f, err := f.Normalized()
	if err != nil {
		return nil, err
	}
	var job store.ReplayJob
	err = r.Store.InTx(ctx, func(tx *store.Tx) error {
		n, maxID, err := r.Store.MatchesTx(ctx, tx, f.selection())
		if err != nil {
			return err
		}
		if n > int64(r.Cap) && !confirmLarge {
			return ErrTooLarge
		}
		filter, err := json.Marshal(f)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		job = store.ReplayJob{Actor: actor, Reason: reason, Filter: filter, Status: store.ReplayRunning, Matched: int(n),
			MaxID: maxID, CreatedAt: now, UpdatedAt: now}
		if n == 0 {
			job.Status = store.ReplayDone
			job.FinishedAt = &now
		}
		if err := r.Store.InsertReplayJobTx(ctx, tx, &job); err != nil {
			return err
		}
		return r.Store.InsertAuditTx(ctx, tx, store.AuditEntry{Actor: actor, Action: "bulk_replay", Target: fmt.Sprintf("job:%d", job.ID),
			Reason: &reason, Count: int(n)}, f)
	})
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("error creating replay job: %w", err)
	}
	r.Log.InfoContext(ctx, "replay: bulk replay created", "job_id", job.ID, "actor", actor, "matched", job.Matched, "reason", reason)
	withProgress(&job)
	return &job, nil
}

// withProgress fills a job's progress: replayed of matched, 100 when done.
func withProgress(j *store.ReplayJob) {
	switch {
	case j.Status == store.ReplayDone:
		j.Progress = 100
	case j.Matched > 0:
		j.Progress = float64(j.Replayed) * 100 / float64(j.Matched)
	}
}

// GetJob returns one replay job.
func (r *Replayer) GetJob(ctx context.Context, id int64) (*store.ReplayJob, error) {
	j, err := r.Store.GetReplayJob(ctx, id)
	if err != nil {
		return nil, err
	}
	withProgress(j)
	return j, nil
}

// ListJobs returns the newest replay jobs.
func (r *Replayer) ListJobs(ctx context.Context, limit int) ([]store.ReplayJob, error) {
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	jobs, err := r.Store.ReplayJobs(ctx, "", limit)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		withProgress(&jobs[i])
	}
	return jobs, nil
}

// CancelJob stops a running replay job; what it replayed stays replayed.
func (r *Replayer) CancelJob(ctx context.Context, actor string, id int64) (*store.ReplayJob, error) {
	err := r.Store.InTx(ctx, func(tx *store.Tx) error {
		j, err := r.Store.LockReplayJobTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if j.Status != store.ReplayRunning {
			return ErrJobFinished
		}
		if err := r.Store.CancelReplayJobTx(ctx, tx, id, time.Now().UTC()); err != nil {
			return err
		}
		return r.Store.InsertAuditTx(ctx, tx, store.AuditEntry{Actor: actor, Action: "cancel_replay", Target: fmt.Sprintf("job:%d", id),
			Count: j.Replayed}, nil)
	})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, ErrJobFinished) {
			return nil, err
		}
		return nil, fmt.Errorf("error cancelling replay job: %w", err)
	}
	return r.GetJob(ctx, id)
}
