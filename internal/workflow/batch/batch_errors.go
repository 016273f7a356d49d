package batch

import (
	"context"
	"errors"
	"fmt"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/workflow/flow"
)

// What a batch step's error becomes (docs/flows/batch.md, "Durable execution:
// a driver, members that follow"). For a single-request step the engine's
// safety net writes the step's declared failure and stops the row, and a
// person retriggers it. A batch driver cannot stop like that: its batch
// stays RUNNING and holds the project's slot, so every other request of
// the project waits until batch.timeout. Worse, the declared failure is
// not always a legal move from where the driver stands — batch_approve's
// HANDLE_APPROVE_FAILED from CREATE_SUCCEEDED, batch_settle's
// HANDLE_MERGE_FAILED from CREATE_PIPELINE_FAILED, batch_finish's from
// HANDLE_MERGED are not in the central table —, and then the engine could
// only stop the action and keep the state.
//
// So the batch steps answer their own errors, as they answer a Fail:
//
//   - batch_poll_pipeline, batch_approve, batch_merge, batch_poll_rebase:
//     the declared failure is written when the table allows it from the
//     driver's state (read again: the step may have written progress),
//     else the driver keeps its state; either way batch_settle is due at
//     once, as for any failed batch step;
//   - batch_finish: batch_settle is due at once (the MR is merged: the
//     settlement re-reads it and merged wins);
//   - batch_settle itself: a refused settlement is retried
//     (pre-empted three times, a transient GitLab error) and any other
//     error blocks the batch for a person (BATCH_NEEDS_A_PERSON, the error
//     as the reason): no retry fixes a 4xx, and the slot is then held
//     visibly, with its reason, not silently.
//
// Errors the engine answers better itself are passed through: a busy
// database and a spent lease deadline are retries, a lost lease drops the
// outcome, a stopping instance gives the work back. A panic is an error
// here too (the safety net's contract).
//
// Retries that run out are answered the same way, through the engine's
// Declaration.OnExhausted (batchDecl): a step whose transient answers
// outlast workflow.maxRetries, or whose claims outlast the claim bound (a
// crash loop), would otherwise get the engine's declared failure — the
// driver stopped there, or in its old state when the move is illegal, and
// the batch RUNNING with the project's slot held until the timeout sweep
// (batch.timeout). Instead:
//
//   - the driving steps and batch_finish: as for their errors above —
//     the declared failure where legal, batch_settle due at once;
//   - batch_settle: the batch is blocked for a person at once
//     (BATCH_NEEDS_A_PERSON, "settling it gave up after N attempts: …"):
//     the settlement's own GitLab calls (close, re-read) kept failing, so
//     whether the MR merged is unknown and the members cannot be moved
//     either way; a person settles it once GitLab answers (the slot is
//     held visibly, with its reason, rather than silently until the
//     sweep, which would try the same calls).

