package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"changeflow/internal/domain"
)

// Operation is one request (one operationId) as stored in the operation
// table. Optional columns read as their zero value when NULL: 0 for ids and
// numbers, "" for text, the zero time.
type Operation struct {
	ID          int64
	OperationID string
	Subject     string
	TargetKey   string
	ProjectID   int64
	// Flow is "LEGACY" or "APPROVE_FIRST" (CHECK constraint).
	Flow string
	// Kind is GRANT, REVOKE or RENEW (domain.OperationKind; RENEW is
	// stored as GRANT with GrantOperationID set, see kindOf).
	Kind domain.OperationKind
	// GrantOperationID is, for a revocation, the grant whose entry it
	// removes; for a renewal, the grant it renews; "" for a grant.
	GrantOperationID string
	// RevokeReason is a revocation's reason; "" for a grant.
	RevokeReason domain.RevokeReason
	// ReviewItemID is, for the removal of an entry changeflow did not
	// write (domain.StartRepoRemoval), the review item whose revoke it
	// carries out; its GrantOperationID is then the operationId the entry
	// carries in the file, maybe "". 0 for every other operation.
	ReviewItemID int64
	// Step is the internal step code (docs/workflow.md, "Two layers of state" StepStatus). The store
	// treats it as an opaque int; the transition table lives in the domain.
	Step int
	// Version starts at 1 and grows by one with every write of Step (I6).
	Version    int64
	BatchID    int64
	MRIID      int64
	MRURL      string
	Branch     string
	ApprovalID string
	// MergeSHA is the merge commit of the operation's own MR, recorded
	// when a step found it merged (WorkFields.MergeSHA); "" before, for a
	// batch member that is not the batch's driver (merge_batch.merge_sha
	// holds the batch's), and for rows merged before migration 00021.
	MergeSHA       string
	Reason         string
	Days           int
	ExpiresAt      time.Time
	RequestHash    string
	NextAction     string
	DueAt          time.Time
	LeaseOwner     string
	LeaseExpiresAt time.Time
	Attempts       int
	LastError      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Duration is how long the operation's access was asked to last: Days
// whole days, or — for a row without days — from its creation to its
// expiry; 0 when it has no expiry. The renewal window is a share of it
// (domain.RenewWindow).
func (o Operation) Duration() time.Duration {
	if o.Days > 0 {
		return time.Duration(o.Days) * 24 * time.Hour
	}
	if o.ExpiresAt.IsZero() || !o.ExpiresAt.After(o.CreatedAt) {
		return 0
	}
	return o.ExpiresAt.Sub(o.CreatedAt)
}

// kindOf is the operation's kind as the domain sees it, read from the
// row aliased alias ("" for none): the stored kind, except that a GRANT
// naming a grant it renews (grant_operation_id) is a renewal,
// domain.OperationRenew. Derived rather than stored so the CHECK on
// operation.kind — and SQLite's operation table, which would have to be
// rebuilt to change it — stays as it is.
func kindOf(alias string) string {
	if alias != "" {
		alias += "."
	}
	return "CASE WHEN " + alias + "kind = 'GRANT' AND " + alias + "grant_operation_id IS NOT NULL THEN 'RENEW' ELSE " + alias + "kind END"
}

// operationColumns is the select list scanOperation reads, in order.
const operationColumns = "id, operation_id, subject, target_key, project_id, flow, kind, grant_operation_id, revoke_reason, step_status, version, " +
	"batch_id, mr_iid, mr_url, branch, approval_id, reason, days, expires_at, request_hash, " +
	"next_action, due_at, lease_owner, lease_expires_at, attempts, last_error, created_at, updated_at, merge_sha, review_item_id"

// rowScanner is what *sql.Row and *sql.Rows have in common.
type rowScanner interface {
	Scan(dest ...any) error
}

// scanOperation reads one row of operationColumns.
func scanOperation(r rowScanner) (Operation, error) {
	var (
		o                                                        Operation
		batchID, mrIID, days, reviewItem                         sql.NullInt64
		mrURL, branch, approvalID, nextAction, leaseOwner, lastE sql.NullString
		grantOp, revokeReason, mergeSHA                          sql.NullString
		expiresAt, dueAt, leaseExpiresAt                         sql.NullTime
	)
	err := r.Scan(&o.ID, &o.OperationID, &o.Subject, &o.TargetKey, &o.ProjectID, &o.Flow, &o.Kind, &grantOp, &revokeReason, &o.Step, &o.Version,
		&batchID, &mrIID, &mrURL, &branch, &approvalID, &o.Reason, &days, &expiresAt, &o.RequestHash,
		&nextAction, &dueAt, &leaseOwner, &leaseExpiresAt, &o.Attempts, &lastE, &o.CreatedAt, &o.UpdatedAt, &mergeSHA, &reviewItem)
	if err != nil {
		return Operation{}, err
	}
	o.ReviewItemID = reviewItem.Int64
	o.BatchID, o.MRIID, o.Days = batchID.Int64, mrIID.Int64, int(days.Int64)
	o.MRURL, o.Branch, o.ApprovalID = mrURL.String, branch.String, approvalID.String
	o.NextAction, o.LeaseOwner, o.LastError = nextAction.String, leaseOwner.String, lastE.String
	o.ExpiresAt, o.DueAt, o.LeaseExpiresAt = expiresAt.Time, dueAt.Time, leaseExpiresAt.Time
	o.GrantOperationID, o.RevokeReason = grantOp.String, domain.RevokeReason(revokeReason.String)
	o.MergeSHA = mergeSHA.String
	if o.Kind == domain.OperationGrant && o.GrantOperationID != "" {
		o.Kind = domain.OperationRenew // kindOf
	}
	return o, nil
}

// queryer is what *sql.DB and *sql.Tx have in common for the reads that run
// both inside a transaction and on their own.
type queryer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// OperationGet returns the operation with operationID, or an error wrapping
// domain.ErrNotFound.
func (s *Store) OperationGet(ctx context.Context, operationID string) (Operation, error) {
	o, err := scanOperation(s.queryRowPrepared(ctx, readOperationGet, operationGetQuery, operationID))
	if err != nil {
		return Operation{}, fmt.Errorf("get operation %s: %w", operationID, translate(err))
	}
	return o, nil
}

// operationGet is OperationGet inside a transaction (unprepared: a
// transaction's statements are not the hot reads).
func operationGet(ctx context.Context, q queryer, operationID string) (Operation, error) {
	return scanOperation(q.QueryRowContext(ctx, operationGetQuery(), operationID))
}

func operationGetQuery() string {
	return "SELECT " + operationColumns + " FROM operation WHERE operation_id = ?"
}

// OperationCreateParams is the validated request a new operation row holds.
type OperationCreateParams struct {
	OperationID string
	Subject     string
	TargetKey   string
	ProjectID   int64
	// Flow is "LEGACY" or "APPROVE_FIRST".
	Flow string
	// Step is the initial step code, e.g. CREATE_STARTED.
	Step   int
	Reason string
	// Days is the requested duration; 0 stores NULL (not given).
	Days int
	// ExpiresAt is when the binding lapses; zero stores NULL.
	ExpiresAt   time.Time
	RequestHash string
	// Actor is recorded in the first step-history row (instance or person).
	Actor string
	// NextAction, when set, schedules the workflow's first action in the
	// same transaction, due at once (DB clock): durable from the moment the
	// request exists. A submission that schedules work must start
	// from the transition table's entry row (domain.CheckEntry).
	NextAction string
}

func (p OperationCreateParams) validate() error {
	switch {
	case p.OperationID == "" || p.Subject == "" || p.TargetKey == "":
		return errors.New("operationId, subject and target are required")
	case utf8.RuneCountInString(p.OperationID) > maxOperationIDLen:
		return fmt.Errorf("operationId longer than %d characters", maxOperationIDLen)
	case p.Step <= 0:
		return fmt.Errorf("step code %d is not a step", p.Step)
	case p.NextAction != "" && utf8.RuneCountInString(p.NextAction) > 64:
		return fmt.Errorf("next action %q longer than 64 characters", p.NextAction)
	case p.NextAction != "":
		return domain.CheckStep(domain.StepNone, domain.StepStatus(p.Step))
	}
	return nil
}

// maxOperationIDLen is operation.operation_id's VARCHAR length. MariaDB
// (strict mode) refuses a longer value and SQLite would store it, so the
// store checks it for both.
const maxOperationIDLen = 64

// OperationCreate inserts a new operation in p.Step, with version 1, and its
// first step-history row, in one transaction. An operationId that already
// exists is an error wrapping domain.ErrDuplicate: the caller answers it
// through the idempotency record, which knows the winner.
//
// Most callers want OperationSubmit, which also applies the binding.
func (s *Store) OperationCreate(ctx context.Context, p OperationCreateParams) (Operation, error) {
	if err := p.validate(); err != nil {
		return Operation{}, fmt.Errorf("create operation: %w", err)
	}
	var o Operation
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		if err := operationInsert(ctx, tx, s.dialect, p); err != nil {
			return err
		}
		if err := operationStepInsert(ctx, tx, s.dialect, []operationStepRow{{
			operationID: p.OperationID, toStep: p.Step, actor: p.Actor, note: "created",
		}}); err != nil {
			return err
		}
		var err error
		o, err = operationGet(ctx, tx, p.OperationID)
		return err
	})
	if err != nil {
		return Operation{}, fmt.Errorf("create operation %s: %w", p.OperationID, err)
	}
	return o, nil
}

