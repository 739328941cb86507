package callback

import "time"

// Outcomes of one attempt.
const (
	OutcomeSuccess = "SUCCESS"
	OutcomeRetry   = "RETRY"
	OutcomeFailed  = "FAILED"
)

// Attempt is one callback_attempt row.
type Attempt struct {
	ID         int64     `gorm:"column:id;primaryKey;autoIncrement" json:"id"`
	LogID      int64     `gorm:"column:log_id" json:"log_id"`
	Attempt    int       `gorm:"column:attempt" json:"attempt"`
	StartedAt  time.Time `gorm:"column:started_at" json:"started_at"`
	FinishedAt time.Time `gorm:"column:finished_at" json:"finished_at"`
	Outcome    string    `gorm:"column:outcome" json:"outcome"`
	Error      *string   `gorm:"column:error" json:"error,omitempty"`
	WorkerID   string    `gorm:"column:worker_id" json:"worker_id"`
	// Note says why a SUCCESS changed nothing (see NoEffect).
	Note *string `gorm:"column:note" json:"note,omitempty"`
}

// TableName tells gorm the table.
func (Attempt) TableName() string { return "callback_attempt" }
