package callbacks

import (
	"context"

	"changeflow/internal/approval"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// Store is what acting on callbacks reads and writes; *store.Store is
// one.
type Store interface {
	ApprovalCallbackDisposition(ctx context.Context, deliveryKey, disposition, reason string) error
	ApprovalCallbackInsert(ctx context.Context, p store.ApprovalCallbackParams) (inserted bool, err error)
	ApprovalCallbackLatest(ctx context.Context, operationID string) (store.ApprovalCallbackRecord, bool, error)
	BindingGet(ctx context.Context, subject, targetKey string) (store.Binding, error)
	BindingMarkValidated(ctx context.Context, p store.BindingMarkValidatedParams) (*store.Flip, error)
	DeployCallbackClassify(ctx context.Context, id int64, disposition, reason string) error
	DeployCallbackMarkApplied(ctx context.Context, projectID, mrIID int64, reason string) error
	DeployCallbackSeen(ctx context.Context, projectID, mrIID int64) (bool, error)
	MRMergeStateGet(ctx context.Context, projectID, mrIID int64) (store.MRMergeState, error)
	OperationGet(ctx context.Context, operationID string) (store.Operation, error)
	OperationListByMR(ctx context.Context, projectID, mrIID int64) ([]store.Operation, error)
	WorkCallbackApply(ctx context.Context, p store.WorkCallbackParams) (store.WorkCallbackResult, error)
	WorkExpedite(ctx context.Context, operationID, action string) (bool, error)
}

// Applier applies approval decisions and deploy confirmations: for the
// callbacks themselves (Callbacks), and for the flows that find a
// decision or a deployment on their own — poll_approval's polled
// decision, submit_approval's recorded one, the merge step's early
// deploy callback, a batch's settlement, reconciliation. Every path goes
// through the same guards, so whichever comes second changes nothing.
type Applier struct {
	flow.Env
	Store Store
}

// RecordPolled is the callback's whole path for a decision the workflow
// read from the approval system itself (poll_approval): recorded in the
// callback inbox under deliveryKey, then applied through the same guard.
// The event is verified — read from the approval system, so
// approval.verifyDecisions needs no second read — and carries the
// approver's comment; only this method makes such an event, so nothing
// arriving over HTTP can claim either. actor goes to the step history.
func (d Applier) RecordPolled(ctx context.Context, operationID string, a approval.Approval, deliveryKey, actor string) (Result, string, error) {
	ev := ApprovalEvent{
		DeliveryKey: deliveryKey, ApprovalID: a.ApprovalID, OperationID: operationID,
		Result: string(a.Status), MRID: a.Ext.MRID, verified: true, Comment: a.Comment, DecidedBy: a.DecidedBy,
	}
	return d.recordApproval(ctx, ev, actor)
}
