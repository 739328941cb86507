package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Statuses of outbox.status.
const (
	OutboxPending = "PENDING"
	OutboxSent    = "SENT"
)

// OutboxRow is one outbox row: a downstream notification written in the
// same transaction as the business change that caused it.
type OutboxRow struct {
	ID            int64           `gorm:"column:id;primaryKey;autoIncrement" json:"id"`
	CallbackLogID int64           `gorm:"column:callback_log_id" json:"callback_log_id"`
	Exchange      string          `gorm:"column:exchange" json:"exchange"`
	RoutingKey    string          `gorm:"column:routing_key" json:"routing_key"`
	MessageID     string          `gorm:"column:message_id" json:"message_id"`
	Payload       []byte          `gorm:"column:payload" json:"-"`
	Headers       json.RawMessage `gorm:"column:headers" json:"headers,omitempty"`
	Status        string          `gorm:"column:status" json:"status"`
	Attempts      int             `gorm:"column:attempts" json:"attempts"`
	LastError     *string         `gorm:"column:last_error" json:"last_error,omitempty"`
	CreatedAt     time.Time       `gorm:"column:created_at" json:"created_at"`
	SentAt        *time.Time      `gorm:"column:sent_at" json:"sent_at,omitempty"`
	// RetainDay is the row's day partition (retain_day): what it was
	// read with, or the day InsertOutboxTx wrote it on (zero: the
	// database's day at the INSERT, not known here). Marking the row SENT
	// names it (byDay).
	RetainDay time.Time `gorm:"column:retain_day;<-:update" json:"-"`
}

// TableName tells gorm the table.
func (OutboxRow) TableName() string { return "outbox" }

