package store

import (
	"context"
	"time"
)

// ReadBackIDs makes b learn its rows' ids with a read-back query after the
// INSERT, as it does on a server without INSERT ... RETURNING (MySQL), so
// that the tests cover both ways on MariaDB.
func ReadBackIDs(b *Batcher) { b.returning.Store(returningNo) }

// SemiSyncReading sets the last semi-sync reading, as a good one would.
func SemiSyncReading(s *Store, on bool, clients int64) {
	s.semi.on.Store(on)
	s.semi.clients.Store(clients)
	s.semi.known.Store(true)
}

// CloseSQL closes the store's pool under it, so that every reading fails.
func CloseSQL(s *Store) { _ = s.sql.Close() }

// PendingFloor reads the days a PENDING callback can be on again now, as
// every statement that names them does when the last reading is old
// enough, and returns the earliest day they name (zero: none).
func PendingFloor(s *Store) time.Time {
	s.floor.at.Store(0)
	r := s.pendingDays(context.Background())
	if len(r.args) == 0 {
		return time.Time{}
	}
	d, err := time.Parse(time.DateOnly, r.args[0].(string))
	if err != nil {
		panic(err)
	}
	return d
}

// SetPendingFloor makes s name day as the earliest day a PENDING callback
// can be on until it reads it again (pendingFloorEvery).
func SetPendingFloor(s *Store, day time.Time) {
	s.floor.day.Store(day.Unix() / 86400)
	s.floor.at.Store(time.Now().UnixNano())
}
