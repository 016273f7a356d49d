package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"changeflow/internal/domain"
)

// RevocationRow is one revocation to create: the candidate, and whether
// its target batches (then the revocation joins the project's waiting set;
// otherwise create_mr is due at once, on a single-request MR).
type RevocationRow struct {
	RevocationCandidate
	Batching bool
}

// RevocationCreateParams creates the revocations of Rows, all for Reason.
type RevocationCreateParams struct {
	Reason domain.RevokeReason
	// Text is stored as the revocation's reason text (the operator's
	// reason; a fixed sentence for the scan and the owner).
	Text  string
	Actor string
	// SingleAction is the first action of a revocation on a target
	// without batching (the workflow's create_mr).
	SingleAction string
	// RenewalAction, when set, is made due at once on every renewal cut
	// off while it waited for its approval (the workflow's withdraw: the
	// approval is withdrawn in the approval system, durably — a step of
	// the engine, retried — rather than by a call inside this
	// transaction). Empty: nothing due on a cut renewal.
	RenewalAction string
	Rows          []RevocationRow
}

// RevocationCreated is a revocation this call created.
type RevocationCreated struct {
	OperationID      string
	GrantOperationID string
	Subject          string
	TargetKey        string
	ExpiresAt        time.Time
	Batching         bool
	// Renewal is the renewal this revocation cut off ("" for none).
	Renewal string
}

// RevocationCreate creates the revocation of every row, exactly once
// whoever else tries at the same time (overlapping expiry scans on several
// instances, the owner's give-back, an operator), in one transaction per
// chunk of at most InChunkSize rows and a fixed number of statements per
// chunk — nothing is issued per binding:
//
//  1. the guarded binding UPDATE: every row still VALIDATED at the version
//     read moves to REVOKING and is handed to its revocation's operationId
//     (domain.RevocationID, derived from the grant's). A binding another
//     path moved meanwhile (re-applied, revoked by a racing scan) is not
//     matched. From here the grant no longer owns the row, so its late
//     callbacks are stale;
//  2. which of the chunk's bindings now point at a revocation whose
//     operation does not exist yet: exactly the ones step 1 moved (a
//     racing creator commits its operations with its binding move, and
//     this UPDATE waited for that commit);
//  3. one multi-row INSERT of those operations (kind REVOKE, the grant,
//     the reason, flow APPROVE_FIRST: no approval is asked to lose
//     access), their step history (REVOKE_STARTED, VALIDATED → REVOKING;
//     for a batching target also REVOKE_STARTED → CREATE_ADMITTED), the
//     batching ones' admission to the waiting set, and create_mr due now
//     (database clock) for the others.
//
// The operation's unique key is the last line of defence: two creators
// that somehow both got past step 1 collide there and one transaction
// rolls back whole. It returns the revocations this call created.
func (s *Store) RevocationCreate(ctx context.Context, p RevocationCreateParams) ([]RevocationCreated, error) {
	if p.SingleAction == "" {
		return nil, errors.New("create revocations: the single-request action is required")
	}
	if !p.Reason.Valid() {
		return nil, fmt.Errorf("create revocations: reason %q is not one of %v", p.Reason, domain.RevokeReasons)
	}
	checks := []error{domain.CheckRevocationStart()}
	for _, r := range p.Rows {
		if r.Renewal != "" {
			_, err := domain.CutRenewal(domain.StepStatus(r.RenewalStep), p.Reason, r.GrantOperationID, r.Renewal)
			checks = append(checks, err)
		}
	}
	if err := errors.Join(checks...); err != nil {
		return nil, fmt.Errorf("create revocations: %w", err)
	}
	var out []RevocationCreated
	for _, part := range chunk(p.Rows, InChunkSize) {
		var created []RevocationCreated
		err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
			var err error
			created, err = revocationCreateTx(ctx, tx, s.dialect, p, part)
			return err
		})
		if err != nil {
			return out, fmt.Errorf("create revocations: %w", err)
		}
		out = append(out, created...)
	}
	return out, nil
}

