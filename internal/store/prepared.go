package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// preparedReads keeps one *sql.Stmt per read for the store's hottest
// reads on SQLite — the status read's, which every person's browser
// repeats — so that a read is one execution instead of a parse, an
// execution and a finalize: the parser was about a third of a status
// read's CPU (docs/benchmarks.md, "Status read").
//
// database/sql prepares a *sql.Stmt lazily on each pooled connection it
// runs on and forgets it with the connection, so nothing is prepared while
// the store is idle. SQLite re-prepares a statement by itself when a
// migration changed the schema under it. Only a small, fixed set of reads
// goes through here (readKey), never a query built from input, so the map
// stays that small.
//
// MariaDB/MySQL reads are not prepared: the store sends only text
// statements there (interpolateParams, dsn.go), because on Galera a
// server-side prepared statement's COM_STMT_CLOSE could lose a brute-force
// abort; a text statement is already a single round trip.
type preparedReads struct {
	mu     sync.Mutex
	stmts  map[readKey]*sql.Stmt
	closed bool
}

// readKey names one prepared read; its query text is built once, at the
// first prepare, so a read does not even pay for building the text.
type readKey int

const (
	readOperationGet readKey = iota + 1
	readBindingByOperation
	readOperationView
)

// errStoreClosed: a prepared read after Close.
var errStoreClosed = errors.New("store closed")

// prepared returns the statement of key, preparing query() on first use.
// Preparing happens outside the lock (it is a round trip); of two callers
// that raced, the second closes its copy.
func (s *Store) prepared(ctx context.Context, key readKey, query func() string) (*sql.Stmt, error) {
	p := &s.reads
	p.mu.Lock()
	st, ok := p.stmts[key]
	closed := p.closed
	p.mu.Unlock()
	switch {
	case closed:
		return nil, errStoreClosed
	case ok:
		return st, nil
	}
	fresh, err := s.db.PrepareContext(ctx, query())
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = fresh.Close()
		return nil, errStoreClosed
	}
	if st, ok := p.stmts[key]; ok {
		_ = fresh.Close()
		return st, nil
	}
	if p.stmts == nil {
		p.stmts = map[readKey]*sql.Stmt{}
	}
	p.stmts[key] = fresh
	return fresh, nil
}

// queryRowPrepared is QueryRowContext through the prepared statement of
// key on SQLite, and a text statement on MariaDB/MySQL. A failure to prepare comes back from the row's Scan, as a query's
// own failure does from QueryRowContext.
func (s *Store) queryRowPrepared(ctx context.Context, key readKey, query func() string, args ...any) rowScanner {
	if s.dialect.IsMySQL() {
		return s.db.QueryRowContext(ctx, query(), args...)
	}
	st, err := s.prepared(ctx, key, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// errRow is a row whose Scan fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// closeAll closes every prepared statement; later reads fail.
func (p *preparedReads) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, st := range p.stmts {
		_ = st.Close()
	}
	p.stmts = nil
}