// InsertOutboxTx writes rows as PENDING in one INSERT, in tx. Their
// created_at is the database's clock at this statement: callers run it
// right before the commit, and the relay measures a row's age with the
// same clock, so neither a long transaction nor a host whose clock is off
// makes a row look old the moment it commits. A row is written on its
// RetainDay (a batch's: the database's day at its claim), or, when that
// is zero, on the database's day now.
func (s *Store) InsertOutboxTx(ctx context.Context, tx *Tx, rows []OutboxRow) error {
	if len(rows) == 0 {
		return nil
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO outbox (callback_log_id, exchange, routing_key, message_id, payload, headers, status, attempts, created_at, retain_day) VALUES `)
	args := make([]any, 0, len(rows)*8)
	for i, r := range rows {
		if i > 0 {
			q.WriteByte(',')
		}
		// The first value is not a []byte: gorm would expand a slice
		// that follows "(" into a list.
		q.WriteString(`(?, ?, ?, ?, ?, ?, ?, 0, NOW(6), COALESCE(?, CURRENT_DATE))`)
		var headers, day any
		if len(r.Headers) > 0 {
			headers = []byte(r.Headers)
		}
		if !r.RetainDay.IsZero() {
			day = r.RetainDay.Format(time.DateOnly)
		}
		args = append(args, r.CallbackLogID, r.Exchange, r.RoutingKey, r.MessageID, r.Payload, headers, OutboxPending, day)
	}
	if err := s.q(ctx, tx).Exec(q.String(), args...).Error; err != nil {
		return fmt.Errorf("error writing outbox rows: %w", translate(err))
	}
	return nil
}

// markSent records the broker's confirm of rows, found by their message
// ids: SENT, sent_at, one more attempt. The fast path and the relay both
// mark through it. By message_id (its key) on the rows' days (byDay),
// never by status: an extra status condition makes MariaDB walk the
// (status, id) index over every PENDING row instead. The fast path's
// rows were written moments before, on the batch's claim day; a row
// retention moved meanwhile (it moves only days older than max_age)
// would stay PENDING and be sent again by the relay, which message_id
// dedupes.
func markSent(q *gorm.DB, rows []OutboxRow) error {
	ids := make([]string, len(rows))
	days := make([]time.Time, len(rows))
	for i := range rows {
		ids[i], days[i] = rows[i].MessageID, rows[i].RetainDay
	}
	sentAt := time.Now().UTC()
	for _, c := range byDay("message_id", ids, days) {
		err := q.Session(&gorm.Session{}).Model(&OutboxRow{}).Where(c.where, c.args...).
			Updates(map[string]any{"status": OutboxSent, "sent_at": sentAt, "attempts": gorm.Expr("attempts + 1")}).Error
		if err != nil {
			return err
		}
	}
	return nil
}

// ClaimOutboxTx claims up to limit PENDING rows committed at least minAge
// ago by the database's clock, oldest first, skipping rows other
// transactions hold, until tx ends: the relay's batch.
func (s *Store) ClaimOutboxTx(ctx context.Context, tx *Tx, minAge time.Duration, limit int) ([]OutboxRow, error) {
	var rows []OutboxRow
	err := s.q(ctx, tx).Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"}).
		Where("status = ? AND created_at <= NOW(6) - INTERVAL ? MICROSECOND", OutboxPending, minAge.Microseconds()).
		Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("error claiming outbox rows: %w", translate(err))
	}
	return rows, nil
}

// MarkOutboxSentTx marks rows (as claimed) SENT, in tx.
func (s *Store) MarkOutboxSentTx(ctx context.Context, tx *Tx, rows []OutboxRow) error {
	if len(rows) == 0 {
		return nil
	}
	if err := markSent(s.q(ctx, tx), rows); err != nil {
		return fmt.Errorf("error marking outbox rows sent: %w", translate(err))
	}
	return nil
}

// RecordOutboxFailureTx counts a failed publish of rows (as claimed) and
// keeps the reason; they stay PENDING.
func (s *Store) RecordOutboxFailureTx(ctx context.Context, tx *Tx, rows []OutboxRow, reason string) error {
	if len(rows) == 0 {
		return nil
	}
	ids := make([]int64, len(rows))
	days := make([]time.Time, len(rows))
	for i := range rows {
		ids[i], days[i] = rows[i].ID, rows[i].RetainDay
	}
	for _, c := range byDay("id", ids, days) {
		err := s.q(ctx, tx).Model(&OutboxRow{}).Where(c.where, c.args...).
			Updates(map[string]any{"attempts": gorm.Expr("attempts + 1"), "last_error": reason}).Error
		if err != nil {
			return fmt.Errorf("error recording outbox failures: %w", translate(err))
		}
	}
	return nil
}

// MessageIDPrefix starts the message_id of every notification callback
// logID produced: "cb<logID>." (the whole id is "cb<logID>.<routing
// key>[.<n>]", see outbox.MessageID).
func MessageIDPrefix(logID int64) string { return "cb" + strconv.FormatInt(logID, 10) + "." }

// OutboxOf returns the rows callback logID produced (without payloads),
// in order: its lineage, found by message_id prefix in its key.
func (s *Store) OutboxOf(ctx context.Context, logID int64) ([]OutboxRow, error) {
	var rows []OutboxRow
	err := s.q(ctx, nil).Omit("payload").Where("message_id LIKE ? AND callback_log_id = ?", MessageIDPrefix(logID)+"%", logID).
		Order("id").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("error loading the outbox of callback log %d: %w", logID, translate(err))
	}
	return rows, nil
}

// SentMarker marks outbox rows SENT for many concurrent callers in shared
// statements (group commit): each caller waits until its own rows are
// marked, but callers that arrive while an UPDATE runs share the next one,
// which saves the database a transaction per processed callback.
type SentMarker struct {
	st    *Store
	reqs  chan *markReq
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	limit int
}

type markReq struct {
	rows []OutboxRow
	err  error
	done chan struct{}
}

// sentMarkerTimeout bounds one marking statement.
const sentMarkerTimeout = 10 * time.Second

// NewSentMarker starts a SentMarker; Close stops it.
func (s *Store) NewSentMarker() *SentMarker {
	m := &SentMarker{st: s, reqs: make(chan *markReq, 256), stop: make(chan struct{}), done: make(chan struct{}), limit: 1000}
	go m.run()
	return m
}

// MarkSent marks rows (as written: MessageID, RetainDay) SENT and returns
// once that is committed. It runs even while the process is stopping: a
// row confirmed but not marked is published again (harmless, message_id
// dedupes), but there is no reason to cause that.
func (m *SentMarker) MarkSent(ctx context.Context, rows []OutboxRow) error {
	if len(rows) == 0 {
		return nil
	}
	r := &markReq{rows: rows, done: make(chan struct{})}
	select {
	case m.reqs <- r:
	case <-m.stop:
		return m.mark(rows)
	}
	<-r.done
	return r.err
}

// Close marks what is queued and stops.
func (m *SentMarker) Close() {
	m.once.Do(func() { close(m.stop) })
	<-m.done
}

func (m *SentMarker) run() {
	defer close(m.done)
	var n int
	g := &gatherer[*markReq]{queue: m.reqs, stop: m.stop, fits: func(batch []*markReq, next *markReq) bool {
		if len(batch) == 1 {
			n = len(batch[0].rows)
		}
		if n >= m.limit {
			return false
		}
		n += len(next.rows)
		return true
	}}
	var batch []*markReq
	for {
		var ok bool
		if batch, ok = g.next(batch); !ok {
			return
		}
		var rows []OutboxRow
		for _, r := range batch {
			rows = append(rows, r.rows...)
		}
		err := m.mark(rows)
		for _, r := range batch {
			r.err = err
			close(r.done)
		}
	}
}

func (m *SentMarker) mark(rows []OutboxRow) error {
	ctx, cancel := context.WithTimeout(context.Background(), sentMarkerTimeout)
	defer cancel()
	if err := markSent(m.st.q(ctx, nil), rows); err != nil {
		return fmt.Errorf("error marking outbox rows sent: %w", translate(err))
	}
	return nil
}
