package flowtest

import (
	"context"
	"net/http"

	"changeflow/internal/approval"
)

// Approval answers the approval system's calls the flows under test make
// — read an approval back, find one by its request, withdraw one — from
// what the test scripted, and records each in Calls. Submit, and any
// other call, panics on the nil embedded Service.
type Approval struct {
	approval.Service
	Calls []string

	// ByID answers Get; a missing id is the system's 404. GetErr instead.
	ByID   map[string]approval.Approval
	GetErr error
	// ByOp answers FindByOperationID by operation id, with FindErr.
	ByOp    map[string]approval.Approval
	FindErr error
	// Withdrawn and WithdrawErr answer Withdraw.
	Withdrawn   approval.Approval
	WithdrawErr error
}

// Get answers GetErr, else ByID[id], else the system's 404.
func (a *Approval) Get(_ context.Context, id string) (approval.Approval, error) {
	a.Calls = append(a.Calls, "Get "+id)
	if a.GetErr != nil {
		return approval.Approval{}, a.GetErr
	}
	got, ok := a.ByID[id]
	if !ok {
		return approval.Approval{}, &approval.Error{Op: "get", Status: http.StatusNotFound, Message: "not found"}
	}
	return got, nil
}

// FindByOperationID answers ByOp[op] and FindErr.
func (a *Approval) FindByOperationID(_ context.Context, op string) (approval.Approval, bool, error) {
	a.Calls = append(a.Calls, "FindByOperationID "+op)
	got, ok := a.ByOp[op]
	return got, ok, a.FindErr
}

// Withdraw answers Withdrawn and WithdrawErr.
func (a *Approval) Withdraw(_ context.Context, id, _ string) (approval.Approval, error) {
	a.Calls = append(a.Calls, "Withdraw "+id)
	return a.Withdrawn, a.WithdrawErr
}

// ApprovalError is the approval system's answer with status, as its
// client returns it.
func ApprovalError(status int) error {
	return &approval.Error{Op: "test", Status: status, Message: http.StatusText(status)}
}
