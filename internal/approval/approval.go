// Package approval is the client of the company's approval system:
// POST /v1/approvals submits a form, GET /v1/approvals?operationId= looks
// one up, GET /v1/approvals/{id} reads one, POST /v1/approvals/{id}/withdraw
// withdraws a pending one (the requester gave up on the request). The decision arrives later as
// a callback (handled by the workflow, not here); the workflow also reads
// the approval while it waits, in case that callback is lost.
//
// The system is idempotent on operationId (a second submit answers the
// existing approval), and the workflow still looks up before it submits
// ("intent before side effect"): a lost answer is an unknown outcome, and
// the lookup settles it without relying on the upstream's dedupe alone.
//
// Every call has a deadline (http.timeout.approval) and passes a circuit
// breaker (breaker.*); every failure is a *Error with the real status.
package approval

import (
	"context"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/outbound"
)

// Service is the port the workflow depends on.
type Service interface {
	// Submit sends a form. The same OperationID again returns the
	// existing approval (the rest of the form is ignored upstream).
	Submit(ctx context.Context, f Form) (Approval, error)
	// FindByOperationID returns the approval for opID; ok is false when
	// there is none.
	FindByOperationID(ctx context.Context, opID string) (a Approval, ok bool, err error)
	// Get reads an approval; an unknown id is a 404 *Error.
	Get(ctx context.Context, approvalID string) (Approval, error)
	// Withdraw withdraws a pending approval: it can no longer be decided.
	// Withdrawing a withdrawn one answers it again (idempotent, so a
	// retried call whose first answer was lost succeeds); an approval
	// already approved or rejected is a 409 *Error (IsAlreadyDecided), an
	// unknown id a 404.
	Withdraw(ctx context.Context, approvalID, comment string) (Approval, error)
}

// Form is what is submitted for approval.
type Form struct {
	OperationID string         `json:"operationId"`
	Requester   string         `json:"requester"`
	Title       string         `json:"title"`
	Fields      map[string]any `json:"fields,omitempty"`
	Ext         Ext            `json:"ext"`
	CheckItems  []any          `json:"checkItems,omitempty"`
}

// Ext is the form's extension block, returned unchanged in the decision
// callback. MRID (the MR's iid, in decimal) is set only by the legacy
// flow, where the MR exists before the approval — so a callback with
// ext.mrId belongs to the legacy flow (docs/workflow.md).
type Ext struct {
	MRID string `json:"mrId,omitempty"`
}

// Status is an approval's status.
type Status string

// The statuses; every one but Pending is a decision.
const (
	Pending   Status = "PENDING"
	Approved  Status = "APPROVED"
	Rejected  Status = "REJECTED"
	Withdrawn Status = "WITHDRAWN"
)

// Approval is an approval as the system reports it.
type Approval struct {
	ApprovalID  string     `json:"approvalId"`
	OperationID string     `json:"operationId"`
	Requester   string     `json:"requester"`
	Title       string     `json:"title"`
	Status      Status     `json:"status"`
	Ext         Ext        `json:"ext"`
	CreatedAt   time.Time  `json:"createdAt"`
	DecidedAt   *time.Time `json:"decidedAt,omitempty"`
	// Comment is the approver's comment on the decision, when the system
	// reports one (a rejection's reason); untrusted text.
	Comment string `json:"comment,omitempty"`
	// DecidedBy names who decided, when the system reports it; untrusted.
	DecidedBy string `json:"decidedBy,omitempty"`
	// CallbackRequestID is the delivery id (requestId) of the decision's
	// callback, when the system reports it; "" otherwise. A decision the
	// workflow finds by polling is recorded under it, so the callback
	// arriving later is a duplicate delivery.
	CallbackRequestID string `json:"callbackRequestId,omitempty"`
}

// Decided says whether s is a decision (APPROVED, REJECTED, WITHDRAWN).
func (s Status) Decided() bool {
	return s == Approved || s == Rejected || s == Withdrawn
}

// Settings are read on every call, so configuration reloads apply:
// BaseURL is approval.baseURL ("…/approval/"; "" fails every call with an
// *Error), Timeout http.timeout.approval (≤ 0 means 5s), and breaker.*
// (outbound.Endpoint).
type Settings outbound.Endpoint

// SettingsFromConfig reads approval.baseURL, http.timeout.approval and
// breaker.* from a snapshot.
func SettingsFromConfig(s *config.Snapshot) Settings {
	return Settings(outbound.EndpointFromConfig(s, "approval", s.Endpoints().Approval))
}

// call is s's call settings; the client applies the fallbacks.
func (s Settings) call() outbound.Settings { return outbound.Endpoint(s).Call() }
