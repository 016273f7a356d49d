package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"changeflow/internal/domain"
)

// reviewItemsFromRepo copies into items the target's entries changeflow
// did not write: its open repo periods (access_interval, source repo,
// written by the repository reader), from when each entry was added. A
// subject whose changeflow grant is in effect is the grant's item already
// (a file holds one entry per subject, so an open repo period beside it
// is a stale one the reader has not closed yet).
const reviewItemsFromRepo = "INSERT INTO review_item (campaign_id, subject, granted_from)" +
	" SELECT ?, a.subject, a.from_at FROM access_interval a" +
	" WHERE a.target_key = ? AND a.source = ? AND a.open_slot = 1" +
	" AND NOT EXISTS (SELECT 1 FROM binding b WHERE b.subject_id = a.subject AND b.target_key = a.target_key AND b.status IN (?, ?))"

// RepoRemovalParams starts the removal an access review's revoke asks of
// an entry changeflow did not write (review item ItemID, grant NULL).
type RepoRemovalParams struct {
	ItemID int64
	// ProjectID is the config repo's project; Batching whether the
	// item's target batches (then the removal joins the project's batch
	// set, otherwise SingleAction is due at once).
	ProjectID    int64
	Batching     bool
	SingleAction string
	// Text is the removal's reason (domain.ReviewRevokeText: the campaign
	// and the decider, shown in the MR's description); Actor its
	// step-history actor (the decider, or review:<id>).
	Text, Actor string
}

// RepoRemovalResult is what RepoRemovalCreate did: created the removal
// OperationID, recorded Note on the item instead, or nothing yet
// (Waiting: a request of the subject is under way on the target).
type RepoRemovalResult struct {
	OperationID string
	Note        string
	Waiting     bool
	Batching    bool
}

// RepoRemovalCreate starts the removal of review item p.ItemID's entry
// in one transaction, as domain.StartRepoRemoval decides from the
// subject's binding on the target:
//
//   - the entry is the item's subject's open repo period on the target
//     (none: the entry left the file meanwhile, and the item gets a note);
//   - the removal operation domain.RepoRemovalID (kind REVOKE, reason
//     OPERATOR, review_item_id the item, grant_operation_id the
//     operationId the entry carries: the only entry it may remove), at
//     REVOKE_STARTED, admitted to the project's batch set on a batching
//     target, otherwise SingleAction due now;
//   - the subject's binding row, new or taken at rest at the version read,
//     REVOKING and owned by the removal: one active removal (or request)
//     per (target, subject), uk_binding_subject_target and the guarded
//     update;
//   - the item records the removal (or the note), guarded as
//     ReviewRecordRemoval is.
//
// Every one of those writes is a unique key or a count-checked update,
// so of several instances starting the same item exactly one commits;
// the others get an error wrapping domain.ErrPreempted and nothing of
// theirs stays. An item no longer pending (recorded, or not a repo
// item) is domain.ErrPreempted too.
func (s *Store) RepoRemovalCreate(ctx context.Context, p RepoRemovalParams) (RepoRemovalResult, error) {
	if p.SingleAction == "" || p.Actor == "" {
		return RepoRemovalResult{}, errors.New("start repo entry removal: the single-request action and the actor are required")
	}
	if err := domain.CheckRepoRemovalStart(); err != nil {
		return RepoRemovalResult{}, fmt.Errorf("start repo entry removal: %w", err)
	}
	var res RepoRemovalResult
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		var err error
		res, err = repoRemovalTx(ctx, tx, s.dialect, p)
		return err
	})
	if err != nil {
		return RepoRemovalResult{}, fmt.Errorf("start the removal of review item %d's entry: %w", p.ItemID, err)
	}
	return res, nil
}

// repoEntry is what repoRemovalTx reads before it decides.
type repoEntry struct {
	subject, target string
	entryOp         sql.NullString
	entryOpen       bool
	bindingID       int64
	bindingVersion  int64
	binding         domain.BindingStatus
	bindingExists   bool
}

func readRepoEntry(ctx context.Context, tx *sql.Tx, itemID int64) (repoEntry, error) {
	var e repoEntry
	err := tx.QueryRowContext(ctx, "SELECT i.subject, c.target_key FROM review_item i JOIN review_campaign c ON c.id = i.campaign_id"+
		" WHERE i.id = ? AND i.decision = ? AND i.grant_operation_id IS NULL AND i.revocation_operation_id IS NULL AND i.revoke_note IS NULL",
		itemID, string(domain.ReviewRevoke)).Scan(&e.subject, &e.target)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("not a repo entry decided revoke with nothing recorded: %w", domain.ErrPreempted)
	}
	if err != nil {
		return e, translate(err)
	}
	err = tx.QueryRowContext(ctx, "SELECT operation_id FROM access_interval WHERE target_key = ? AND subject = ? AND source = ? AND open_slot = 1",
		e.target, e.subject, AccessSourceRepo).Scan(&e.entryOp)
	switch {
	case err == nil:
		e.entryOpen = true
	case !errors.Is(err, sql.ErrNoRows):
		return e, translate(err)
	}
	var st string
	err = tx.QueryRowContext(ctx, "SELECT id, version, status FROM binding WHERE subject_id = ? AND target_key = ?", e.subject, e.target).
		Scan(&e.bindingID, &e.bindingVersion, &st)
	switch {
	case err == nil:
		e.bindingExists, e.binding = true, domain.BindingStatus(st)
	case !errors.Is(err, sql.ErrNoRows):
		return e, translate(err)
	}
	return e, nil
}

