package outbox

import (
	"context"
	"fmt"

	"callgate/internal/downstream"
	"callgate/internal/store"
)

// Publisher sends messages and reports which the broker confirmed.
type Publisher interface {
	Publish(ctx context.Context, msgs []downstream.Message) ([]bool, error)
}

var _ Publisher = (*downstream.Publisher)(nil)

// Marker records rows SENT by message id, on their days (Row.RetainDay).
type Marker interface {
	MarkSent(ctx context.Context, rows []Row) error
}

var _ Marker = (*store.SentMarker)(nil)

// Deliver publishes rows that just committed (the fast path) and marks the
// confirmed ones SENT through m. What is not confirmed stays PENDING for
// the relay. It returns how many were sent.
func Deliver(ctx context.Context, m Marker, pub Publisher, rows []Row) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	msgs := make([]downstream.Message, len(rows))
	for i, r := range rows {
		msgs[i] = Message(r)
	}
	acked, perr := pub.Publish(ctx, msgs)
	var sent []Row
	for i, ok := range acked {
		if ok {
			sent = append(sent, rows[i])
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
