package store

// ReadBackIDs makes b learn its rows' ids with a read-back query after the
// INSERT, as it does on a server without INSERT ... RETURNING (MySQL), so
// that the tests cover both ways on MariaDB.
func ReadBackIDs(b *Batcher) { b.returning.Store(returningNo) }
