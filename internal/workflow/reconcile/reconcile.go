package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/periodic"
	"changeflow/internal/store"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
)

// Reconciliation for lost deploy callbacks.
//
// A run scans the MERGED bindings whose updated_at lies in
// (now − reconcile.maxAge, now − reconcile.minAge) by the database clock,
// looks their MRs up in bulk, and compares each row once:
//
//  1. exact match: a SUCCESS deploy callback for the same project and MR
//     iid was recorded (it arrived, but its flip was lost — e.g. it came
//     while the binding was MERGING and the merge step's after-commit
//     check did not run) → VALIDATED with step CALLED_BACK;
//  2. watermark: the MR iid is below the highest MR iid a SUCCESS deploy
//     callback reported for the same project among the MRs changeflow
//     itself merged (a callback for any other MR raises nothing) → VALIDATED with step
//     RECONCILED. A later MR was deployed, so this one's callback was
//     lost. This inference is only valid because the deployment pipeline
//     runs in merge order and a run never skips changes merged before it,
//     and because MR iids grow monotonically per project; minAge keeps a
//     callback that is merely late from being taken for lost;
//     With reconcile.inference false (a pipeline that deploys out of order
//     or skips) this step is off and only exact matches validate;
//  3. otherwise the row stays MERGED for the next run.
//
// Every validation goes through store.BindingMarkValidated, the method the
// deploy callback uses, so the two racing flip a binding exactly once and
// Observer.Validated (the success metric) runs only for the call that
// flipped, after its commit.

// Result counts one reconciliation run.
type Result struct {
	// Scanned is the MERGED bindings in the window.
	Scanned int `json:"scanned"`
	// Validated is how many of them this run flipped to VALIDATED.
	Validated int `json:"validated"`
	// Waiting is how many stay MERGED: no callback for their MR and none
	// above it (or no MR recorded).
	Waiting int `json:"waiting"`
}

// Actor is the step-history actor of a reconciliation flip.
const Actor = "reconcile"

// Reconciler runs reconciliation every reconcile.interval (read before
// each wait, so a reload applies). Every instance runs one; overlapping
// runs are safe (the flips are row-locked and idempotent).
type Reconciler struct {
	d deps
	// Wake, when set, is called after a run applied a recorded approval
	// decision, so the engine runs the action it scheduled at once.
	Wake func()

	svc periodic.Service
}

// New returns a reconciler over env (Config, Logger and Observer are
// used) and st.
func New(env flow.Env, st Store) *Reconciler { return &Reconciler{d: deps{Env: env, Store: st}} }

// Start runs RunOnce every reconcile.interval until Stop or ctx ends. A
// second Start, or one after Stop, does nothing.
func (r *Reconciler) Start(ctx context.Context) error {
	r.svc.Start(ctx, periodic.Every{Interval: r.interval, Fallback: time.Minute, Pass: r.pass}.Loop)
	return nil
}

// Stop stops the loop and waits for a run in progress. Safe twice, and
// before Start.
func (r *Reconciler) Stop() { r.svc.Stop() }

// pass is one run of the loop: reconciliation, then the replay of
// recorded approval decisions.
func (r *Reconciler) pass(ctx context.Context) {
	res, err := r.RunOnce(ctx)
	periodic.LogPass(ctx, r.d.Log(), err, "reconcile",
		res.Validated > 0, "reconciled lost deploy callbacks", "scanned", res.Scanned, "validated", res.Validated, "waiting", res.Waiting)
	n, err := r.ReplayApprovalInbox(ctx)
	periodic.LogPass(ctx, r.d.Log(), err, "replay recorded approval decisions",
		n > 0, "applied recorded approval decisions from the callback inbox", "applied", n)
}

// approvalInboxBatch bounds the decisions one run replays; the rest wait
// for the next run.
const approvalInboxBatch = 500

