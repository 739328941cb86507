package store

import (
	"context"
	"errors"

	"gorm.io/gorm"
)

// Tx is a transaction of the store: the callers' handle for the ...Tx
// operations, and a handler's way to its business tables (Gorm).
type Tx struct{ g *gorm.DB }

// Gorm is the transaction for the handler's own (business) tables, which
// commit or roll back with the callback's status.
func (tx *Tx) Gorm() *gorm.DB { return tx.g }

// InTx runs fn in one transaction (READ COMMITTED, the session's level:
// locking reads lock the rows they return and no gaps) and commits it when
// fn returns nil. A driver error is translated; fn's own errors are
// returned as they are.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	var fnErr error
	err := s.db.WithContext(ctx).Transaction(func(g *gorm.DB) error {
		fnErr = fn(&Tx{g: g})
		return fnErr
	})
	if err == nil || (fnErr != nil && errors.Is(err, fnErr)) {
		return err
	}
	return translate(err) // BEGIN or COMMIT failed
}

// q is the connection an operation runs on: tx's when it is given, the
// pool's otherwise.
func (s *Store) q(ctx context.Context, tx *Tx) *gorm.DB {
	if tx != nil {
		return tx.g.WithContext(ctx)
	}
	return s.db.WithContext(ctx)
}
