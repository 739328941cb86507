package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"callgate/internal/callback"
	"callgate/internal/store"
)

// BulkFilter selects the callbacks of a bulk replay. At least one field
// must be set; Status defaults to FAILED, and only FAILED (or, with
// Status SUCCESS, SUCCESS) callbacks can be replayed.
type BulkFilter struct {
	Status        string     `json:"status,omitempty"`
	Source        string     `json:"source,omitempty"`
	Kind          string     `json:"kind,omitempty"`
	Since         *time.Time `json:"since,omitempty"`
	Until         *time.Time `json:"until,omitempty"`
	ErrorContains string     `json:"error_contains,omitempty"`
	IDs           []int64    `json:"ids,omitempty"`
}

func (f BulkFilter) normalized() (BulkFilter, error) {
	if f.Source == "" && f.Kind == "" && f.Since == nil && f.Until == nil && f.ErrorContains == "" && len(f.IDs) == 0 && f.Status == "" {
		return f, ErrEmptyFilter
	}
	if f.Status == "" {
		f.Status = string(callback.StatusFailed)
	}
	if f.Status != string(callback.StatusFailed) && f.Status != string(callback.StatusSuccess) {
		return f, fmt.Errorf("%w: status must be FAILED or SUCCESS", ErrBadFilter)
	}
	if len(f.IDs) > 100000 {
		return f, fmt.Errorf("%w: at most 100000 ids", ErrBadFilter)
	}
	return f, nil
}

// scope applies the filter to a callback_log query.
func (f BulkFilter) scope(q *gorm.DB) *gorm.DB {
	q = q.Where("status = ?", f.Status)
	if f.Source != "" {
		q = q.Where("source = ?", f.Source)
	}
	if f.Kind != "" {
		q = q.Where("kind = ?", f.Kind)
	}
	if f.Since != nil {
		q = q.Where("received_at >= ?", f.Since.UTC())
	}
	if f.Until != nil {
		q = q.Where("received_at < ?", f.Until.UTC())
	}
	if f.ErrorContains != "" {
		esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(f.ErrorContains)
		q = q.Where("last_error LIKE ?", "%"+esc+"%")
	}
	if len(f.IDs) > 0 {
		q = q.Where("id IN ?", f.IDs)
	}
	return q
}

// DryRunResult answers a dry run.
type DryRunResult struct {
	Matched int64     `json:"matched"`
	Sample  []Summary `json:"sample"`
	// OverCap says confirm_large will be needed.
	OverCap bool `json:"over_cap"`
	Cap     int  `json:"cap"`
}

// DryRun counts what a bulk replay would touch and shows the newest few.
func (s *Service) DryRun(ctx context.Context, f BulkFilter) (*DryRunResult, error) {
	f, err := f.normalized()
	if err != nil {
		return nil, err
	}
	db := s.DB.WithContext(ctx)
	var n int64
	if err := f.scope(db.Model(&callback.Log{})).Count(&n).Error; err != nil {
		return nil, fmt.Errorf("error counting matches: %w", store.Translate(err))
	}
	var rows []callback.Log
	if err := f.scope(db.Model(&callback.Log{})).Omit("payload", "headers").Order("id DESC").Limit(10).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("error sampling matches: %w", store.Translate(err))
	}
	res := &DryRunResult{Matched: n, Sample: make([]Summary, len(rows)), OverCap: n > int64(s.Cap), Cap: s.Cap}
	for i := range rows {
		res.Sample[i] = summarize(&rows[i])
	}
	return res, nil
}

// Job statuses.
const (
	JobRunning   = "RUNNING"
	JobDone      = "DONE"
	JobCancelled = "CANCELLED"
)

// Job is one replay_job row.
type Job struct {
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
	// Progress is Replayed/Matched in percent (100 when done).
	Progress float64 `json:"progress" gorm:"-"`
}

// TableName tells gorm the table.
func (Job) TableName() string { return "replay_job" }

func (j *Job) fill() {
	switch {
	case j.Status == JobDone:
		j.Progress = 100
	case j.Matched > 0:
		j.Progress = float64(j.Replayed) * 100 / float64(j.Matched)
	}
}

// CreateJob records a bulk replay for the worker to carry out at the
// configured rate. Over the cap it needs confirmLarge.
func (s *Service) CreateJob(ctx context.Context, actor, reason string, f BulkFilter, confirmLarge bool) (*Job, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, ErrReasonRequired
	}
	f, err := f.normalized()
	if err != nil {
		return nil, err
	}
	var job Job
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var agg struct {
			N     int64
			MaxID *int64
		}
		if err := f.scope(tx.Model(&callback.Log{})).Select("COUNT(*) AS n, MAX(id) AS max_id").Scan(&agg).Error; err != nil {
			return err
		}
		if agg.N > int64(s.Cap) && !confirmLarge {
			return ErrTooLarge
		}
		filter, _ := json.Marshal(f)
		now := time.Now().UTC()
		job = Job{Actor: actor, Reason: reason, Filter: filter, Status: JobRunning, Matched: int(agg.N), CreatedAt: now, UpdatedAt: now}
		if agg.MaxID != nil {
			job.MaxID = *agg.MaxID
		}
		if agg.N == 0 {
			job.Status = JobDone
			job.FinishedAt = &now
		}
		if err := tx.Create(&job).Error; err != nil {
			return err
		}
		return audit(tx, actor, "bulk_replay", fmt.Sprintf("job:%d", job.ID), reason, f, int(agg.N))
	})
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("error creating replay job: %w", store.Translate(err))
	}
	s.Log.InfoContext(ctx, "admin: bulk replay created", "job_id", job.ID, "actor", actor, "matched", job.Matched, "reason", reason)
	job.fill()
	return &job, nil
}

// GetJob returns one replay job.
func (s *Service) GetJob(ctx context.Context, id int64) (*Job, error) {
	var j Job
	if err := s.DB.WithContext(ctx).Take(&j, id).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("error loading replay job: %w", store.Translate(err))
	}
	j.fill()
	return &j, nil
}

// ListJobs returns the newest replay jobs.
func (s *Service) ListJobs(ctx context.Context, limit int) ([]Job, error) {
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	var out []Job
	if err := s.DB.WithContext(ctx).Order("id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("error listing replay jobs: %w", store.Translate(err))
	}
	for i := range out {
		out[i].fill()
	}
	return out, nil
}

// CancelJob stops a running replay job; what it replayed stays replayed.
func (s *Service) CancelJob(ctx context.Context, actor string, id int64) (*Job, error) {
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var j Job
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&j, id).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return ErrNotFound
			}
			return err
		}
		if j.Status != JobRunning {
			return ErrJobFinished
		}
		now := time.Now().UTC()
		if err := tx.Model(&j).Updates(map[string]any{"status": JobCancelled, "finished_at": now, "updated_at": now}).Error; err != nil {
			return err
		}
		return audit(tx, actor, "cancel_replay", fmt.Sprintf("job:%d", id), "", nil, j.Replayed)
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrJobFinished) {
			return nil, err
		}
		return nil, fmt.Errorf("error cancelling replay job: %w", store.Translate(err))
	}
	return s.GetJob(ctx, id)
}
