package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
)

// batchActionOf maps a single-request step's next action to the batch
// path's.
var batchActionOf = map[string]string{
	flow.ActionPollPipeline:   flow.ActionBatchPollPipeline,
	flow.ActionSubmitApproval: flow.ActionBatchApprove, // members are approve-first; never expected
	flow.ActionApprove:        flow.ActionBatchApprove,
	flow.ActionMerge:          flow.ActionBatchMerge,
	flow.ActionPollRebase:     flow.ActionBatchPollRebase,
}

// Register registers the batch path's durable steps on e.
func Register(e *engine.Engine, d Flow) {
	e.Register(flow.ActionBatchPollPipeline, engine.StepFunc{Decl: d.batchDecl(single.CreateDecl, single.CreateDecl.OnError), Fn: d.batchStep(single.CreateDecl.OnError, d.single().PollPipeline)})
	e.Register(flow.ActionBatchApprove, engine.StepFunc{Decl: d.batchDecl(single.ApproveDecl, single.ApproveDecl.OnError), Fn: d.batchStep(single.ApproveDecl.OnError, d.single().Approve)})
	e.Register(flow.ActionBatchMerge, engine.StepFunc{Decl: d.batchDecl(single.MergeDecl, single.MergeDecl.OnError), Fn: d.batchStep(single.MergeDecl.OnError, d.single().Merge)})
	e.Register(flow.ActionBatchPollRebase, engine.StepFunc{Decl: d.batchDecl(single.MergeDecl, single.MergeDecl.OnError), Fn: d.batchStep(single.MergeDecl.OnError, d.single().PollRebase)})
	e.Register(flow.ActionBatchFinish, engine.StepFunc{Decl: d.batchFinishDecl(single.MergeDecl), Fn: d.batchFinishStep})
	e.Register(flow.ActionBatchSettle, engine.StepFunc{Decl: d.settleDecl(single.MergeDecl), Fn: d.batchSettle})
}

// batchStep runs a single-request step on the batch's driver (its row
// carries the batch MR) and maps its outcome onto the batch path:
//
//   - first, the other members catch up with the driver's state (one
//     transaction, a few statements per 500 members) — so a crash between
//     the driver's commit and the members' move is repaired by the next
//     run, and the members lag the driver by at most one step;
//   - Done(next) → the batch variant of next; Done("") after the merge →
//     batch_finish;
//   - Fail / TimedOut → the driver shows the failure and batch_settle is
//     due at once (a batch never stops with its slot held and nobody
//     acting on it);
//   - an error or a panic → the same, with the step's declared failure
//     fail where the table allows it from the driver's state
//     (batchStepFailed, batch_errors.go); retries that ran out likewise
//     (batchDecl: the engine asks the step before it writes OnError);
//   - WaitUntil / RetryAfter are kept as they are.
func (d Flow) batchStep(fail engine.Failure, inner func(context.Context, engine.Work) (engine.Outcome, error)) func(context.Context, engine.Work) (engine.Outcome, error) {
	return func(ctx context.Context, w engine.Work) (engine.Outcome, error) {
		b, err := d.Store.BatchGet(ctx, w.Operation.BatchID)
		if err != nil {
			return d.RetryOr(err, "read batch")
		}
		if b.Status != domain.BatchRunning {
			// Settled (or blocked) by another path: nothing left to drive.
			return engine.Done("", engine.Transition{Note: fmt.Sprintf("batch %d is %s", b.ID, b.Status)}), nil
		}
		if err := d.batchFollow(ctx, b.ID, w.Operation.OperationID, domain.StepStatus(w.Operation.Step)); err != nil {
			d.Log().Warn("batch members catch up", "batch", b.ID, "err", err)
		}
		out, err := engine.RunRecovered(ctx, w, inner)
		if err != nil {
			return d.batchStepFailed(ctx, w, fail, err)
		}
		t := out.Transition()
		switch out.Kind() {
		case engine.OutcomeDone:
			if out.Next() == "" {
				if t.Step == domain.StepHandleMerged {
					return engine.Done(flow.ActionBatchFinish, t), nil
				}
				return engine.Done(flow.ActionBatchSettle, t), nil
			}
			next, ok := batchActionOf[out.Next()]
			if !ok {
				return engine.Outcome{}, fmt.Errorf("batch %d: no batch action for %q", b.ID, out.Next())
			}
			return engine.Done(next, t), nil
		case engine.OutcomeFail, engine.OutcomeTimedOut:
			t.Note = out.Reason()
			return engine.Done(flow.ActionBatchSettle, t), nil
		}
		return out, nil
	}
}

// milestone is a state the members of a running batch show while the
// driver goes through the batch MR's steps.
type milestone struct {
	step    domain.StepStatus
	binding domain.BindingStatus
}

var (
	msAdmitted   = milestone{domain.StepCreateAdmitted, domain.BindingMRCreating}
	msMRCreated  = milestone{domain.StepCreateMRCreated, domain.BindingMRCreating}
	msSucceeded  = milestone{domain.StepCreateSucceeded, domain.BindingMRCreated}
	msHandling   = milestone{domain.StepHandleStarted, domain.BindingMerging}
	msMerged     = milestone{domain.StepHandleMerged, domain.BindingMerged}
	batchNowhere = milestone{}
)

