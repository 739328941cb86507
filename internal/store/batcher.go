package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"callgate/internal/callback"
)

// Batcher is the group-committed intake: concurrent requests hand their row
// to it, and a writer turns what is queued into one transaction (a
// multi-row INSERT into callback_log, one into callback_event:
// Store.writeIntake), so they share one durable commit instead of paying
// one each. A writer
// flushes as soon as its previous batch's statements are done (no fixed
// wait: at low load a batch is one row), up to MaxBatch rows and the
// server's max_allowed_packet: the next batch's statements run while the
// previous batch's COMMIT waits for the disk, and it commits after it
// (writer). Each request is answered only once its own row is
// committed, with its own id and duplicate flag, the same answers as the
// one-INSERT-per-request path (Store.InsertCallback).
//
// Order: a row goes to the writer of its (kind, business key), and a
// writer inserts its rows in the order the requests handed them over, one
// statement after the other, so callbacks of one key that reach this
// gateway get ids in arrival order (the order the worker processes a key
// in). Rows of different keys may be written by different writers at the
// same time.
type Batcher struct {
	st       *Store
	log      *slog.Logger
	maxBatch int
	// onNew is told the new rows of each batch (to announce them).
	onNew  func([]Inserted)
	queues []chan *pendingInsert
	wg     sync.WaitGroup
	stop   chan struct{}
	once   sync.Once
	// packet caches the server's max_allowed_packet (0 until read).
	packet atomic.Int64
	// returning is returningNo when the read-back is forced (tests);
	// otherwise the store's answer is used (Store.canReturn).
	returning atomic.Int32
}

// Values of Batcher.returning.
const (
	returningUnknown int32 = iota
	returningYes
	returningNo
)

type pendingInsert struct {
	row  *callback.Log
	size int // rowSize(row)
	res  InsertResult
	err  error
	done chan struct{}
}

// Batch statement limits.
const (
	// flushTimeout bounds one batch's statements.
	flushTimeout = 10 * time.Second
	// packetFallback is assumed while max_allowed_packet cannot be read
	// (the smallest default of the MySQL versions still around).
	packetFallback = 4 << 20
	// packetHeadroom is kept free of rows in a statement: its own text
	// and the protocol's overhead.
	packetHeadroom = 64 << 10
	// rowOverhead is what a row adds beyond its escaped values: quotes,
	// commas, the _binary prefix, the two timestamps.
	rowOverhead = 160
)

// ErrUnaccounted is a row that a batch INSERT reported done but that is
// not in the table afterwards. It cannot happen with a correct statement;
// the request is answered 503 (the platform retries) rather than 200.
var ErrUnaccounted = errors.New("callback row not found after its batch insert")

// Inserted is a callback the intake stored as new.
type Inserted struct {
	ID      int64
	Kind    string
	TraceID string
}

// NewBatcher starts writers goroutines flushing batches of at most maxBatch
// rows; after each batch commits, onNew (if set) is told its new rows
// before their requests are answered. Close stops them.
func NewBatcher(st *Store, writers, maxBatch int, log *slog.Logger, onNew func([]Inserted)) *Batcher {
	b := &Batcher{st: st, log: log, maxBatch: maxBatch, onNew: onNew, stop: make(chan struct{})}
	for range writers {
		q := make(chan *pendingInsert, maxBatch*2)
		b.queues = append(b.queues, q)
		b.wg.Add(1)
		go b.writer(q)
	}
	return b
}

// InsertCallback queues l and waits for its batch to commit. A context that
// ends first answers with its error; the row may still be committed by the
// batch, which is safe: the platform's retry is then a duplicate.
func (b *Batcher) InsertCallback(ctx context.Context, l *callback.Log) (InsertResult, error) {
	p := &pendingInsert{row: l, size: rowSize(l), done: make(chan struct{})}
	select {
	case b.queues[b.shard(l)] <- p:
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

// shard picks the writer of l's key.
func (b *Batcher) shard(l *callback.Log) int {
	if len(b.queues) == 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(l.Kind))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(l.BusinessKey))
	return int(h.Sum32() % uint32(len(b.queues)))
}

// Close stops the writers after the queued rows are written.
func (b *Batcher) Close() {
	b.once.Do(func() { close(b.stop) })
	b.wg.Wait()
}

