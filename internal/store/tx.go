package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// InTx runs fn in one transaction: it commits when fn returns nil and rolls
// back when fn returns an error or panics (the panic continues after the
// rollback). Errors come back translated (domain.ErrDuplicate, ErrBusy, …)
// with the driver error still in the chain.
//
// A failed statement inside fn does not doom the transaction on either
// driver — a duplicate key can be caught and the transaction committed.
// opts may be nil. On SQLite the isolation level is ignored
// (every transaction is serializable) and a read-only transaction begins
// DEFERRED, so it does not take the write lock.
//
// When the database rolls the transaction back as a deadlock victim or,
// on Galera, because it lost certification to another node (1213, at any
// statement or at COMMIT), InTx runs fn again in a new transaction, with a
// jittered pause, up to conflictAttempts times (retryConflict); then the
// error wraps domain.ErrBusy. So fn may run more than once: it must only
// assign what it shares with its caller, never accumulate.
func (s *Store) InTx(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	return retryConflict(ctx, func() error { return s.inTxOnce(ctx, opts, fn) })
}

// inTxOnce is one attempt of InTx.
func (s *Store) inTxOnce(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) (err error) {
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", translate(err))
	}
	defer func() {
		if p := recover(); p != nil {
			_ = tx.Rollback()
			panic(p)
		}
	}()
	if err := fn(tx); err != nil {
		if rbErr := tx.Rollback(); rbErr != nil && !errors.Is(rbErr, sql.ErrTxDone) {
			return errors.Join(translate(err), fmt.Errorf("rollback: %w", rbErr))
		}
		return translate(err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", translate(err))
	}
	return nil
}
