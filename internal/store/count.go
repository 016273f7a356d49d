package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// StmtCount counts what a store's connections send to the server, at the
// database/sql driver boundary: every statement executed (direct or through
// a prepared statement), every prepare, every transaction begun. Counting
// below database/sql means no call site can forget to count, and a
// statement database/sql splits into prepare + execute (MariaDB without
// interpolateParams) is one statement and one prepare.
type StmtCount struct {
	stmts, prepares, txs atomic.Int64
}

// Snapshot returns the counts so far.
func (c *StmtCount) Snapshot() (stmts, prepares, txs int64) {
	return c.stmts.Load(), c.prepares.Load(), c.txs.Load()
}

// OpenCounting opens a store on dsn like Open (same enforced DSN settings,
// same pool sizes for a default Open), through a connector that counts
// into the returned StmtCount. Benchmarks only.
func OpenCounting(ctx context.Context, driverName, dsn string) (*Store, *StmtCount, error) {
	o := options{
		logger:             slog.New(slog.DiscardHandler),
		migrateLockTimeout: 2 * time.Minute,
		lockWaitTimeout:    10 * time.Second,
	}
	var inner driver.Connector
	switch driverName {
	case DriverMySQL:
		cfg, err := mysqlConfig(dsn, o)
		if err != nil {
			return nil, nil, err
		}
		if inner, err = mysql.NewConnector(cfg); err != nil {
			return nil, nil, err
		}
	case DriverSQLite:
		full, _, _, err := sqliteDSN(dsn)
		if err != nil {
			return nil, nil, err
		}
		tmp, err := sql.Open(DriverSQLite, full)
		if err != nil {
			return nil, nil, err
		}
		inner = dsnConnector{drv: tmp.Driver(), dsn: full}
		_ = tmp.Close()
	default:
		return nil, nil, fmt.Errorf("unknown driver %q", driverName)
	}
	count := &StmtCount{}
	db := sql.OpenDB(countingConnector{inner: inner, n: count})
	if driverName == DriverMySQL {
		db.SetMaxOpenConns(20)
		db.SetMaxIdleConns(10)
	} else {
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(8)
	}
	s := &Store{db: db, dialect: Dialect{name: driverName}, opts: o}
	var err error
	if s.provider, err = s.newProvider(); err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	if err := s.Ping(ctx); err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return s, count, nil
}

// dsnConnector adapts a driver without OpenConnector (modernc sqlite).
type dsnConnector struct {
	drv driver.Driver
	dsn string
}

func (c dsnConnector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c dsnConnector) Driver() driver.Driver                        { return c.drv }

type countingConnector struct {
	inner driver.Connector
	n     *StmtCount
}

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{inner: conn, n: c.n}, nil
}

func (c countingConnector) Driver() driver.Driver { return c.inner.Driver() }

// countingConn forwards every optional interface database/sql looks for,
// so that wrapping changes nothing but the counts.
type countingConn struct {
	inner driver.Conn
	n     *StmtCount
}

func (c *countingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var (
		st  driver.Stmt
		err error
	)
	if p, ok := c.inner.(driver.ConnPrepareContext); ok {
		st, err = p.PrepareContext(ctx, query)
	} else {
		st, err = c.inner.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	c.n.prepares.Add(1)
	return &countingStmt{inner: st, n: c.n}, nil
}

func (c *countingConn) Close() error { return c.inner.Close() }

func (c *countingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.n.txs.Add(1)
	if b, ok := c.inner.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	//lint:ignore SA1019 the fallback for drivers without BeginTx
	return c.inner.Begin()
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	e, ok := c.inner.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	res, err := e.ExecContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.n.stmts.Add(1) // ErrSkip: database/sql prepares instead, counted there
	}
	return res, err
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := c.inner.(driver.QueryerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	rows, err := q.QueryContext(ctx, query, args)
	if !errors.Is(err, driver.ErrSkip) {
		c.n.stmts.Add(1)
	}
	return rows, err
}

func (c *countingConn) Ping(ctx context.Context) error {
	if p, ok := c.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c *countingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if v, ok := c.inner.(driver.NamedValueChecker); ok {
		return v.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (c *countingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c *countingConn) IsValid() bool {
	if v, ok := c.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

type countingStmt struct {
	inner driver.Stmt
	n     *StmtCount
}

func (s *countingStmt) Close() error  { return s.inner.Close() }
func (s *countingStmt) NumInput() int { return s.inner.NumInput() }

func (s *countingStmt) Exec(args []driver.Value) (driver.Result, error) {
	s.n.stmts.Add(1)
	//lint:ignore SA1019 driver.Stmt requires it
	return s.inner.Exec(args)
}

func (s *countingStmt) Query(args []driver.Value) (driver.Rows, error) {
	s.n.stmts.Add(1)
	//lint:ignore SA1019 driver.Stmt requires it
	return s.inner.Query(args)
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	e, ok := s.inner.(driver.StmtExecContext)
	if !ok {
		return nil, errors.New("counting driver: statement lacks ExecContext")
	}
	s.n.stmts.Add(1)
	return e.ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	q, ok := s.inner.(driver.StmtQueryContext)
	if !ok {
		return nil, errors.New("counting driver: statement lacks QueryContext")
	}
	s.n.stmts.Add(1)
	return q.QueryContext(ctx, args)
}

func (s *countingStmt) CheckNamedValue(nv *driver.NamedValue) error {
	if v, ok := s.inner.(driver.NamedValueChecker); ok {
		return v.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}