// engineAnswers reports whether err is one the engine turns into a retry,
// a release or a dropped outcome rather than a failure.
func engineAnswers(err error) bool {
	return errors.Is(err, domain.ErrBusy) || errors.Is(err, domain.ErrPreempted) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// batchStepFailed is a driver step's error answered on the batch path:
// the declared failure fail when the table allows it from where the
// driver is now, and batch_settle due at once.
func (d Flow) batchStepFailed(ctx context.Context, w engine.Work, fail engine.Failure, err error) (engine.Outcome, error) {
	if engineAnswers(err) {
		return engine.Outcome{}, err
	}
	op := w.Operation
	t := engine.Transition{Note: fmt.Sprintf("%s failed: %v", w.Action, err)}
	if d.failureLegal(ctx, op.BatchID, op.OperationID, fail) {
		t.Step, t.Binding = fail.Step, fail.Binding
	}
	d.Log().Warn("batch step failed; settling the batch", "batch", op.BatchID, "operation", op.OperationID,
		"action", w.Action, "failure", t.Step.String(), "err", err)
	return engine.Done(flow.ActionBatchSettle, t), nil
}

// failureLegal reports whether the driver may move to fail from its
// current state (both layers, the grant's vocabulary as the batch path
// reads it), and is not already stopped in a failure of its own (which
// wins, as over the safety net). A failed read answers false: the
// driver then keeps its state, which is always legal.
func (d Flow) failureLegal(ctx context.Context, batchID int64, driver string, fail engine.Failure) bool {
	states, err := d.Store.BatchMemberStates(ctx, batchID)
	if err != nil {
		return false
	}
	for _, m := range states {
		if m.OperationID != driver {
			continue
		}
		cur := domain.StepStatus(m.Step)
		if cur == fail.Step || cur.Stopped() || domain.CheckStep(cur, fail.Step) != nil {
			return false
		}
		return fail.Binding == "" || fail.Binding == m.Binding || domain.CheckBinding(m.Binding, fail.Binding) == nil
	}
	return false
}

// batchFinishStep is batch_finish with its errors answered on the batch
// path: the settlement, due at once, re-reads the merged MR.
func (d Flow) batchFinishStep(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	out, err := engine.RunRecovered(ctx, w, d.batchFinish)
	if err == nil || engineAnswers(err) {
		return out, err
	}
	d.Log().Warn("batch_finish failed; settling the batch (merged wins)", "batch", w.Operation.BatchID, "err", err)
	return engine.Done(flow.ActionBatchSettle, engine.Transition{Note: "batch_finish failed: " + err.Error()}), nil
}

// batchSettle is batch_settle with its errors answered: pre-empted
// (members kept moving through three attempts) → again at once; anything
// else the step did not answer itself → the batch blocked for a person,
// the error as the reason.
func (d Flow) batchSettle(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	out, err := engine.RunRecovered(ctx, w, d.batchSettleStep)
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, domain.ErrPreempted):
		return engine.RetryAfter(0, "settle: members moved meanwhile: "+err.Error()), nil
	case engineAnswers(err):
		return out, err
	}
	op := w.Operation
	return d.batchBlock(ctx, op.BatchID, fmt.Sprintf("%s stopped at %s; settling it failed: %v",
		op.OperationID, domain.StepStatus(op.Step), err))
}

// batchDecl is decl for a batch step, with the batch path's answer to
// retries that ran out: the declared failure fail where the table allows
// it and batch_settle due at once (batchStepFailed), as for an error.
func (d Flow) batchDecl(decl engine.Declaration, fail engine.Failure) engine.Declaration {
	decl.OnExhausted = func(ctx context.Context, w engine.Work, reason string) (engine.Outcome, error) {
		return d.batchStepFailed(ctx, w, fail, errors.New(reason))
	}
	return decl
}

// batchFinishDecl is batch_finish's declaration: retries that ran out
// settle the batch at once (the settlement re-reads the MR; merged wins).
func (d Flow) batchFinishDecl(decl engine.Declaration) engine.Declaration {
	decl.OnExhausted = func(_ context.Context, w engine.Work, reason string) (engine.Outcome, error) {
		d.Log().Warn("batch_finish gave up; settling the batch (merged wins)", "batch", w.Operation.BatchID, "reason", reason)
		return engine.Done(flow.ActionBatchSettle, engine.Transition{Note: "batch_finish " + reason}), nil
	}
	return decl
}

// settleDecl is batch_settle's declaration: a settlement whose retries ran
// out blocks its batch for a person, the reason saying what kept failing.
func (d Flow) settleDecl(decl engine.Declaration) engine.Declaration {
	decl.OnExhausted = func(ctx context.Context, w engine.Work, reason string) (engine.Outcome, error) {
		op := w.Operation
		why := fmt.Sprintf("%s stopped at %s; settling it %s", op.OperationID, domain.StepStatus(op.Step), reason)
		// A pre-empted block read the batch at an older version (a
		// member's move bumps nothing on the batch, but a resumer or an
		// operator may write it): read again, a few times, rather than let
		// the engine fall back to the declared failure, which would leave
		// the batch RUNNING until the sweep.
		var err error
		for range 3 {
			if err = d.blockBatch(ctx, op.BatchID, why); !errors.Is(err, domain.ErrPreempted) {
				break
			}
		}
		if err != nil {
			return engine.Outcome{}, fmt.Errorf("block batch %d: %w", op.BatchID, err)
		}
		return engine.Done("", engine.Transition{Note: fmt.Sprintf("batch %d blocked: %s", op.BatchID, why)}), nil
	}
	return decl
}