// operationInsert writes the operation row of p (version 1, DB-clock times).
func operationInsert(ctx context.Context, tx *sql.Tx, d Dialect, p OperationCreateParams) error {
	var days any
	if p.Days != 0 {
		days = p.Days
	}
	var action any
	due, dueArg := "NULL", any(nil)
	if p.NextAction != "" {
		action = p.NextAction
		due, dueArg = d.NowAdd(0)
	}
	_, err := tx.ExecContext(ctx,
		"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, reason, days, expires_at, request_hash, next_action, due_at) "+
			"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "+due+")",
		append([]any{p.OperationID, p.Subject, p.TargetKey, p.ProjectID, p.Flow, p.Step,
			clipRunes(p.Reason, 1024), days, d.Time(p.ExpiresAt), p.RequestHash, action}, nonNil(dueArg)...)...)
	if err != nil {
		return fmt.Errorf("insert operation: %w", translate(err))
	}
	return nil
}

// OperationStep is one row of an operation's step history: every change of
// its step, and of its binding's status when a transition moved both.
type OperationStep struct {
	ID          int64
	OperationID string
	// FromStep is 0 on the row that created the operation.
	FromStep int
	ToStep   int
	// FromBinding and ToBinding are "" when the binding did not change.
	FromBinding domain.BindingStatus
	ToBinding   domain.BindingStatus
	Actor       string
	Note        string
	CreatedAt   time.Time
}

