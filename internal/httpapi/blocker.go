package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// blockerInput is what the blocker of a request is decided from: its own
// step, status and last change, and — read only when they can matter —
// its batch and its place in the queue.
type blockerInput struct {
	Step   domain.StepStatus
	Status domain.BindingStatus
	// Since is the request's last change, when most waits began.
	Since time.Time
	// Batch is the batch a claimed member follows; nil when it was not
	// read (not a claimed member) or no longer exists.
	Batch *store.Batch
	// Queue is an admitted request's place in the queue; nil when it was
	// not read or the request is no longer queued.
	Queue *store.QueuePosition
}

// followsBatch: a member following its batch (its MR the batch's), whose
// blocker depends on the batch's status.
func followsBatch(batchID int64, in blockerInput) bool {
	return batchID != 0 && in.Step != domain.StepCreateAdmitted &&
		(in.Status == domain.BindingMRCreating || in.Status == domain.BindingMRCreated || in.Status == domain.BindingMerging)
}

// awaitsApprovalStatus: the binding waits for the approval system.
func awaitsApprovalStatus(s domain.BindingStatus) bool {
	return s == domain.BindingApprovalSending || s == domain.BindingApprovalSent
}

// waitsInQueue: an admitted request whose blocker is its place in the
// batch queue.
func waitsInQueue(in blockerInput) bool {
	return !awaitsApprovalStatus(in.Status) && in.Step == domain.StepCreateAdmitted
}

// blockerFor says what a request waits on, from what was read: a person
// when its batch is BLOCKED, the approval, a batch round and the queue
// position, the check pipeline, a rebase, or the deployment. A request
// that is finished, failed or moving on its own has none (nil).
func blockerFor(in blockerInput) *blockerView {
	switch {
	case in.Batch != nil && in.Batch.Status == domain.BatchBlocked:
		// Nothing moves until a person acts, and its owner may withdraw
		// it (store.OperationWithdraw lets such a member go).
		return &blockerView{Kind: blockBlockedBatch, Since: in.Batch.UpdatedAt.UTC(),
			Detail: "Its batch stopped and waits for a person; the operators see it. You can withdraw this request and ask again."}
	case awaitsApprovalStatus(in.Status):
		return &blockerView{Kind: blockApproval, Detail: "Waiting for the approval decision.", Since: in.Since}
	case in.Step == domain.StepCreateAdmitted:
		return queueBlocker(in.Queue, in.Since)
	case waitsForPipeline(in.Step):
		return &blockerView{Kind: blockPipeline, Detail: "Waiting for the merge request's pipeline.", Since: in.Since}
	case in.Step == domain.StepHandleRebasing || in.Step == domain.StepHandleRebasePending:
		return &blockerView{Kind: blockRebase, Detail: "Waiting for the merge request to be rebased.", Since: in.Since}
	case in.Status == domain.BindingMerged || in.Status == domain.BindingRevoking && in.Step == domain.StepHandleMerged:
		return &blockerView{Kind: blockDeployment, Detail: "Merged; waiting for the deployment to report the change in effect.", Since: in.Since}
	}
	return nil
}

// waitsForPipeline: the steps at which the MR's check pipeline runs or
// its outcome is pending.
func waitsForPipeline(step domain.StepStatus) bool {
	switch step {
	case domain.StepCreateMRCreated, domain.StepCreatePipelineRunning, domain.StepHandlePipelineRunning,
		domain.StepCreatePipelinePending, domain.StepHandlePipelinePending:
		return true
	}
	return false
}

// queueBlocker is an admitted request's blocker by its place in the
// queue (qp nil: no longer queued, about to join a round).
func queueBlocker(qp *store.QueuePosition, since time.Time) *blockerView {
	switch {
	case qp == nil:
		return &blockerView{Kind: blockBatch, Detail: "Waiting to join the next batch round.", Since: since}
	case qp.BatchID != 0:
		return &blockerView{Kind: blockBatch, Detail: fmt.Sprintf("Claimed by batch %d; its merge request is being prepared.", qp.BatchID), Since: since}
	}
	return &blockerView{Kind: blockBatch, Detail: fmt.Sprintf("Position %d in the queue for the next batch round.", qp.Position), Since: qp.AdmittedAt.UTC()}
}

// blocker says what op waits on now (blockerFor), reading the batch of a
// claimed member and the queue place of an admitted request only: one
// more indexed read in those states, none in the others.
func (s *Server) blocker(ctx context.Context, op store.Operation, status domain.BindingStatus) (*blockerView, error) {
	st := s.deps.Business.Requests
	in := blockerInput{Step: domain.StepStatus(op.Step), Status: status, Since: op.UpdatedAt.UTC()}
	if followsBatch(op.BatchID, in) {
		b, err := st.BatchGet(ctx, op.BatchID)
		switch {
		case err == nil:
			in.Batch = &b
		case !errors.Is(err, domain.ErrNotFound):
			return nil, err
		}
	}
	if waitsInQueue(in) {
		qp, err := st.BatchQueuePosition(ctx, op.OperationID)
		switch {
		case err == nil:
			in.Queue = &qp
		case !errors.Is(err, domain.ErrNotFound):
			return nil, err
		}
	}
	return blockerFor(in), nil
}
