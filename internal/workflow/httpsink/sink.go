// Package httpsink adapts the workflow's callback handling
// (workflow.Callbacks) to the HTTP layer's httpapi.CallbackSink. It is a
// package of its own so that neither workflow nor httpapi imports the
// other: httpapi needs workflow.Entry for submissions, and the workflow
// must not depend on net/http handlers.
package httpsink

import (
	"context"

	"changeflow/internal/httpapi"
	"changeflow/internal/workflow"
)

// Sink is an httpapi.CallbackSink over workflow.Callbacks.
type Sink struct {
	C *workflow.Callbacks
}

var _ httpapi.CallbackSink = Sink{}

// New returns the sink the composition root puts in
// httpapi.Business.Sink.
func New(c *workflow.Callbacks) Sink { return Sink{C: c} }

// Approval implements httpapi.CallbackSink.
func (s Sink) Approval(ctx context.Context, cb httpapi.ApprovalCallback) (httpapi.SinkOutcome, error) {
	r, err := s.C.Approval(ctx, workflow.ApprovalEvent{
		DeliveryKey: cb.DeliveryKey, ApprovalID: cb.ApprovalID, OperationID: cb.OperationID,
		Result: cb.Result, MRID: cb.MRID,
	})
	return outcome(r), err
}

// Deploy implements httpapi.CallbackSink.
func (s Sink) Deploy(ctx context.Context, cb httpapi.DeployCallback) (httpapi.SinkOutcome, error) {
	r, err := s.C.Deploy(ctx, workflow.DeployEvent{
		RowID: cb.RowID, DeliveryKey: cb.DeliveryKey, ProjectID: cb.ProjectID, MRIID: cb.MRIID, Status: cb.Status,
	})
	return outcome(r), err
}

// GitLab implements httpapi.CallbackSink.
func (s Sink) GitLab(ctx context.Context, ev httpapi.GitLabEvent) (httpapi.SinkOutcome, error) {
	r, err := s.C.GitLab(ctx, ev.Kind, ev.Body)
	return outcome(r), err
}

func outcome(r workflow.CallbackResult) httpapi.SinkOutcome {
	switch r {
	case workflow.CallbackApplied:
		return httpapi.SinkApplied
	case workflow.CallbackDeferred:
		return httpapi.SinkRecorded
	}
	return httpapi.SinkStale
}
