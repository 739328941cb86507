package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// With mysql.durability: replica, a callback is accepted only once two
// servers hold it: the primary, and a replica that acknowledged it through
// lossless semi-synchronous replication (MariaDB's
// rpl_semi_sync_master_enabled with wait point AFTER_SYNC; MySQL 8.0.26+
// calls it rpl_semi_sync_source_*). The engine does the replicating; the
// store only refuses to call an insert accepted when the engine says a
// replica may not have it.
//
// The engine does not say so per transaction: when no replica acknowledges
// within rpl_semi_sync_master_timeout, the primary commits anyway and
// silently goes on asynchronously, counting each such commit in
// Rpl_semi_sync_master_no_tx, and switches back on (status ON) once a
// replica has caught up with the binary log. So an intake statement is
// accepted when semi-sync was on before and after it and no commit went
// unacknowledged meanwhile; otherwise the caller gets ErrNotReplicated
// (503: the platform retries). The row may be on the primary; the retry
// finds it as a duplicate, and is accepted once a write of its own (to
// intake_barrier) is acknowledged, which covers every earlier commit (a
// duplicate adds nothing to the binary log for a replica to acknowledge,
// and semi-sync being on says nothing of commits made while it was off).
// Another
// gateway's unacknowledged commit in the same moment also refuses ours:
// conservative, and only while replication is degraded.

// ErrNotReplicated reports an intake insert that no replica is known to
// hold (mysql.durability: replica): answer 503, never 200.
var ErrNotReplicated = errors.New("no replica acknowledged the callback (semi-synchronous replication is off or timed out)")

// ErrReplicationSettings marks CheckReplication's answer that the server
// does not replicate losslessly semi-synchronously (as opposed to not
// being reachable to ask).
var ErrReplicationSettings = errors.New("not lossless semi-synchronous replication")

// errReadingDeadline is the cause PingReplicaWithin gives its own
// deadline, so that readSemiSync can tell a primary that did not answer in
// time from a caller that went away.
var errReadingDeadline = errors.New("the primary did not answer the semi-sync reading in time")

// semiSync is one reading of the primary's semi-sync status.
type semiSync struct {
	on      bool  // Rpl_semi_sync_master_status
	noTx    int64 // Rpl_semi_sync_master_no_tx: commits not acknowledged
	yesTx   int64 // Rpl_semi_sync_master_yes_tx: commits acknowledged
	noTimes int64 // Rpl_semi_sync_master_no_times: times semi-sync went off
	clients int64 // Rpl_semi_sync_master_clients
}

// acknowledging reports whether a replica is there to acknowledge: the
// status ON says nothing alone (switching rpl_semi_sync_master_enabled
// on makes it ON at once, with no replica connected).
func (r semiSync) acknowledging() bool { return r.on && r.clients >= 1 }

// covers reports whether after, read once a write committed, shows that a
// replica acknowledged it: a replica there before and after, no commit
// unacknowledged and no switch-off in between (while
// rpl_semi_sync_master_enabled is OFF, commits move no counter at all;
// turning it off counts in no_times), and an acknowledged commit more.
func (r semiSync) covers(after semiSync) bool {
	return r.acknowledging() && after.acknowledging() && after.noTx == r.noTx && after.noTimes == r.noTimes && after.yesTx > r.yesTx
}

// semiSyncState is the last reading, for /readyz and the metrics.
type semiSyncState struct {
	known   atomic.Bool
	on      atomic.Bool
	clients atomic.Int64
}

// readSemiSync reads the primary's semi-sync status (MariaDB's and
// MySQL's names alike). SHOW cannot be a server-side prepared statement:
// the query has no arguments, so it goes as text.
func (s *Store) readSemiSync(ctx context.Context) (semiSync, error) {
	r, err := s.querySemiSync(ctx)
	if err != nil {
		ownDeadline := errors.Is(context.Cause(ctx), errReadingDeadline)
		if ctx.Err() != nil && !ownDeadline {
			// The caller gave up (a request whose client went away, a
			// process stopping): that says nothing of the primary.
			return semiSync{}, err
		}
		if ownDeadline {
			err = fmt.Errorf("%w: %w", errReadingDeadline, err)
		}
		// Unknown is not acknowledging: the metrics and /readyz say so
		// rather than keep the last good reading.
		s.semi.on.Store(false)
		s.semi.clients.Store(0)
		s.semi.known.Store(false)
		return semiSync{}, err
	}
	s.semi.on.Store(r.acknowledging())
	s.semi.clients.Store(r.clients)
	s.semi.known.Store(true)
	return r, nil
}

