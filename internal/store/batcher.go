package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"callgate/internal/callback"
)

// Batcher is the group-committed intake: concurrent requests hand their row
// to it, and a writer turns what is queued into one multi-row INSERT, so
// they share one durable commit instead of paying one each. A writer
// flushes as soon as its previous batch is done (no fixed wait: at low load
// a batch is one row), up to MaxBatch rows. Each request is answered only
// once its own row is committed, with its own id and duplicate flag, the
// same answers as the one-INSERT-per-request path (Store.InsertCallback).
type Batcher struct {
	st       *Store
	log      *slog.Logger
	maxBatch int
	queue    chan *pendingInsert
	wg       sync.WaitGroup
	stop     chan struct{}
	once     sync.Once
}

type pendingInsert struct {
	row  *callback.Log
	res  InsertResult
	err  error
	done chan struct{}
}

// NewBatcher starts writers goroutines (one or two) flushing batches of at
// most maxBatch rows. Close stops them.
func NewBatcher(st *Store, writers, maxBatch int, log *slog.Logger) *Batcher {
	b := &Batcher{st: st, log: log, maxBatch: maxBatch, queue: make(chan *pendingInsert, writers*maxBatch*2), stop: make(chan struct{})}
	for range writers {
		b.wg.Add(1)
		go b.writer()
	}
	return b
}

// InsertCallback queues l and waits for its batch to commit. A context that
// ends first answers with its error; the row may still be committed by the
// batch, which is safe: the platform's retry is then a duplicate.
func (b *Batcher) InsertCallback(ctx context.Context, l *callback.Log) (InsertResult, error) {
	p := &pendingInsert{row: l, done: make(chan struct{})}
	select {
	case b.queue <- p:
	case <-ctx.Done():
		return InsertResult{}, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	case <-b.stop:
		return InsertResult{}, fmt.Errorf("%w: intake closing", ErrUnavailable)
	}
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return InsertResult{}, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
}

// Close stops the writers after the queued rows are written.
func (b *Batcher) Close() {
	b.once.Do(func() { close(b.stop) })
	b.wg.Wait()
}

