package httpapi

import (
	"changeflow/internal/workflow/callbacks"
	"context"
)

// WorkflowSink is the CallbackSink over the workflow's callback handling
// (callbacks.Callbacks): what an authenticated, parsed and recorded
// callback does to its request. The workflow knows nothing of HTTP; this
// package already depends on it (flow.Entry for submissions), so the
// adapter lives here.
type WorkflowSink struct {
	C *callbacks.Callbacks
}

var _ CallbackSink = WorkflowSink{}

// NewWorkflowSink returns the sink the composition root puts in
// Business.Sink.
func NewWorkflowSink(c *callbacks.Callbacks) WorkflowSink { return WorkflowSink{C: c} }

// Approval implements CallbackSink.
func (s WorkflowSink) Approval(ctx context.Context, cb ApprovalCallback) (SinkOutcome, error) {
	r, err := s.C.Approval(ctx, callbacks.ApprovalEvent{
		DeliveryKey: cb.DeliveryKey, ApprovalID: cb.ApprovalID, OperationID: cb.OperationID,
		Result: cb.Result, MRID: cb.MRID, DecidedBy: cb.DecidedBy, Comment: cb.Comment,
	})
	return sinkOutcome(r), err
}

// Deploy implements CallbackSink.
func (s WorkflowSink) Deploy(ctx context.Context, cb DeployCallback) (SinkOutcome, error) {
	r, err := s.C.Deploy(ctx, callbacks.DeployEvent{
		RowID: cb.RowID, DeliveryKey: cb.DeliveryKey, ProjectID: cb.ProjectID, MRIID: cb.MRIID, Status: cb.Status,
	})
	return sinkOutcome(r), err
}

// GitLab implements CallbackSink.
func (s WorkflowSink) GitLab(ctx context.Context, ev GitLabEvent) (SinkOutcome, error) {
	r, err := s.C.GitLab(ctx, ev.Kind, ev.Body)
	return sinkOutcome(r), err
}

func sinkOutcome(r callbacks.Result) SinkOutcome {
	switch r {
	case callbacks.Applied:
		return SinkApplied
	case callbacks.Deferred:
		return SinkRecorded
	}
	return SinkStale
}
