package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"callgate/internal/broker"
	"callgate/internal/callback"
	"callgate/internal/tracing"
)

// ReplayRunner works off RUNNING replay jobs: each run replays at most
// Rate x Interval callbacks per job, in id order from where the job left
// off, so a bulk replay of a million callbacks reaches the workers as a
// steady trickle, and a crash resumes from last_id. It runs in the worker
// under the scheduler lease.
type ReplayRunner struct {
	DB        *gorm.DB
	Announcer Announcer
	Threshold time.Duration
	// Rate is callbacks per second per job.
	Rate     int
	Interval time.Duration
	Log      *slog.Logger
	// OnReplayed counts replayed callbacks (metrics).
	OnReplayed func(n int)
}

// RunOnce advances every running job by one step.
func (r *ReplayRunner) RunOnce(ctx context.Context) error {
	var jobs []Job
	if err := r.DB.WithContext(ctx).Where("status = ?", JobRunning).Order("id").Find(&jobs).Error; err != nil {
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

func (r *ReplayRunner) step(ctx context.Context, jobID int64, budget int) error {
	var picked []callback.Log
	err := r.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var j Job
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&j, jobID).Error; err != nil {
			return err
		}
		if j.Status != JobRunning {
			return nil // cancelled meanwhile
		}
		var f BulkFilter
		if err := json.Unmarshal(j.Filter, &f); err != nil {
			return fmt.Errorf("replay job %d has an unreadable filter: %w", j.ID, err)
		}
		q := f.scope(tx.Model(&callback.Log{})).Where("id > ? AND id <= ?", j.LastID, j.MaxID)
		// Plain FOR UPDATE, not SKIP LOCKED: only the lease holder runs
		// jobs, and a row skipped because someone held it for a moment
		// would be passed over for good (last_id moves on).
		if err := q.Select("id", "kind", "trace_id").Order("id").Limit(budget).
			Clauses(clause.Locking{Strength: "UPDATE"}).Find(&picked).Error; err != nil {
			return err
		}
		now := time.Now().UTC()
		updates := map[string]any{"updated_at": now}
		if len(picked) > 0 {
			ids := make([]int64, len(picked))
			for i, p := range picked {
				ids[i] = p.ID
			}
			if err := makePending(tx, ids, r.Threshold); err != nil {
				return err
			}
			updates["last_id"] = ids[len(ids)-1]
			updates["replayed"] = gorm.Expr("replayed + ?", len(ids))
		}
		if len(picked) < budget {
			updates["status"] = JobDone
			updates["finished_at"] = now
		}
		return tx.Model(&Job{}).Where("id = ?", j.ID).Updates(updates).Error
	})
	if err != nil {
		return fmt.Errorf("error advancing replay job %d: %w", jobID, err)
	}
	for _, p := range picked {
		r.Announcer.Announce(broker.Announcement{LogID: p.ID, Kind: p.Kind, TraceParent: tracing.TraceParentFromID(p.TraceID)})
	}
	if len(picked) > 0 {
		if r.OnReplayed != nil {
			r.OnReplayed(len(picked))
		}
		r.Log.Info("replay: batch replayed", "job_id", jobID, "count", len(picked))
	}
	return nil
}
