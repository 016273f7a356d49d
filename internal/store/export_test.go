package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"changeflow/internal/domain"
)

// Test-only access to unexported helpers for the external store_test
// package (which may import storetest; this package may not).

// Translate is translate.
func Translate(err error) error { return translate(err) }

// IsCheckViolation reports whether err is a CHECK constraint failure:
// MariaDB 4025 (ER_CONSTRAINT_FAILED), MySQL 8 3819
// (ER_CHECK_CONSTRAINT_VIOLATED), SQLite 275 (SQLITE_CONSTRAINT_CHECK).
// Production code has no use for it — an unknown enum value is a bug, a
// 500 — so it lives with the tests that tell it from other failures.
func IsCheckViolation(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 4025 || me.Number == 3819
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_CHECK
	}
	return false
}

// PreparedReads is how many prepared read statements s keeps (prepared.go).
func PreparedReads(s *Store) int {
	s.reads.mu.Lock()
	defer s.reads.mu.Unlock()
	return len(s.reads.stmts)
}

// ParseDBTime is parseDBTime, for the test that feeds it the database
// clock's own text on each dialect.
func ParseDBTime(s string) (time.Time, bool) { return parseDBTime(s) }

// OperationGetWithBinding is the full read of an operation and the binding
// naming it — every column of both rows, in one joined statement — that
// OperationViewGet narrows: the tests' reference for what the narrow read
// must return of the view's fields (operation_view_test.go). Production
// reads only the narrow one, so this lives with the tests, unprepared.
func (s *Store) OperationGetWithBinding(ctx context.Context, operationID string) (OperationWithBinding, error) {
	var (
		out                                OperationWithBinding
		bID, bVersion, bExpired            sql.NullInt64
		bSubject, bTarget, bStatus, bOpID  sql.NullString
		bExpiresAt, bCreatedAt, bUpdatedAt sql.NullTime
	)
	cols := strings.Split(operationColumns, ", ")
	for i, c := range cols {
		cols[i] = "o." + c
	}
	q := "SELECT " + strings.Join(cols, ", ") + ", " + s.dialect.bindingColumnsOf("b.") +
		" FROM operation o LEFT JOIN binding b ON b.operation_id = o.operation_id WHERE o.operation_id = ?"
	op, err := scanOperation(appendScan{s.db.QueryRowContext(ctx, q, operationID), []any{&bID, &bSubject, &bTarget, &bStatus, &bOpID,
		&bExpiresAt, &bVersion, &bCreatedAt, &bUpdatedAt, &bExpired}})
	if err != nil {
		return OperationWithBinding{}, fmt.Errorf("get operation %s with its binding: %w", operationID, translate(err))
	}
	out.Operation = op
	if bID.Valid {
		out.HasBinding = true
		out.Binding = Binding{
			ID: bID.Int64, Subject: bSubject.String, TargetKey: bTarget.String,
			Status: domain.BindingStatus(bStatus.String), OperationID: bOpID.String,
			ExpiresAt: bExpiresAt.Time, Version: bVersion.Int64,
			CreatedAt: bCreatedAt.Time, UpdatedAt: bUpdatedAt.Time, Expired: bExpired.Int64 == 1,
		}
	}
	return out, nil
}

// appendScan scans the columns its caller names, then extra: one row read
// by two scanners that each know only their own columns.
type appendScan struct {
	r     rowScanner
	extra []any
}

func (a appendScan) Scan(dest ...any) error {
	return a.r.Scan(append(dest, a.extra...)...)
}

// OperationRenewalsOfQuery is OperationRenewalsOf's statement, for the
// test that reads its plan.
func (s *Store) OperationRenewalsOfQuery() string { return s.operationRenewalsOfQuery() }

// OperationFindQuery is OperationFind's statement and arguments, for the
// plan test.
func (s *Store) OperationFindQuery(p OperationFindParams, limit int) (string, []any) {
	return s.operationFindQuery(p, limit)
}

// AccessBackfillSQL is the statement with which the migration that created
// access_interval rebuilt the periods from the step history (its one
// INSERT … SELECT), for driver.
func AccessBackfillSQL(driver string) (string, error) {
	b, err := migrationFiles.ReadFile("migrations/" + driver + "/00016_access_interval.sql")
	if err != nil {
		return "", err
	}
	text := string(b)
	start := strings.Index(text, "INSERT INTO access_interval")
	if start < 0 {
		return "", errors.New("no backfill in the migration")
	}
	end := strings.Index(text[start:], ";")
	return text[start : start+end], nil
}

// AccessAtTargetQuery is the statement AccessAtTarget sends, and
// AccessAtSubjectQuery AccessAtSubject's; each binds (key, at, at).
func (s *Store) AccessAtTargetQuery() string {
	return "SELECT " + accessColumns + s.accessAtQuery("target_key", "idx_access_interval_target", "subject")
}

// AccessAtSubjectQuery: see AccessAtTargetQuery.
func (s *Store) AccessAtSubjectQuery() string {
	return "SELECT " + accessColumns + s.accessAtQuery("subject", "idx_access_interval_subject", "target_key")
}

// AccessHistoryQuery is the statement AccessHistory sends; it binds
// (target, from, to, limit).
func (s *Store) AccessHistoryQuery() string {
	return "SELECT " + accessColumns + s.accessHistoryQuery()
}

// StepThenRollBack appends a step-history row of operationID moving its
// binding from → to, in a transaction that then fails: the outbox must
// keep no event of it.
func (s *Store) StepThenRollBack(ctx context.Context, operationID string, fromStep, toStep domain.StepStatus, from, to domain.BindingStatus) error {
	boom := errors.New("the change fails after its history was written")
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		if err := operationStepInsert(ctx, tx, s.dialect, []operationStepRow{{operationID: operationID,
			fromStep: int(fromStep), toStep: int(toStep), fromBinding: from, toBinding: to, actor: "test"}}); err != nil {
			return err
		}
		return boom
	})
	if errors.Is(err, boom) {
		return nil
	}
	return fmt.Errorf("want the planted failure, got %w", err)
}

// OutboxOfStepsAlone runs the outbox's part of a step-history append —
// what outboxOfSteps adds to the transaction of a move — in a transaction
// of its own, for the benchmark that prices it.
func (s *Store) OutboxOfStepsAlone(ctx context.Context, operationID string, fromStep, toStep domain.StepStatus, from, to domain.BindingStatus) error {
	return s.InTx(ctx, nil, func(tx *sql.Tx) error {
		return outboxOfSteps(ctx, tx, []operationStepRow{{operationID: operationID,
			fromStep: int(fromStep), toStep: int(toStep), fromBinding: from, toBinding: to, actor: "bench"}})
	})
}