func (b *Batcher) writer(queue chan *pendingInsert) {
	defer b.wg.Done()
	// A batch is bounded by rows and by the bytes a statement may carry.
	var bytes, budget int
	g := &gatherer[*pendingInsert]{queue: queue, stop: b.stop, fits: func(batch []*pendingInsert, next *pendingInsert) bool {
		if len(batch) == 1 {
			bytes, budget = batch[0].size, b.budget()
		}
		if len(batch) >= b.maxBatch || bytes+next.size > budget {
			return false
		}
		bytes += next.size
		return true
	}}
	// A pipeline of two batches: once a batch's statements are done and
	// its COMMIT is on its way, the next batch is gathered and its
	// statements run on another connection while that COMMIT waits for
	// its flush to disk. Each stage stays in order: a batch starts its
	// statements only once the previous one's are done (so it never holds
	// a lock the previous one still waits for), and commits and is
	// answered only once the previous one is answered (so that rows are
	// committed, and announced, in the order they were written).
	var prev *flushStage
	defer func() {
		if prev != nil {
			<-prev.done
		}
	}()
	for {
		batch, ok := g.next(make([]*pendingInsert, 0, b.maxBatch))
		if !ok {
			return
		}
		st := &flushStage{stmts: make(chan struct{}), done: make(chan struct{})}
		go b.flushAfter(batch, prev, st)
		<-st.stmts
		if prev != nil {
			// At most two batches at once: st committing (or waiting
			// for prev's COMMIT) and the next one's statements.
			<-prev.done
		}
		prev = st
	}
}

// flushStage is one batch's progress through the writer's pipeline.
type flushStage struct {
	// stmts is closed once the batch's statements are done (its COMMIT
	// next) or it ended without them.
	stmts     chan struct{}
	stmtsOnce sync.Once
	// done is closed once the batch is committed (or failed) and answered.
	done chan struct{}
}

func (s *flushStage) statementsDone() { s.stmtsOnce.Do(func() { close(s.stmts) }) }

// budget is how many bytes of rows one statement may carry: the server's
// max_allowed_packet less headroom, read once.
func (b *Batcher) budget() int {
	packet := b.packet.Load()
	if packet == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, err := b.st.MaxAllowedPacket(ctx)
		cancel()
		if err != nil {
			packet = packetFallback // the flush will say what is wrong
		} else {
			b.packet.Store(n)
			packet = n
		}
	}
	return int(packet) - packetHeadroom
}

// rowSize is the bytes a row adds to the INSERT's text once its values are
// escaped (go-sql-driver doubles NUL, \n, \r, \x1a, quotes and backslashes).
func rowSize(l *callback.Log) int {
	return escapedLen(l.Payload) + escapedLen(l.Normalized) + escapedLen(l.Headers) + 2*(len(l.Source)+len(l.Kind)+len(l.EventID)+len(l.BusinessKey)) +
		len(l.TraceID) + rowOverhead
}

func escapedLen(b []byte) int {
	n := len(b)
	for _, c := range b {
		switch c {
		case 0, '\n', '\r', 0x1a, '\'', '"', '\\':
			n++
		}
	}
	return n
}

// RowFits reports whether a callback whose body is up to bodyBytes and whose
// stored headers are up to headerBytes always fits in one statement of a
// server with this max_allowed_packet, whatever its bytes (each escaped
// byte counts twice).
func RowFits(bodyBytes, headerBytes, packet int64) bool {
	return RowBytesNeeded(bodyBytes, headerBytes) <= packet
}

// RowBytesNeeded is the largest statement such a callback can need.
func RowBytesNeeded(bodyBytes, headerBytes int64) int64 {
	return 2*(bodyBytes+headerBytes+callback.MaxNormalizedBytes) + rowOverhead + packetHeadroom
}

// flush writes one batch and answers each request in it.
func (b *Batcher) flush(batch []*pendingInsert) { b.flushAfter(batch, nil, nil) }

