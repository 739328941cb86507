package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"time"

	"gorm.io/gorm"
)

// killWait bounds how long InTxBounded waits for the server to let a
// killed transaction go.
const killWait = 5 * time.Second

// Takeover is what InTxBounded does with a transaction's callback row
// when the deadline passes first: Row names the callback_log row the
// transaction holds (0: none yet, nothing to take over), and Then runs in
// a transaction of its own that holds that row, taken the moment the
// expired transaction lets it go, so that nothing else claims it in
// between.
type Takeover struct {
	Row  func() int64
	Then func(ctx context.Context, tx *Tx) error
	// Done, if set, learns how the takeover ended: nil when Then's
	// transaction committed, Then's error, or the store's.
	Done func(err error)
}

// InTxBounded is InTx for a transaction bounded by ctx (the worker's, with
// its deadline). Cancelling a context only closes the client's side: a
// server thread in a lock wait, or in a long statement, keeps its
// transaction and its locks until it notices, and a handler that ignores
// its context goes on while database/sql rolls its transaction back. So
// the moment ctx ends before the transaction does, InTxBounded ends it on
// the server (KILL CONNECTION of its thread, waiting until the server no
// longer lists it, at most killWait) while fn may still run. With a
// takeover whose row is known, a second transaction first queues for that
// row's lock, then the thread is killed, and InnoDB hands the row to the
// queued transaction (claims never wait, so none is queued before it):
// what Then records, nothing else has claimed the row in between. The
// connection never goes back to the pool after that, nor after it broke.
func (s *Store) InTxBounded(ctx context.Context, fn func(tx *Tx) error, t *Takeover) error {
	var fnErr, txErr error
	err := s.db.WithContext(ctx).Connection(func(g *gorm.DB) error {
		conn, ok := g.Statement.ConnPool.(*sql.Conn)
		if !ok {
			return errors.New("store: no pinned connection")
		}
		var id int64
		_ = conn.Raw(func(dc any) error {
			if sc, ok := dc.(*sessionConn); ok {
				id = sc.id
			}
			return nil
		})
		endOnServer := func() {
			var row int64
			if t != nil && t.Row != nil {
				row = t.Row()
			}
			if row == 0 {
				s.killThread(id)
				return
			}
			s.takeOver(row, id, t)
		}
		watched := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(watched)
			endOnServer()
		})
		// BEGIN on a context that never ends: database/sql rolls a
		// transaction back the moment its context ends, which would let the
		// row go before the takeover is queued for it. fn's statements get
		// ctx; the server-side end is the kill's.
		txErr = g.WithContext(context.WithoutCancel(ctx)).Transaction(func(tg *gorm.DB) error {
			fnErr = fn(&Tx{g: tg.WithContext(ctx)})
			return fnErr
		})
		switch {
		case !stop():
			<-watched // ctx ended: the thread is killed, the takeover done
		case ctx.Err() != nil && txErr != nil:
			// ctx ended, and the driver, which closes the connection the
			// moment ctx's channel closes, failed the transaction before
			// the context package got round to starting the AfterFunc:
			// stop won the race, and the takeover is ours to do.
			endOnServer()
		}
		if ctx.Err() != nil || (txErr != nil && brokenConn(txErr)) {
			// The connection may be mid-statement or closed: never back to
			// the pool, and its server thread ended before we go on.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			s.killThread(id)
		}
		return nil
	})
	if err != nil {
		return translate(err) // no connection
	}
	if txErr == nil || (fnErr != nil && errors.Is(txErr, fnErr)) {
		return txErr
	}
	return translate(txErr) // BEGIN or COMMIT failed
}

// takeoverQueued bounds how long takeOver waits to see its lock request
// queued behind the expired transaction before it kills that anyway.
const takeoverQueued = time.Second

// takeoverLockWait is the control sessions' innodb_lock_wait_timeout: a
// takeover's locking read waits through the poll, the kill and the
// expired transaction's rollback.
const takeoverLockWait = 15 * time.Second

// takeOver queues a transaction for the lock of callback_log row, kills
// the server thread that holds it, runs t.Then in the queued transaction
// once InnoDB grants it the row, and tells t.Done how it ended. When the
// row was not held at all, Then simply runs. It runs on the control pool,
// so a worker pool taken up by expired transactions cannot stall it.
func (s *Store) takeOver(row, thread int64, t *Takeover) {
	ctx, cancel := context.WithTimeout(context.Background(), takeoverQueued+killWait+takeoverLockWait)
	defer cancel()
	queued := make(chan int64, 1) // the queued transaction's thread
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		var waiter int64
		select {
		case waiter = <-queued:
		case <-ctx.Done():
		}
		if waiter != 0 {
			s.awaitLockWait(ctx, waiter)
		}
		s.killThread(thread)
	}()
	err := s.ctl.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		var waiter int64
		if err := g.Raw(`SELECT CONNECTION_ID()`).Scan(&waiter).Error; err != nil {
			return err
		}
		queued <- waiter
		var ids []int64
		if err := g.Raw(`SELECT id FROM callback_log WHERE id = ? FOR UPDATE`, row).Scan(&ids).Error; err != nil {
			return err
		}
		<-killed // the expired transaction is gone from the server
		if t.Then == nil {
			return nil
		}
		return t.Then(ctx, &Tx{g: g})
	})
	select {
	case queued <- 0: // the transaction never got that far: kill at once
	default:
	}
	<-killed
	if t.Done != nil {
		t.Done(translate(err))
	}
}

// awaitLockWait returns once the server shows the transaction of thread
// waiting for a lock, or after takeoverQueued. InnoDB's view of its
// transactions is a cache refreshed only when no one read it for 0.1 s,
// hence the pace; without the PROCESS privilege the view is refused and
// a fixed pause stands in for it.
func (s *Store) awaitLockWait(ctx context.Context, thread int64) {
	deadline := time.Now().Add(takeoverQueued)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var n int
		err := s.ctlSQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX
			WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'`, thread).Scan(&n)
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			return
		}
		if n > 0 {
			return
		}
		time.Sleep(110 * time.Millisecond)
	}
}

// killThread ends the server thread id (and so its transaction, rolled
// back) and waits until the server no longer lists it, up to killWait.
// Best effort: when the server cannot be reached, neither can the thread's
// locks be taken by anyone.
func (s *Store) killThread(id int64) {
	if id == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	// 1094 (unknown thread): it ended already.
	_, _ = s.ctlSQL.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
	for ctx.Err() == nil {
		var n int
		if err := s.ctlSQL.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?`, id).Scan(&n); err != nil || n == 0 {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}