// followMilestone is where the members follow a driver at step s.
func followMilestone(s domain.StepStatus) milestone {
	switch s {
	case domain.StepCreateMRCreated, domain.StepCreatePipelineRunning, domain.StepCreatePipelinePending:
		return msMRCreated
	case domain.StepCreateSucceeded:
		return msSucceeded
	case domain.StepHandleMerged, domain.StepCalledBack, domain.StepReconciled:
		return msMerged
	}
	if s.Phase() == int(domain.StepHandleStarted)/100 || s == domain.StepHandlePipelinePending ||
		s == domain.StepHandleMergeUnknown || s == domain.StepHandleRebasePending {
		return msHandling
	}
	return batchNowhere
}

// batchFollow moves every member except the driver to the milestone of the
// driver's step, when they are behind it.
func (d Flow) batchFollow(ctx context.Context, batchID int64, driver string, driverStep domain.StepStatus) error {
	target := followMilestone(driverStep)
	if target == batchNowhere {
		return nil
	}
	members, err := d.Store.BatchMemberStates(ctx, batchID)
	if err != nil {
		return err
	}
	moves, err := planMoves(members, target, func(m store.BatchMemberState) bool {
		return m.OperationID != driver && !leaving(m) && m.Binding != "" && !behindOrAt(m, target)
	}, "batch-"+strconv.FormatInt(batchID, 10), "follows the batch MR")
	if err != nil || len(moves) == 0 {
		return err
	}
	// Guarded on the batch still RUNNING: a settlement that committed
	// between this step's read of the batch and now has put the members
	// back in the waiting set, and moving them on would strand them.
	_, err = d.Store.BatchApply(ctx, store.BatchApplyParams{BatchID: batchID, OnlyIf: domain.BatchRunning, Moves: moves})
	return err
}

// behindOrAt reports whether m is already at target or past it (a member
// the deploy callback validated, or one that is no longer on the path).
func behindOrAt(m store.BatchMemberState, target milestone) bool {
	order := []milestone{msAdmitted, {domain.StepCreateStarted, domain.BindingMRCreating}, msMRCreated, msSucceeded, msHandling, msMerged}
	cur := slices.Index(order, milestone{domain.StepStatus(m.Step), m.Binding})
	if cur < 0 {
		return true // not on the path: leave it alone
	}
	return cur >= slices.Index(order, target)
}

// planMoves plans, for every member pick selects, the shortest sequence of
// legal two-layer moves (domain.CheckStep and CheckBinding, I7) from its
// state to target, and groups them into TransitionMany moves: members that
// start in the same state share their hops, so the statement count grows
// with the number of distinct states, not with the members.
func planMoves(members []store.BatchMemberState, target milestone, pick func(store.BatchMemberState) bool, actor, note string) ([]store.TransitionManyParams, error) {
	type group struct {
		from milestone
		rows []store.BatchMemberState
	}
	var groups []*group
	byFrom := map[milestone]*group{}
	for _, m := range members {
		if !pick(m) {
			continue
		}
		from := milestone{domain.StepStatus(m.Step), m.Binding}
		if from == target {
			continue
		}
		g := byFrom[from]
		if g == nil {
			g = &group{from: from}
			byFrom[from] = g
			groups = append(groups, g)
		}
		g.rows = append(g.rows, m)
	}
	var moves []store.TransitionManyParams
	for _, g := range groups {
		path, ok := statePath(g.from, target)
		if !ok {
			return nil, fmt.Errorf("no legal path from %s/%s to %s/%s: %w", g.from.step, g.from.binding,
				target.step, target.binding, domain.ErrIllegalTransition)
		}
		versions := make([]store.TransitionRow, len(g.rows))
		for i, m := range g.rows {
			versions[i] = store.TransitionRow{OperationID: m.OperationID, Version: m.Version, BindingVersion: m.BindingVersion}
		}
		cur := g.from
		for _, next := range path {
			p := store.TransitionManyParams{FromStep: int(cur.step), ToStep: int(next.step),
				Rows: slices.Clone(versions), Actor: actor, Note: note}
			if next.binding != cur.binding {
				p.BindingFrom, p.BindingTo = cur.binding, next.binding
			}
			moves = append(moves, p)
			for i := range versions {
				versions[i].Version++
				if p.BindingFrom != "" {
					versions[i].BindingVersion++
				}
			}
			cur = next
		}
	}
	return moves, nil
}

// statePath is a shortest path of legal moves from → to over the two
// layers: each hop moves the step (to a different step) and optionally the
// binding, both checked against the central table.
func statePath(from, to milestone) ([]milestone, bool) {
	if from == to {
		return nil, true
	}
	steps := append([]domain.StepStatus{}, domain.Steps()...)
	bindings := domain.BindingStatuses
	prev := map[milestone]milestone{from: from}
	queue := []milestone{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, s := range steps {
			if s == cur.step || domain.CheckStep(cur.step, s) != nil {
				continue
			}
			for _, b := range append([]domain.BindingStatus{cur.binding}, bindings...) {
				if b != cur.binding && domain.CheckBinding(cur.binding, b) != nil {
					continue
				}
				n := milestone{s, b}
				if _, seen := prev[n]; seen {
					continue
				}
				prev[n] = cur
				if n == to {
					var path []milestone
					for x := n; x != from; x = prev[x] {
						path = append(path, x)
					}
					slices.Reverse(path)
					return path, true
				}
				queue = append(queue, n)
			}
		}
	}
	return nil, false
}

// errBatchMRClosed: the batch's branch has an MR that was closed — the
// batch cannot go on with it and is settled.
var errBatchMRClosed = errors.New("the batch MR was closed")

// errBatchBlocked: the round blocked the batch it was building.
var errBatchBlocked = errors.New("the batch needs a person")
