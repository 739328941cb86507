package store

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