// OperationStepList returns the step history of operationID, oldest first
// (the ops detail page). An unknown operation has an empty history.
func (s *Store) OperationStepList(ctx context.Context, operationID string) ([]OperationStep, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT id, operation_id, from_step, to_step, from_binding_status, to_binding_status, actor, note, created_at "+
			"FROM operation_step WHERE operation_id = ? ORDER BY id", operationID)
	if err != nil {
		return nil, fmt.Errorf("list steps of %s: %w", operationID, translate(err))
	}
	defer rows.Close()
	var out []OperationStep
	for rows.Next() {
		var (
			st         OperationStep
			from       sql.NullInt64
			fromB, toB sql.NullString
		)
		if err := rows.Scan(&st.ID, &st.OperationID, &from, &st.ToStep, &fromB, &toB, &st.Actor, &st.Note, &st.CreatedAt); err != nil {
			return nil, fmt.Errorf("list steps of %s: %w", operationID, err)
		}
		st.FromStep = int(from.Int64)
		st.FromBinding, st.ToBinding = domain.BindingStatus(fromB.String), domain.BindingStatus(toB.String)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list steps of %s: %w", operationID, translate(err))
	}
	return out, nil
}

// operationStepRow is one history row to append.
type operationStepRow struct {
	operationID            string
	fromStep               int // 0 → NULL
	toStep                 int
	fromBinding, toBinding domain.BindingStatus // "" → NULL
	actor, note            string
	// approval: the row records the approval system's decision, which the
	// outbox tells of as an approval (notify.Move.Approval); not stored.
	approval bool
}

// operationStepColumns is the number of values one operationStepRow binds.
const operationStepColumns = 7

// operationStepInsert appends rows to operation_step with one multi-row
// INSERT per chunk, so a transition of n operations costs ⌈n/500⌉
// statements, not n.
//
// When a row changes the access history (accessChanges), the database
// clock is read once first and written as every row's created_at, and
// the periods the rows open or end start or end at that very instant
// (accessRecord): the period's from is its confirmation's history time,
// as the migration that created access_interval rebuilt it.
func operationStepInsert(ctx context.Context, tx *sql.Tx, d Dialect, rows []operationStepRow) error {
	change := accessChanges(rows)
	var at any
	cols, colList := operationStepColumns, "operation_id, from_step, to_step, from_binding_status, to_binding_status, actor, note"
	if len(change) > 0 {
		now, err := txNow(ctx, tx, d)
		if err != nil {
			return fmt.Errorf("append step history: %w", err)
		}
		at, cols, colList = d.Time(now), cols+1, colList+", created_at"
	}
	for _, part := range chunk(rows, InChunkSize) {
		vals := make([]any, 0, len(part)*cols)
		for _, r := range part {
			vals = append(vals, r.operationID, nullInt(r.fromStep), r.toStep,
				nullStatus(r.fromBinding), nullStatus(r.toBinding), clipRunes(r.actor, 128), clipRunes(r.note, 512))
			if at != nil {
				vals = append(vals, at)
			}
		}
		_, err := tx.ExecContext(ctx,
			"INSERT INTO operation_step ("+colList+") VALUES "+valuesRows(len(part), cols), vals...)
		if err != nil {
			return fmt.Errorf("append step history: %w", translate(err))
		}
	}
	if len(change) > 0 {
		// The access history follows the binding moves these rows record,
		// in the same transaction (access_record.go).
		if err := accessRecord(ctx, tx, d, change, at); err != nil {
			return err
		}
	}
	// So do the notifications: the events these rows tell of (outbox.go).
	return outboxOfSteps(ctx, tx, rows)
}

// nonNil returns v as a one-element argument list, or none when v is nil.
func nonNil(v any) []any {
	if v == nil {
		return nil
	}
	return []any{v}
}

// nullInt binds 0 as NULL.
func nullInt(v int) any {
	if v == 0 {
		return nil
	}
	return v
}

// nullStatus binds "" as NULL.
func nullStatus(s domain.BindingStatus) any {
	if s == "" {
		return nil
	}
	return string(s)
}

// clipRunes cuts s to at most n characters, the unit VARCHAR(n) counts on
// MariaDB, without splitting a UTF-8 sequence. Free-text columns (notes,
// reasons) are clipped rather than refused: losing the tail of a note is
// better than failing the transition it describes.
func clipRunes(s string, n int) string { return domain.ClipRunes(s, n) }
