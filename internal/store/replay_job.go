package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Statuses of replay_job.status.
const (
	ReplayRunning   = "RUNNING"
	ReplayDone      = "DONE"
	ReplayCancelled = "CANCELLED"
)

// ReplayJob is one replay_job row: a bulk replay, worked through in id
// order after LastID up to MaxID.
type ReplayJob struct {
	ID         int64           `json:"id" gorm:"column:id;primaryKey"`
	Actor      string          `json:"actor" gorm:"column:actor"`
	Reason     string          `json:"reason" gorm:"column:reason"`
	Filter     json.RawMessage `json:"filter" gorm:"column:filter"`
	Status     string          `json:"status" gorm:"column:status"`
	Matched    int             `json:"matched" gorm:"column:matched"`
	Replayed   int             `json:"replayed" gorm:"column:replayed"`
	MaxID      int64           `json:"-" gorm:"column:max_id"`
	LastID     int64           `json:"-" gorm:"column:last_id"`
	CreatedAt  time.Time       `json:"created_at" gorm:"column:created_at"`
	UpdatedAt  time.Time       `json:"updated_at" gorm:"column:updated_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty" gorm:"column:finished_at"`
	// Progress is Replayed/Matched in percent (100 when done); not stored.
	Progress float64 `json:"progress" gorm:"-"`
}

// TableName tells gorm the table.
func (ReplayJob) TableName() string { return "replay_job" }

// InsertReplayJobTx stores job (its ID is set), in tx.
func (s *Store) InsertReplayJobTx(ctx context.Context, tx *Tx, job *ReplayJob) error {
	if err := s.q(ctx, tx).Create(job).Error; err != nil {
		return fmt.Errorf("error creating replay job: %w", translate(err))
	}
	return nil
}

// GetReplayJob loads one job (ErrNotFound when there is none).
func (s *Store) GetReplayJob(ctx context.Context, id int64) (*ReplayJob, error) {
	var j ReplayJob
	if err := s.q(ctx, nil).Take(&j, id).Error; err != nil {
		return nil, fmt.Errorf("error loading replay job %d: %w", id, translate(err))
	}
	return &j, nil
}

// LockReplayJobTx loads one job and locks it until tx ends.
func (s *Store) LockReplayJobTx(ctx context.Context, tx *Tx, id int64) (*ReplayJob, error) {
	var j ReplayJob
	if err := s.q(ctx, tx).Clauses(clause.Locking{Strength: "UPDATE"}).Take(&j, id).Error; err != nil {
		return nil, fmt.Errorf("error locking replay job %d: %w", id, translate(err))
	}
	return &j, nil
}

// ReplayJobs returns the newest limit jobs, newest first; with status
// set, only those in it, oldest first.
func (s *Store) ReplayJobs(ctx context.Context, status string, limit int) ([]ReplayJob, error) {
	var out []ReplayJob
	q := s.q(ctx, nil)
	if status != "" {
		q = q.Where("status = ?", status).Order("id")
	} else {
		q = q.Order("id DESC")
	}
	if err := q.Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("error listing replay jobs: %w", translate(err))
	}
	return out, nil
}

// AdvanceReplayJobTx records a step of job id: replayed more callbacks,
// the last at lastID (0: none this step), and done when it finished.
func (s *Store) AdvanceReplayJobTx(ctx context.Context, tx *Tx, id int64, replayed int, lastID int64, done bool, now time.Time) error {
	updates := map[string]any{"updated_at": now}
	if replayed > 0 {
		updates["last_id"] = lastID
		updates["replayed"] = gorm.Expr("replayed + ?", replayed)
	}
	if done {
		updates["status"] = ReplayDone
		updates["finished_at"] = now
	}
	if err := s.q(ctx, tx).Model(&ReplayJob{}).Where("id = ?", id).Updates(updates).Error; err != nil {
		return fmt.Errorf("error advancing replay job %d: %w", id, translate(err))
	}
	return nil
}

// CancelReplayJobTx marks job id CANCELLED at now, in tx.
func (s *Store) CancelReplayJobTx(ctx context.Context, tx *Tx, id int64, now time.Time) error {
	err := s.q(ctx, tx).Model(&ReplayJob{}).Where("id = ?", id).
		Updates(map[string]any{"status": ReplayCancelled, "finished_at": now, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("error cancelling replay job %d: %w", id, translate(err))
	}
	return nil
}