func repoRemovalTx(ctx context.Context, tx *sql.Tx, d Dialect, p RepoRemovalParams) (RepoRemovalResult, error) {
	e, err := readRepoEntry(ctx, tx, p.ItemID)
	if err != nil {
		return RepoRemovalResult{}, err
	}
	if !e.entryOpen {
		note := "the entry was no longer on the default branch when the review revoked it"
		return RepoRemovalResult{Note: note}, reviewRecordTx(ctx, tx, p.ItemID, "", note)
	}
	plan := domain.StartRepoRemoval(e.bindingExists, e.binding, p.Batching)
	switch plan.Action {
	case domain.RepoRemovalWait:
		return RepoRemovalResult{Waiting: true}, nil
	case domain.RepoRemovalNote:
		return RepoRemovalResult{Note: plan.Note}, reviewRecordTx(ctx, tx, p.ItemID, "", plan.Note)
	}
	id := domain.RepoRemovalID(p.ItemID)
	start := plan.Revocation
	// The operation first (the lock order: operation → binding →
	// waiting-set row); a second start of the item collides here.
	ok, err := insertOnce(ctx, tx,
		"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, kind, grant_operation_id, revoke_reason, step_status, version, reason, review_item_id)"+
			" VALUES (?, ?, ?, ?, 'APPROVE_FIRST', ?, ?, ?, ?, ?, ?, ?)",
		id, e.subject, e.target, p.ProjectID, string(domain.OperationRevoke), e.entryOp.String, string(domain.RevokeOperator),
		int(start.Step), start.Version, clipRunes(p.Text, 1024), p.ItemID)
	if err != nil || !ok {
		return RepoRemovalResult{}, errors.Join(err, errIf(!ok, fmt.Errorf("removal %s exists already: %w", id, domain.ErrPreempted)))
	}
	if err := repoRemovalBinding(ctx, tx, e, plan.Action, id); err != nil {
		return RepoRemovalResult{}, err
	}
	hist := make([]operationStepRow, 0, len(start.History))
	for i, h := range start.History {
		if i == 0 && p.Text != "" {
			// The step history names the campaign and the decider, as
			// the MR does: the review is the removal's authorization.
			h.Note += ": " + p.Text
		}
		hist = append(hist, stepRowOf(id, p.Actor, h))
	}
	if err := operationStepInsert(ctx, tx, d, hist); err != nil {
		return RepoRemovalResult{}, err
	}
	if start.Admit {
		if err := batchAdmitMany(ctx, tx, []string{id}, p.ProjectID); err != nil {
			return RepoRemovalResult{}, err
		}
	} else {
		due, dueArg := d.NowAdd(0)
		if _, err := tx.ExecContext(ctx, "UPDATE operation SET next_action = ?, due_at = "+due+" WHERE operation_id = ?", p.SingleAction, dueArg, id); err != nil {
			return RepoRemovalResult{}, fmt.Errorf("schedule the removal: %w", translate(err))
		}
	}
	return RepoRemovalResult{OperationID: id, Batching: start.Admit}, reviewRecordTx(ctx, tx, p.ItemID, id, "")
}

// repoRemovalBinding gives the subject's binding row to removal id,
// REVOKING: a new row, or the row at rest at the version read.
func repoRemovalBinding(ctx context.Context, tx *sql.Tx, e repoEntry, action domain.RepoRemovalAction, id string) error {
	if action == domain.RepoRemovalInsert {
		ok, err := insertOnce(ctx, tx, "INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, ?, ?, ?)",
			e.subject, e.target, string(domain.BindingRevoking), id)
		if err != nil || !ok {
			return errors.Join(err, errIf(!ok, fmt.Errorf("a binding of %s on %s was written meanwhile: %w", e.subject, e.target, domain.ErrPreempted)))
		}
		return nil
	}
	if err := execN(ctx, tx, 1, "UPDATE binding SET status = ?, operation_id = ?, expires_at = NULL, version = version + 1 WHERE id = ? AND version = ? AND status = ?",
		string(domain.BindingRevoking), id, e.bindingID, e.bindingVersion, string(e.binding)); err != nil {
		return fmt.Errorf("take the binding of %s on %s: %w", e.subject, e.target, err)
	}
	return nil
}

// errIf is err when cond holds, else nil.
func errIf(cond bool, err error) error {
	if cond {
		return err
	}
	return nil
}

// reviewRecordTx is ReviewRecordRemoval inside tx.
func reviewRecordTx(ctx context.Context, tx *sql.Tx, itemID int64, revocationID, note string) error {
	if err := execN(ctx, tx, 1, "UPDATE review_item SET revocation_operation_id = ?, revoke_note = ?"+
		" WHERE id = ? AND decision = ? AND revocation_operation_id IS NULL AND revoke_note IS NULL",
		nullString(revocationID), nullString(clipRunes(note, 512)), itemID, string(domain.ReviewRevoke)); err != nil {
		return fmt.Errorf("record the removal on review item %d: %w", itemID, err)
	}
	return nil
}
