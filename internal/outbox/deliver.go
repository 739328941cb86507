package outbox

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"callgate/internal/downstream"
)

// Publisher sends messages and reports which the broker confirmed.
type Publisher interface {
	Publish(ctx context.Context, msgs []downstream.Message) ([]bool, error)
}

var _ Publisher = (*downstream.Publisher)(nil)

// Deliver publishes rows that just committed (the fast path) and marks the
// confirmed ones SENT through m. What is not confirmed stays PENDING for
// the relay. It returns how many were sent.
func Deliver(ctx context.Context, m *Marker, pub Publisher, rows []Row) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	msgs := make([]downstream.Message, len(rows))
	for i, r := range rows {
		msgs[i] = r.Message()
	}
	acked, perr := pub.Publish(ctx, msgs)
	var sent []string
	for i, ok := range acked {
		if ok {
			sent = append(sent, rows[i].MessageID)
		}
	}
	if err := m.MarkSent(ctx, sent); err != nil {
		return 0, err
	}
	if perr != nil {
		return len(sent), fmt.Errorf("error publishing outbox rows: %w", perr)
	}
	return len(sent), nil
}

// markSent records the broker's confirm of the rows with these message
// ids. It runs even while the process is stopping: a row confirmed but not
// marked is published again (harmless, message_id dedupes), but there is no
// reason to cause that.
func markSent(ctx context.Context, db *gorm.DB, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markSentTimeout)
	defer cancel()
	now := time.Now().UTC()
	err := db.WithContext(ctx).Model(&Row{}).Where("message_id IN ?", ids).
		Updates(map[string]any{"status": StatusSent, "sent_at": now, "attempts": gorm.Expr("attempts + 1")}).Error
	if err != nil {
		return fmt.Errorf("error marking outbox rows sent: %w", err)
	}
	return nil
}
