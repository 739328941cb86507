package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"callgate/internal/callback"
	"callgate/internal/store"
)

// Runner works off RUNNING replay jobs: each run replays at most Rate x
// Interval callbacks per job, in id order from where the job left off, so
// a bulk replay of a million callbacks reaches the workers as a steady
// trickle, and a crash resumes from last_id. It runs in the worker under
// the scheduler lease.
type Runner struct {
	Store     *store.Store
	Announcer Announcer
	Threshold time.Duration
	// Rate is callbacks per second per job.
	Rate     int
	Interval time.Duration
	Log      *slog.Logger
	// OnReplayed counts replayed callbacks (metrics).
	OnReplayed func(n int)
}

// runnerJobs bounds the jobs one run advances.
const runnerJobs = 100

// RunOnce advances every running job by one step.
func (r *Runner) RunOnce(ctx context.Context) error {
	jobs, err := r.Store.ReplayJobs(ctx, store.ReplayRunning, runnerJobs)
	if err != nil {
		return fmt.Errorf("error loading replay jobs: %w", err)
	}
	budget := max(1, int(float64(r.Rate)*r.Interval.Seconds()))
	for _, j := range jobs {
		if err := r.step(ctx, j.ID, budget); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) step(ctx context.Context, jobID int64, budget int) error {
	var picked []callback.Log
	err := r.Store.InTx(ctx, func(tx *store.Tx) error {
		j, err := r.Store.LockReplayJobTx(ctx, tx, jobID)
		if err != nil {
			return err
		}
		if j.Status != store.ReplayRunning {
			return nil // cancelled meanwhile
		}
		var f BulkFilter
		if err := json.Unmarshal(j.Filter, &f); err != nil {
			return fmt.Errorf("replay job %d has an unreadable filter: %w", j.ID, err)
		}
		// Plain FOR UPDATE, not SKIP LOCKED: only the lease holder runs
		// jobs, and a row skipped because someone held it for a moment
		// would be passed over for good (last_id moves on).
		if picked, err = r.Store.LockMatchingTx(ctx, tx, f.selection(), j.LastID, j.MaxID, budget); err != nil {
			return err
		}
		var lastID int64
		if len(picked) > 0 {
			ids := make([]int64, len(picked))
			for i, p := range picked {
				ids[i] = p.ID
			}
			if err := r.Store.MakePendingTx(ctx, tx, ids, time.Now().UTC().Add(r.Threshold)); err != nil {
				return err
			}
			lastID = ids[len(ids)-1]
		}
		return r.Store.AdvanceReplayJobTx(ctx, tx, j.ID, len(picked), lastID, len(picked) < budget, time.Now().UTC())
	})
	if err != nil {
		return fmt.Errorf("error advancing replay job %d: %w", jobID, err)
	}
	announceAll(r.Announcer, picked)
	if len(picked) > 0 {
		if r.OnReplayed != nil {
			r.OnReplayed(len(picked))
		}
		r.Log.Info("replay: batch replayed", "job_id", jobID, "count", len(picked))
	}
	return nil
}