func revocationCreateTx(ctx context.Context, tx *sql.Tx, d Dialect, p RevocationCreateParams, rows []RevocationRow) ([]RevocationCreated, error) {
	// 0. Renewals cut off (expiry wins over a renewal with no MR yet):
	// operation rows first, the fixed lock order. Each is guarded on the
	// step and version read and on having no MR, so a renewal whose
	// approval arrived meanwhile is not cut here: the chunk rolls back
	// whole (ErrPreempted) and the next scan reads again and decides on
	// its new place (domain.ExpiryCutOf: in the batch set, cut there; its
	// own MR, withdrawn). An approval decided later finds the row no
	// longer the renewal's: stale.
	cutHist, admitted, err := renewalsCut(ctx, tx, d, p, rows)
	if err != nil {
		return nil, err
	}

	// 1. The guarded binding move.
	var cases strings.Builder
	caseArgs := make([]any, 0, 2*len(rows))
	keyArgs := make([]any, 0, 2*len(rows))
	ids := make([]any, 0, len(rows))
	byID := make(map[int64]RevocationRow, len(rows))
	byRev := make(map[string]RevocationRow, len(rows))
	for _, r := range rows {
		byRev[domain.RevocationID(r.GrantOperationID)] = r
		cases.WriteString(" WHEN ? THEN ?")
		caseArgs = append(caseArgs, r.BindingID, domain.RevocationID(r.GrantOperationID))
		keyArgs = append(keyArgs, r.BindingID, r.BindingVersion)
		ids = append(ids, r.BindingID)
		byID[r.BindingID] = r
	}
	args := append(append(append([]any{string(domain.BindingRevoking)}, caseArgs...), string(domain.BindingValidated), string(domain.BindingRenewing)), keyArgs...)
	// The status guard must not choose the plan: on SQLite "status = ?"
	// would lead the planner to idx_binding_status_* and every VALIDATED
	// row, so it is written "+status" (no index for that term) and the
	// (id, version) probes use the primary key; MariaDB's plan is pinned
	// by the FORCE INDEX hint.
	res, err := tx.ExecContext(ctx,
		"UPDATE binding "+d.PrimaryKeyHint()+" SET status = ?, operation_id = CASE id"+cases.String()+" END, version = version + 1"+
			" WHERE "+plainTerm(d, "status")+" IN (?, ?) AND "+d.keyTuplesIn(len(rows), "id", "version"), args...)
	if err != nil {
		return nil, fmt.Errorf("move bindings to REVOKING: %w", translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		if err == nil && len(cutHist) > 0 {
			// The renewals were cut but no binding moved: their rows
			// changed in between; undo by rolling back.
			err = fmt.Errorf("bindings under renewal moved meanwhile: %w", domain.ErrPreempted)
		}
		return nil, err
	}
	if len(cutHist) > 0 && n != int64(len(rows)) {
		return nil, fmt.Errorf("%d of %d bindings under renewal moved: %w", n, len(rows), domain.ErrPreempted)
	}
	// 1b. Renewals cut off in the batch set leave it, guarded as a
	// withdrawal is (lock order operation → binding → waiting-set row):
	// a round that claimed one first (batch_id set) wins, and this whole
	// chunk rolls back — the renewal goes out with its batch.
	if len(admitted) > 0 {
		gone, err := execCount(ctx, tx, "DELETE FROM merge_batch_request WHERE batch_id IS NULL AND operation_id IN ("+
			placeholders(len(admitted))+")", anySlice(admitted)...)
		if err != nil {
			return nil, fmt.Errorf("take renewals out of the waiting set: %w", err)
		}
		if gone != int64(len(admitted)) {
			return nil, fmt.Errorf("%d of %d renewals were claimed by a batch round: %w", int64(len(admitted))-gone, len(admitted), ErrRenewalClaimed)
		}
	}

	// 2. Which moved bindings still lack their revocation: this call's.
	mine, err := revocationsMine(ctx, tx, d, ids, byID)
	if err != nil || len(mine) == 0 {
		return nil, err
	}
	// 3. The operations, their history, their admission or first action.
	if err := revocationsInsert(ctx, tx, d, p, mine, byRev, cutHist); err != nil {
		return nil, err
	}
	return mine, nil
}

// plainTerm is col written so that SQLite's planner does not choose an
// index for the term ("+col"); MariaDB's plan is pinned by its hints.
func plainTerm(d Dialect, col string) string {
	if d.IsMySQL() {
		return col
	}
	return "+" + col
}

// revocationsMine reads which of the bindings ids (moved to REVOKING by
// this transaction or by a racing creator that committed first) still
// lack their revocation and are owned by the revocation of the row byID
// names: exactly the revocations this call creates.
func revocationsMine(ctx context.Context, tx *sql.Tx, d Dialect, ids []any, byID map[int64]RevocationRow) ([]RevocationCreated, error) {
	q, err := tx.QueryContext(ctx,
		"SELECT b.id, b.operation_id FROM binding b WHERE b.id IN ("+placeholders(len(ids))+") AND "+plainTerm(d, "b.status")+" = ?"+
			" AND NOT EXISTS (SELECT 1 FROM operation o WHERE o.operation_id = b.operation_id)",
		append(ids, string(domain.BindingRevoking))...)
	if err != nil {
		return nil, fmt.Errorf("read moved bindings: %w", translate(err))
	}
	var mine []RevocationCreated
	for q.Next() {
		var (
			id    int64
			revID string
		)
		if err := q.Scan(&id, &revID); err != nil {
			q.Close()
			return nil, err
		}
		r := byID[id]
		if revID != domain.RevocationID(r.GrantOperationID) {
			continue // owned by some other revocation: not this call's
		}
		mine = append(mine, RevocationCreated{OperationID: revID, GrantOperationID: r.GrantOperationID,
			Subject: r.Subject, TargetKey: r.TargetKey, ExpiresAt: r.ExpiresAt, Batching: r.Batching, Renewal: r.Renewal})
	}
	if err := errors.Join(q.Err(), q.Close()); err != nil {
		return nil, fmt.Errorf("read moved bindings: %w", translate(err))
	}
	return mine, nil
}

// revocationsInsert writes the revocations mine, as domain.StartRevocation
// begins each: one multi-row INSERT, their step history with the
// renewals' cut (cutHist), the first action of the single-request ones
// due now and the batching ones admitted to their project's waiting set.
func revocationsInsert(ctx context.Context, tx *sql.Tx, d Dialect, p RevocationCreateParams, mine []RevocationCreated, byRev map[string]RevocationRow, cutHist []operationStepRow) error {
	const cols = 12
	vals := make([]any, 0, cols*len(mine))
	var hist []operationStepRow
	var admit, single []string
	projects := map[string]int64{}
	for _, m := range mine {
		r := byRev[m.OperationID]
		start := domain.StartRevocation(m.GrantOperationID, p.Reason, m.Batching, r.Renewal)
		for _, h := range start.History {
			hist = append(hist, stepRowOf(m.OperationID, p.Actor, h))
		}
		if start.Admit {
			admit = append(admit, m.OperationID)
			projects[m.OperationID] = r.ProjectID
		} else {
			single = append(single, m.OperationID)
		}
		vals = append(vals, m.OperationID, m.Subject, m.TargetKey, r.ProjectID, "APPROVE_FIRST",
			string(domain.OperationRevoke), m.GrantOperationID, string(p.Reason), int(start.Step), start.Version,
			clipRunes(p.Text, 1024), d.Time(m.ExpiresAt))
	}
	if _, err := tx.ExecContext(ctx,
		"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, kind, grant_operation_id, revoke_reason, step_status, version, reason, expires_at) VALUES "+
			valuesRows(len(mine), cols), vals...); err != nil {
		return fmt.Errorf("insert revocations: %w", translate(err))
	}
	if err := operationStepInsert(ctx, tx, d, append(hist, cutHist...)); err != nil {
		return err
	}
	if len(single) > 0 {
		due, dueArg := d.NowAdd(0)
		a := append([]any{p.SingleAction, dueArg}, anySlice(single)...)
		if _, err := tx.ExecContext(ctx, "UPDATE operation"+d.forceIndex("uk_operation_operation_id")+
			" SET next_action = ?, due_at = "+due+" WHERE operation_id IN ("+placeholders(len(single))+")", a...); err != nil {
			return fmt.Errorf("schedule removals: %w", translate(err))
		}
	}
	byProject := map[int64][]string{}
	for _, id := range admit {
		byProject[projects[id]] = append(byProject[projects[id]], id)
	}
	for project, ids := range byProject {
		if err := batchAdmitMany(ctx, tx, ids, project); err != nil {
			return err
		}
	}
	return nil
}

// ErrRenewalClaimed: a renewal that a give-back or an operator's
// revocation would have taken out of the batch set was claimed by a batch
// round first; it goes out with that batch's MR. It wraps
// domain.ErrPreempted (nothing was written).
var ErrRenewalClaimed = fmt.Errorf("the renewal was claimed by a batch round: %w", domain.ErrPreempted)

// stepRowOf is the step-history row of operationID for move m.
func stepRowOf(operationID, actor string, m domain.StepMove) operationStepRow {
	return operationStepRow{operationID: operationID, fromStep: int(m.From), toStep: int(m.To),
		fromBinding: m.FromBinding, toBinding: m.ToBinding, actor: actor, note: m.Note}
}

// renewalsCut ends the renewals of rows (those naming one) at
// domain.CutRenewal's step with no lease, in one guarded UPDATE per place: those
// waiting for their approval (step in domain.RenewalCuttable, no MR) with
// p.RenewalAction due at once, those in the batch set (CREATE_ADMITTED)
// with nothing due — whether a round has claimed one is its waiting row's
// batch_id, tested by the take-out after the binding move, which then
// rolls the chunk back (operation.batch_id still names the last batch of
// a member re-admitted to the set, so it decides nothing here). Any renewal that moved since it was read
// fails the chunk (ErrPreempted). It returns their history rows, written
// with the revocations', and the renewals to take out of the waiting set
// once the bindings moved (the lock order).
func renewalsCut(ctx context.Context, tx *sql.Tx, d Dialect, p RevocationCreateParams, rows []RevocationRow) ([]operationStepRow, []string, error) {
	var (
		toStep            domain.StepStatus
		waitKeys, admKeys []any
		admitted          []string
		hist              []operationStepRow
	)
	for _, r := range rows {
		if r.Renewal == "" {
			continue
		}
		cut, err := domain.CutRenewal(domain.StepStatus(r.RenewalStep), p.Reason, r.GrantOperationID, r.Renewal)
		if err != nil {
			return nil, nil, err
		}
		toStep = cut.To // the same for every row: it depends on the reason alone
		hist = append(hist, stepRowOf(r.Renewal, p.Actor, domain.StepMove{From: domain.StepStatus(r.RenewalStep), To: cut.To, Note: cut.Note}))
		if cut.InBatchSet {
			admKeys, admitted = append(admKeys, r.Renewal, r.RenewalVersion), append(admitted, r.Renewal)
			continue
		}
		waitKeys = append(waitKeys, r.Renewal, r.RenewalVersion)
	}
	if len(hist) == 0 {
		return nil, nil, nil
	}
	if n := len(waitKeys) / 2; n > 0 {
		set, args := " next_action = NULL, due_at = NULL,", []any{int(toStep)}
		if p.RenewalAction != "" {
			due, dueArg := d.NowAdd(0)
			set, args = " next_action = ?, due_at = "+due+",", append(args, p.RenewalAction, dueArg)
		}
		for _, st := range domain.RenewalCuttable {
			args = append(args, int(st))
		}
		err := execN(ctx, tx, int64(n),
			"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET step_status = ?, version = version + 1,"+set+
				" attempts = 0, lease_owner = NULL, lease_expires_at = NULL, expedite_action = NULL"+
				" WHERE step_status IN ("+placeholders(len(domain.RenewalCuttable))+") AND mr_iid IS NULL AND "+
				d.keyTuplesIn(n, "operation_id", "version"),
			append(args, waitKeys...)...)
		if err != nil {
			return nil, nil, fmt.Errorf("close renewals cut off while waiting for their approval: %w", err)
		}
	}
	if n := len(admKeys) / 2; n > 0 {
		err := execN(ctx, tx, int64(n),
			"UPDATE operation"+d.forceIndex("uk_operation_operation_id")+" SET step_status = ?, version = version + 1,"+
				" next_action = NULL, due_at = NULL, attempts = 0, lease_owner = NULL, lease_expires_at = NULL, expedite_action = NULL"+
				" WHERE step_status = ? AND "+d.keyTuplesIn(n, "operation_id", "version"),
			append([]any{int(toStep), int(domain.StepCreateAdmitted)}, admKeys...)...)
		if err != nil {
			return nil, nil, fmt.Errorf("close renewals cut off in the batch set: %w", err)
		}
	}
	return hist, admitted, nil
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