func (b *Batcher) writer() {
	defer b.wg.Done()
	batch := make([]*pendingInsert, 0, b.maxBatch)
	for {
		var first *pendingInsert
		select {
		case first = <-b.queue:
		case <-b.stop:
			// Drain what is already queued, then stop.
			select {
			case first = <-b.queue:
			default:
				return
			}
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < b.maxBatch {
			select {
			case p := <-b.queue:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		b.flush(batch)
	}
}

// flush writes one batch and answers each request in it.
func (b *Batcher) flush(batch []*pendingInsert) {
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Duplicates inside the batch: only the first of an event id is
	// inserted; the others get its answer as duplicates.
	type key struct{ source, event string }
	firsts := map[key]*pendingInsert{}
	var unique []*pendingInsert
	for _, p := range batch {
		k := key{p.row.Source, p.row.EventID}
		if _, seen := firsts[k]; !seen {
			firsts[k] = p
			unique = append(unique, p)
		}
	}
	err := b.insert(ctx, unique)
	var refused *statementError
	if errors.As(err, &refused) && !IsUnavailable(err) && len(unique) > 1 {
		// The statement itself was refused (and rolled back whole): a row
		// the database refuses must not fail its batch-mates, so this
		// batch goes row by row.
		b.log.Warn("intake: batch insert failed, retrying row by row", "rows", len(unique), "error", err)
		err = nil
		for _, p := range unique {
			p.res, p.err = b.st.InsertCallback(ctx, p.row)
		}
	}
	for _, p := range batch {
		f := firsts[key{p.row.Source, p.row.EventID}]
		switch {
		case err != nil:
			p.err = fmt.Errorf("error inserting callback batch: %w", Translate(err))
		case f != p:
			p.res, p.err = InsertResult{ID: f.res.ID, Duplicate: true}, f.err
		}
	}
}

// insert writes unique rows in one statement and reads their ids back by
// event id. A row is new if the stored row carries this request's own
// received_at (microseconds) and trace id; otherwise it was there before.
// Ids are read back rather than derived from LAST_INSERT_ID(), which is
// only safe with innodb_autoinc_lock_mode 0 or 1. A row not visible at once
// is looked for again (its insert repeated, which is idempotent) a few
// times; it is never answered as a duplicate by guesswork.
func (b *Batcher) insert(ctx context.Context, rows []*pendingInsert) error {
	if err := b.exec(ctx, rows); err != nil {
		return &statementError{err}
	}
	missing := rows
	for try := 0; ; try++ {
		var err error
		if missing, err = b.readBack(ctx, missing); err != nil || len(missing) == 0 {
			return err
		}
		if try == 3 {
			return fmt.Errorf("%d callback rows not found after insert", len(missing))
		}
		b.log.Warn("intake: rows not visible after insert, retrying", "rows", len(missing))
		time.Sleep(time.Duration(try+1) * 5 * time.Millisecond)
		if err := b.exec(ctx, missing); err != nil {
			return &statementError{err}
		}
	}
}

// exec runs the multi-row INSERT, retrying deadlocks.
func (b *Batcher) exec(ctx context.Context, rows []*pendingInsert) error {
	// A stable order makes concurrent batches lock keys in the same order
	// (fewer deadlocks).
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].row.Source != rows[j].row.Source {
			return rows[i].row.Source < rows[j].row.Source
		}
		return rows[i].row.EventID < rows[j].row.EventID
	})
	var q strings.Builder
	q.WriteString(`INSERT INTO callback_log (source, kind, event_id, business_key, status, attempts, payload, headers, trace_id, received_at, next_attempt_at) VALUES `)
	args := make([]any, 0, len(rows)*9)
	for i, p := range rows {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(`(?, ?, ?, ?, 'PENDING', 0, ?, ?, ?, ?, ?)`)
		l := p.row
		due := l.ReceivedAt
		if l.NextAttemptAt != nil {
			due = *l.NextAttemptAt
		}
		var headers any
		if len(l.Headers) > 0 {
			headers = []byte(l.Headers)
		}
		args = append(args, l.Source, l.Kind, l.EventID, l.BusinessKey, l.Payload, headers, l.TraceID, l.ReceivedAt, due)
	}
	q.WriteString(` ON DUPLICATE KEY UPDATE id = id`)
	var err error
	for try := 0; try <= maxStatementRetries; try++ {
		if _, err = b.st.SQL.ExecContext(ctx, q.String(), args...); err == nil || !isRetryable(err) {
			break
		}
	}
	return err
}

// statementError is the batch INSERT itself failing (rolled back whole).
type statementError struct{ err error }

func (e *statementError) Error() string { return e.err.Error() }
func (e *statementError) Unwrap() error { return e.err }

// readBack answers the rows it finds and returns those it does not.
func (b *Batcher) readBack(ctx context.Context, rows []*pendingInsert) ([]*pendingInsert, error) {
	var missing []*pendingInsert
	bySource := map[string][]*pendingInsert{}
	for _, p := range rows {
		bySource[p.row.Source] = append(bySource[p.row.Source], p)
	}
	for source, ps := range bySource {
		var q strings.Builder
		q.WriteString(`SELECT id, event_id, trace_id, received_at FROM callback_log WHERE source = ? AND event_id IN (`)
		args := make([]any, 0, len(ps)+1)
		args = append(args, source)
		byEvent := make(map[string]*pendingInsert, len(ps))
		for i, p := range ps {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('?')
			args = append(args, p.row.EventID)
			byEvent[p.row.EventID] = p
		}
		q.WriteByte(')')
		if err := b.scanIDs(ctx, q.String(), args, byEvent); err != nil {
			return nil, err
		}
		for _, p := range ps {
			if p.res.ID == 0 {
				missing = append(missing, p)
			}
		}
	}
	return missing, nil
}

// scanIDs runs the read-back query and answers each pending insert it
// finds.
func (b *Batcher) scanIDs(ctx context.Context, query string, args []any, byEvent map[string]*pendingInsert) error {
	rs, err := b.st.SQL.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rs.Close()
	for rs.Next() {
		var (
			id       int64
			event    string
			traceID  string
			received time.Time
		)
		if err := rs.Scan(&id, &event, &traceID, &received); err != nil {
			return err
		}
		if p := byEvent[event]; p != nil {
			mine := traceID == p.row.TraceID && received.Equal(p.row.ReceivedAt)
			p.res = InsertResult{ID: id, Duplicate: !mine}
		}
	}
	return rs.Err()
}