// ReplayApprovalInbox applies approval decisions that were recorded but
// never applied: requests still waiting for their approval although a
// decision for them was recorded more than reconcile.minAge ago (the
// process that recorded it died before applying it, and the sender's
// redelivery was answered DUPLICATE). Each goes through the replay path,
// under the callback's guard, so a decision applied meanwhile by another
// instance is stale and nothing is written twice. It returns how many
// were applied; Wake, when set, is called after one was.
func (r *Reconciler) ReplayApprovalInbox(ctx context.Context) (int, error) {
	ids, err := r.d.Store.ApprovalInboxPending(ctx, r.d.Config().Reconcile().MinAge, approvalInboxBatch)
	if err != nil {
		return 0, err
	}
	applied := 0
	for _, id := range ids {
		res, _, err := r.d.applier().Replay(ctx, id)
		if err != nil {
			return applied, fmt.Errorf("replay the approval decision of %s: %w", id, err)
		}
		if res == callbacks.Applied {
			applied++
		}
	}
	if applied > 0 && r.Wake != nil {
		r.Wake()
	}
	return applied, nil
}

func (r *Reconciler) interval() time.Duration {
	if iv := r.d.Config().Reconcile().Interval; iv > 0 {
		return iv
	}
	return time.Minute
}

// RunOnce runs one reconciliation now (the scheduler and POST
// /ops/reconcile). An error on one row stops the run after the rows
// before it were handled; the next run picks the rest up.
func (r *Reconciler) RunOnce(ctx context.Context) (Result, error) {
	rc := r.d.Config().Reconcile()
	scan, err := r.d.Store.ReconcileScanWindow(ctx, store.ReconcileScanParams{
		MinAge: rc.MinAge, MaxAge: rc.MaxAge, NoWatermarks: !rc.Inference,
	})
	if err != nil {
		return Result{}, err
	}
	res := Result{Scanned: len(scan.Rows)}
	for _, row := range scan.Rows {
		var (
			step domain.StepStatus
			note string
		)
		mark, hasMark := scan.Watermarks[row.ProjectID]
		switch {
		case row.MRIID == 0:
		case row.CalledBack:
			step, note = domain.StepCalledBack, fmt.Sprintf("reconciled: deploy callback for MR !%d recorded", row.MRIID)
		case rc.Inference && hasMark && row.MRIID < mark:
			step, note = domain.StepReconciled, fmt.Sprintf("reconciled: MR !%d below the deployed watermark !%d", row.MRIID, mark)
		}
		if step == 0 {
			res.Waiting++
			continue
		}
		flipped, err := r.d.reconcileValidate(ctx, row.OperationID, step, note)
		if errors.Is(err, domain.ErrIllegalTransition) {
			// The row's step does not lead to a callback step: a person
			// has to look (the table names the allowed repairs).
			r.d.Log().Warn("reconcile: step not repairable", "operation", row.OperationID, "err", err)
			res.Waiting++
			continue
		}
		if err != nil {
			return res, fmt.Errorf("reconcile %s: %w", row.OperationID, err)
		}
		if flipped {
			res.Validated++
			if step == domain.StepCalledBack {
				r.d.applier().DeployApplied(ctx, row.ProjectID, row.MRIID, "applied by reconciliation (exact match)")
			}
		}
	}
	return res, nil
}

// reconcileValidate is markValidated with the step to repair to. A step the table
// does not allow is the trace of a racing flip — the deploy callback
// wrote CALLED_BACK and VALIDATED between the scan and this call, and
// CALLED_BACK may not become RECONCILED — so it is a no-op when the
// binding is no longer MERGED.
func (d deps) reconcileValidate(ctx context.Context, operationID string, step domain.StepStatus, note string) (bool, error) {
	flip, err := d.Store.BindingMarkValidated(ctx, store.BindingMarkValidatedParams{
		OperationID: operationID, CalledBackStep: int(step), Actor: Actor, Note: note,
	})
	if errors.Is(err, domain.ErrIllegalTransition) {
		b, gerr := d.Store.BindingGetByOperation(ctx, operationID)
		if gerr == nil && b.Status != domain.BindingMerged {
			return false, nil
		}
	}
	if err != nil || flip == nil {
		return false, err
	}
	d.Flipped(ctx, *flip)
	return true, nil
}