// flushAfter is flush as a stage of the writer's pipeline: it commits and
// answers only after prev (if set) is done, and reports its own progress
// in st (if set).
func (b *Batcher) flushAfter(batch []*pendingInsert, prev, st *flushStage) {
	waitPrev := func() {
		if prev != nil {
			<-prev.done
		}
	}
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
		if st != nil {
			st.statementsDone()
			close(st.done)
		}
	}()
	beforeCommit := waitPrev
	if st != nil {
		beforeCommit = func() {
			st.statementsDone()
			waitPrev()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()

	// Duplicates inside the batch: only the first of an event id is
	// inserted; the others get its answer as duplicates. Event ids are
	// compared byte for byte, as callback_event's primary key does.
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
	err := b.st.replicated(ctx, func() (bool, error) {
		err := b.insert(ctx, unique, beforeCommit)
		var refused *statementError
		if errors.As(err, &refused) && !connectionFailure(err) && len(unique) > 1 {
			// Row by row, after the previous batch (whose COMMIT may
			// still be on its way): these commits need not wait for it.
			waitPrev()
			// The statement itself was refused (and rolled back whole): a
			// row the database refuses must not fail its batch-mates, so
			// this batch goes row by row.
			b.log.Warn("intake: batch insert failed, retrying row by row", "rows", len(unique), "error", err)
			err = nil
			for _, p := range unique {
				p.res, p.err = b.st.insertOne(ctx, p.row, b.canReturn(ctx))
			}
		}
		wrote := false
		for _, p := range unique {
			wrote = wrote || p.err == nil && p.res.ID != 0 && !p.res.Duplicate
		}
		return wrote, err
	})
	// A batch that failed before its COMMIT is answered after the
	// previous one all the same.
	waitPrev()
	// Rows committed on the primary alone are answered 503 but announced
	// all the same: the platform's retry is a duplicate, which is never
	// announced, and processing them is idempotent.
	notReplicated := errors.Is(err, ErrNotReplicated)
	var fresh []Inserted
	for _, p := range batch {
		f := firsts[key{p.row.Source, p.row.EventID}]
		switch {
		case err != nil:
			p.err = fmt.Errorf("error inserting callback batch: %w", translate(err))
			if notReplicated && f == p && f.err == nil && p.res.ID != 0 && !p.res.Duplicate {
				fresh = append(fresh, Inserted{ID: p.res.ID, Kind: p.row.Kind, TraceID: p.row.TraceID})
			}
		case f.err != nil:
			p.err = f.err
		case f != p:
			p.res = InsertResult{ID: f.res.ID, Duplicate: true}
		case !p.res.Duplicate:
			fresh = append(fresh, Inserted{ID: p.res.ID, Kind: p.row.Kind, TraceID: p.row.TraceID})
		}
	}
	if len(fresh) > 0 && b.onNew != nil {
		b.onNew(fresh)
	}
}

// insert writes unique rows and their events in one transaction
// (Store.writeIntake), in their order, and learns each row's id and
// whether it is new. A row is new unless its event was already in
// callback_event (a callback stored before, or one whose day retention
// dropped); its row is then deleted again, and it is answered with the
// stored log_id. Its own row is told by its received_at (microseconds)
// and trace id. Ids are read from the rows rather than derived from
// LAST_INSERT_ID(), which is only safe with innodb_autoinc_lock_mode 0 or
// 1. On MariaDB the statements answer their rows themselves (INSERT ...
// RETURNING); elsewhere they are read back. Every row must be accounted
// for.
func (b *Batcher) insert(ctx context.Context, rows []*pendingInsert, beforeCommit func()) error {
	inserted, idsInUse, err := b.st.writeIntakeThen(ctx, rows, b.canReturn(ctx), beforeCommit)
	if idsInUse > 0 {
		b.log.Warn("intake: the database gave out a callback_log id already in use; the batch was written again with new ids",
			"rows", len(rows), "tries", idsInUse+1, "written", err == nil)
	}
	if err != nil {
		return err
	}
	var fresh int64
	missing := 0
	for _, p := range rows {
		switch {
		case p.res.ID == 0:
			missing++
			p.err = fmt.Errorf("%w: %s %q", ErrUnaccounted, p.row.Source, p.row.EventID)
		case !p.res.Duplicate:
			fresh++
		}
	}
	if missing > 0 || inserted >= 0 && fresh != inserted {
		b.log.Error("intake: batch insert does not account for its rows", "rows", len(rows),
			"reported_new", inserted, "found_new", fresh, "missing", missing)
	}
	return nil
}

// canReturn reports whether the server answers INSERT ... RETURNING (the
// store's answer, asked once), unless the read-back is forced.
func (b *Batcher) canReturn(ctx context.Context) bool {
	if b.returning.Load() == returningNo {
		return false
	}
	return b.st.canReturn(ctx)
}

// mine reports whether a stored row with this trace id and received_at is
// the one p wrote.
func (p *pendingInsert) mine(traceID string, received time.Time) bool {
	return traceID == p.row.TraceID && received.Equal(receivedAt(p.row))
}

// statementError is the intake's transaction failing before its COMMIT
// (rolled back whole).
type statementError struct{ err error }

func (e *statementError) Error() string { return e.err.Error() }
func (e *statementError) Unwrap() error { return e.err }