// querySemiSync is one SHOW of the semi-sync status.
func (s *Store) querySemiSync(ctx context.Context) (semiSync, error) {
	rows, err := s.sql.QueryContext(ctx, `SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_%'`)
	if err != nil {
		return semiSync{}, fmt.Errorf("error reading semi-sync status: %w", err)
	}
	defer rows.Close()
	var r semiSync
	seen := 0
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return semiSync{}, fmt.Errorf("error reading semi-sync status: %w", err)
		}
		switch strings.ToLower(strings.Replace(name, "_source_", "_master_", 1)) {
		case "rpl_semi_sync_master_status":
			r.on = strings.EqualFold(value, "ON")
			seen++
		case "rpl_semi_sync_master_no_tx":
			r.noTx, _ = strconv.ParseInt(value, 10, 64)
			seen++
		case "rpl_semi_sync_master_yes_tx":
			r.yesTx, _ = strconv.ParseInt(value, 10, 64)
			seen++
		case "rpl_semi_sync_master_no_times":
			r.noTimes, _ = strconv.ParseInt(value, 10, 64)
			seen++
		case "rpl_semi_sync_master_clients":
			r.clients, _ = strconv.ParseInt(value, 10, 64)
		}
	}
	if err := rows.Err(); err != nil {
		return semiSync{}, fmt.Errorf("error reading semi-sync status: %w", err)
	}
	if seen < 4 {
		return semiSync{}, errors.New("the server reports no semi-synchronous replication status (Rpl_semi_sync_master_status, _no_tx, _yes_tx, _no_times)")
	}
	return r, nil
}

// replicated runs an intake insert and, with durability replica, reports
// ErrNotReplicated unless a replica acknowledged everything it committed
// and everything it found already there. insert reports whether it wrote
// a row: when it met only duplicates it committed nothing for a replica
// to acknowledge, and the duplicates' rows may have been committed while
// semi-sync was off (their first request was answered 503), with semi-sync
// on again since without a replica having them (switched on at a
// promotion, or at a primary's restart); so a write to intake_barrier
// goes through semi-sync instead, and its acknowledgement covers every
// earlier commit.
func (s *Store) replicated(ctx context.Context, insert func() (wrote bool, err error)) error {
	if !s.replica {
		_, err := insert()
		return err
	}
	before, err := s.readSemiSync(ctx)
	if err != nil {
		return err
	}
	wrote, err := insert()
	if err != nil {
		return err
	}
	if !wrote {
		if _, err := s.sql.ExecContext(ctx, `UPDATE intake_barrier SET writes = writes + 1 WHERE id = 1`); err != nil {
			return fmt.Errorf("%w: %w", ErrNotReplicated, translate(err))
		}
	}
	after, err := s.readSemiSync(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotReplicated, err)
	}
	if !before.covers(after) {
		return ErrNotReplicated
	}
	return nil
}

// ReplicaAcknowledging reports, from the last reading, whether a replica
// acknowledges commits (semi-sync on and at least one semi-sync replica
// connected) and how many are connected; known is false before any
// reading and after a failed one (on is then false).
func (s *Store) ReplicaAcknowledging() (on bool, clients int64, known bool) {
	return s.semi.on.Load(), s.semi.clients.Load(), s.semi.known.Load()
}

// PingReplica reads the semi-sync status and fails, saying why, while no
// replica acknowledges commits (the intake then answers 503). Without
// durability replica it reports nothing.
func (s *Store) PingReplica(ctx context.Context) error {
	if !s.replica {
		return nil
	}
	r, err := s.readSemiSync(ctx)
	if err != nil {
		return err
	}
	if !r.acknowledging() {
		status := "OFF"
		if r.on {
			status = "ON"
		}
		return fmt.Errorf("no replica acknowledges commits (Rpl_semi_sync_master_status %s, %d semi-sync replicas connected): callbacks are answered 503", status, r.clients)
	}
	return nil
}

// PingReplicaWithin is PingReplica bounded by d, the replica watcher's
// reading: a primary that does not answer within d (hung, or a network
// that drops everything) makes the reading unknown, not acknowledging,
// as a failed one does, where PingReplica under a context that ends keeps
// the last reading (the caller went away). ctx ending still changes
// nothing.
func (s *Store) PingReplicaWithin(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeoutCause(ctx, d, errReadingDeadline)
	defer cancel()
	return s.PingReplica(ctx)
}

// CheckReplication verifies at start that the primary replicates
// losslessly semi-synchronously, naming the setting that is missing.
func (s *Store) CheckReplication(ctx context.Context) error {
	vars := map[string]string{}
	rows, err := s.sql.QueryContext(ctx, `SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync_%'`)
	if err != nil {
		return fmt.Errorf("error reading semi-sync settings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return fmt.Errorf("error reading semi-sync settings: %w", err)
		}
		vars[strings.ToLower(strings.Replace(name, "_source_", "_master_", 1))] = value
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error reading semi-sync settings: %w", err)
	}
	const hint = " (mysql.durability: replica needs lossless semi-synchronous replication on the primary; README, \"Deployment\")"
	enabled, ok := vars["rpl_semi_sync_master_enabled"]
	switch {
	case !ok:
		return fmt.Errorf("%w: the server has no rpl_semi_sync_master_enabled (MariaDB 10.3+ has it built in; MySQL needs the semisync plugin)%s", ErrReplicationSettings, hint)
	case !strings.EqualFold(enabled, "ON"):
		return fmt.Errorf("%w: rpl_semi_sync_master_enabled is %s, want ON%s", ErrReplicationSettings, enabled, hint)
	}
	if wp := vars["rpl_semi_sync_master_wait_point"]; !strings.EqualFold(wp, "AFTER_SYNC") {
		return fmt.Errorf("%w: rpl_semi_sync_master_wait_point is %s, want AFTER_SYNC (AFTER_COMMIT shows a commit to other sessions before a replica has it)%s", ErrReplicationSettings, wp, hint)
	}
	return nil
}
