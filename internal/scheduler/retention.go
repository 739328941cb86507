package scheduler

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"callgate/internal/callback"
	"callgate/internal/outbox"
)

// Retention deletes SUCCESS callbacks (with their attempts) and SENT outbox
// rows older than MaxAge, in small batches, each its own short transaction,
// so the tables are never locked for long. FAILED callbacks are never
// deleted: an operator has to look at them. MaxAge 0 keeps everything.
//
// Deleting a SUCCESS callback also forgets its (source, event_id): a
// platform re-sending it after MaxAge would be accepted as new. MaxAge must
// outlive every platform's retry window (Stripe's is 3 days; the default is
// 30 days), and the handlers are idempotent besides.
type Retention struct {
	DB        *gorm.DB
	MaxAge    time.Duration
	BatchSize int
	Log       *slog.Logger
}

// RunOnce deletes what is due and returns how many callbacks and outbox rows
// it removed.
func (r *Retention) RunOnce(ctx context.Context) (callbacks, outboxRows int, err error) {
	if r.MaxAge <= 0 {
		return 0, 0, nil
	}
	cutoff := time.Now().UTC().Add(-r.MaxAge)
	for ctx.Err() == nil {
		n, err := r.callbackBatch(ctx, cutoff)
		callbacks += n
		if err != nil {
			return callbacks, outboxRows, err
		}
		if n < r.BatchSize {
			break
		}
	}
	for ctx.Err() == nil {
		n, err := r.outboxBatch(ctx, cutoff)
		outboxRows += n
		if err != nil {
			return callbacks, outboxRows, err
		}
		if n < r.BatchSize {
			break
		}
	}
	if callbacks+outboxRows > 0 {
		r.Log.Info("retention: deleted old rows", "callbacks", callbacks, "outbox", outboxRows, "older_than", cutoff)
	}
	return callbacks, outboxRows, ctx.Err()
}

func (r *Retention) callbackBatch(ctx context.Context, cutoff time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Candidates first, with a plain read (no range of callback_log is
	// locked while the intake and the workers write).
	var ids []int64
	err := r.DB.WithContext(ctx).Model(&callback.Log{}).
		Where("status = ? AND processed_at < ?", callback.StatusSuccess, cutoff).
		Order("processed_at").Limit(r.BatchSize).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	// Then, in one transaction, lock those that are still eligible (a
	// replay may have made one PENDING since) and delete exactly them with
	// their history: a replay of one of them now waits for the lock, and
	// then finds it gone, instead of keeping a callback whose attempts
	// were erased.
	var eligible []int64
	err = r.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Raw(`SELECT id FROM callback_log WHERE id IN ? AND status = ? AND processed_at < ? FOR UPDATE`,
			ids, callback.StatusSuccess, cutoff).Scan(&eligible).Error; err != nil {
			return err
		}
		if len(eligible) == 0 {
			return nil
		}
		if err := tx.Exec(`DELETE FROM callback_attempt WHERE log_id IN ?`, eligible).Error; err != nil {
			return err
		}
		return tx.Exec(`DELETE FROM callback_log WHERE id IN ?`, eligible).Error
	}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, fmt.Errorf("error deleting old callbacks: %w", err)
	}
	return len(eligible), nil
}

// outboxBatch deletes one batch of old SENT outbox rows: ids first with a
// plain read, then a delete by id, so no range of the outbox is locked
// while the relay and the fast path mark rows SENT.
func (r *Retention) outboxBatch(ctx context.Context, cutoff time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var ids []int64
	err := r.DB.WithContext(ctx).Model(&outbox.Row{}).
		Where("status = ? AND sent_at < ?", outbox.StatusSent, cutoff).
		Order("sent_at").Limit(r.BatchSize).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	res := r.DB.WithContext(ctx).Exec(`DELETE FROM outbox WHERE id IN ? AND status = ?`, ids, outbox.StatusSent)
	if res.Error != nil {
		return 0, fmt.Errorf("error deleting sent outbox rows: %w", res.Error)
	}
	return int(res.RowsAffected), nil
}
