package single

import (
	"context"
	"fmt"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
)

// closeMR is close_mr (legacy flow, after a rejected or withdrawn
// approval): read the MR first — already closed → done, no call; merged →
// stop in CLOSE_FAILED for an operator (the change is live although the
// approval said no) — else close it and read GitLab's answer, which says
// "merged" when a merge won the race.
func (d Steps) closeMR(ctx context.Context, w engine.Work) (engine.Outcome, error) {
	op := w.Operation
	if op.MRIID == 0 {
		return engine.Done("", engine.Transition{Step: domain.StepCloseMRClosed, Note: "no MR to close"}), nil
	}
	project, mr, end := d.readMR(ctx, op)
	if end != nil {
		return end.Out, end.Err
	}
	if mr.State == gitlab.MRStateOpened || mr.State == gitlab.MRStateLocked {
		closed, err := d.GitLab.CloseMR(ctx, project, op.MRIID)
		if err != nil {
			return d.RetryOr(err, "close MR")
		}
		mr = closed
	}
	switch mr.State {
	case gitlab.MRStateClosed:
		return engine.Done("", engine.Transition{Step: domain.StepCloseMRClosed, Note: fmt.Sprintf("MR !%d closed", mr.IID)}), nil
	case gitlab.MRStateMerged:
		return engine.Fail(domain.StepCloseFailed, "", fmt.Sprintf("MR !%d is merged although the approval was not granted", mr.IID)), nil
	}
	return engine.RetryAfter(d.RetryWait(), "MR !"+fmt.Sprint(mr.IID)+" is "+mr.State), nil
}
