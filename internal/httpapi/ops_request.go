package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// opsAuditLimit bounds the audit records GET /ops/requests/{id} shows.
const opsAuditLimit = 100

// opsInboxLimit bounds the recorded approval callbacks it shows: an
// approval is decided once, so more than a few means redeliveries under
// new ids, and only the newest is ever replayed.
const opsInboxLimit = 20

// opsRequestView is GET /ops/requests/{operationId}'s data: both states,
// the step history, the binding, the batch and queue position, the
// approval callbacks recorded for it (the inbox, newest first: the first
// is what POST …/replay-approval applies), the audit trail.
type opsRequestView struct {
	Operation opsOperation         `json:"operation"`
	Status    domain.BindingStatus `json:"status"`
	Step      stepView             `json:"step"`
	Hint      domain.Hint          `json:"hint"`
	Binding   *opsBinding          `json:"binding"`
	Steps     []opsStep            `json:"steps"`
	Batch     *opsBatch            `json:"batch,omitempty"`
	Queue     *opsQueue            `json:"queue,omitempty"`
	// ApprovalCallbacks is the callback inbox, newest first, with what
	// became of each decision.
	ApprovalCallbacks []opsApprovalCallback `json:"approvalCallbacks"`
	// DeployCallbacks are the deploy callbacks recorded for the request's
	// MR, newest first, with what became of each.
	DeployCallbacks []opsDeployCallback `json:"deployCallbacks"`
	Audit           []opsAudit          `json:"audit"`
	// Revocation is, on a grant, the revocation that took its binding
	// over (the binding above is then the revocation's): which one, its
	// state and why. Absent while the grant holds its binding.
	Revocation *opsRevocation `json:"revocation,omitempty"`
	// Progress is the request's step bar, the one its owner's page shows
	// (requestView.Progress).
	Progress []domain.ProgressStep `json:"progress"`
	// Access is the period of access this grant or renewal opened once
	// in effect (GET /ops/access's item); absent when it opened none.
	Access *accessItem `json:"access,omitempty"`
}

// opsRevocation names a grant's revocation in the grant's detail.
type opsRevocation struct {
	OperationID string               `json:"operationId"`
	Status      domain.BindingStatus `json:"status"`
	Reason      domain.RevokeReason  `json:"reason"`
	// Text is the revocation's own reason text: an operator's, or what
	// the expiry scan or a give-back wrote.
	Text string `json:"text"`
}

// opsApprovalCallback is one recorded approval decision (an inbox row).
type opsApprovalCallback struct {
	DeliveryKey string `json:"deliveryKey"`
	ApprovalID  string `json:"approvalId"`
	Result      string `json:"result"`
	// Source is callback, or poll for a decision poll_approval found.
	Source string `json:"source"`
	// Disposition is what the workflow did with it the last time it acted
	// (RECORDED until then), Reason why; Duplicates counts later
	// deliveries of the same key.
	Disposition string    `json:"disposition"`
	Reason      string    `json:"reason"`
	Duplicates  int       `json:"duplicates"`
	ReceivedAt  time.Time `json:"receivedAt"`
	// DecidedBy is who decided, as the delivery reported it (left out
	// when it named nobody).
	DecidedBy string `json:"decidedBy,omitempty"`
}

// opsQueue is where an admitted request stands in its project's queue.
type opsQueue struct {
	ProjectID int64 `json:"projectId"`
	// BatchID is the claiming batch; 0 while waiting.
	BatchID int64 `json:"batchId,omitempty"`
	// Position is the 1-based place in the waiting queue; 0 once claimed.
	Position   int       `json:"position,omitempty"`
	AdmittedAt time.Time `json:"admittedAt"`
}

type opsOperation struct {
	OperationID    string     `json:"operationId"`
	Subject        string     `json:"subject"`
	TargetKey      string     `json:"targetKey"`
	ProjectID      int64      `json:"projectId"`
	Flow           string     `json:"flow"`
	Version        int64      `json:"version"`
	BatchID        int64      `json:"batchId,omitempty"`
	MR             *mrView    `json:"mr,omitempty"`
	Branch         string     `json:"branch,omitempty"`
	ApprovalID     string     `json:"approvalId,omitempty"`
	Reason         string     `json:"reason"`
	Days           int        `json:"days,omitempty"`
	ExpiresAt      *time.Time `json:"expiresAt,omitempty"`
	NextAction     string     `json:"nextAction,omitempty"`
	DueAt          *time.Time `json:"dueAt,omitempty"`
	LeaseOwner     string     `json:"leaseOwner,omitempty"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	Attempts       int        `json:"attempts"`
	LastError      string     `json:"lastError,omitempty"`
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
	// Kind is GRANT or REVOKE; a revocation names its grant and why.
	Kind             domain.OperationKind `json:"kind"`
	GrantOperationID string               `json:"grantOperationId,omitempty"`
	RevokeReason     domain.RevokeReason  `json:"revokeReason,omitempty"`
}

type opsBinding struct {
	Subject     string               `json:"subject"`
	TargetKey   string               `json:"targetKey"`
	Status      domain.BindingStatus `json:"status"`
	OperationID string               `json:"operationId"`
	ExpiresAt   *time.Time           `json:"expiresAt,omitempty"`
	Expired     bool                 `json:"expired"`
	Version     int64                `json:"version"`
	UpdatedAt   time.Time            `json:"updatedAt"`
}

type opsStep struct {
	From        stepView             `json:"from"`
	To          stepView             `json:"to"`
	FromBinding domain.BindingStatus `json:"fromBinding,omitempty"`
	ToBinding   domain.BindingStatus `json:"toBinding,omitempty"`
	Actor       string               `json:"actor"`
	Note        string               `json:"note,omitempty"`
	At          time.Time            `json:"at"`
}

type opsAudit struct {
	Actor   string    `json:"actor"`
	Action  string    `json:"action"`
	Params  string    `json:"params"`
	Outcome string    `json:"outcome"`
	At      time.Time `json:"at"`
}

// handleOpsRequest is GET /ops/requests/{operationId}.
func (s *Server) handleOpsRequest() http.Handler {
	return s.opsCall(config.RouteOpsRequestGet, []string{"operationId"}, func(r *http.Request) (string, any, error) {
		id := r.PathValue("operationId")
		st := s.deps.Business.Ops
		if st == nil {
			return id, nil, domain.Internal("ops: no store wired", nil)
		}
		ctx := r.Context()
		op, err := st.OperationGet(ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			return id, nil, domain.Errorf(domain.CodeNotFound, "No such request.", "ops request %s", id)
		} else if err != nil {
			return id, nil, domain.Internal("ops request", err)
		}
		v, err := s.opsRequestState(ctx, st, op)
		if err != nil {
			return id, nil, err
		}
		if err := s.opsRequestRecords(ctx, st, op, &v); err != nil {
			return id, nil, err
		}
		return id, v, nil
	})
}

// opsRequestState is op's state as the console shows it: its binding
// (or its revocation's), its step history, status, step bar and hint.
func (s *Server) opsRequestState(ctx context.Context, st OpsStore, op store.Operation) (opsRequestView, error) {
	id := op.OperationID
	v := opsRequestView{Operation: toOpsOperation(op), Step: stepView{op.Step, domain.StepStatus(op.Step).String()}}
	b, err := st.BindingGetByOperation(ctx, id)
	var own *store.Binding
	switch {
	case err == nil:
		own = &b
		v.Binding = toOpsBinding(b)
		v.Status = b.Status
	case !errors.Is(err, domain.ErrNotFound):
		return v, domain.Internal("ops request binding", err)
	}
	steps, err := st.OperationStepList(ctx, id)
	if err != nil {
		return v, domain.Internal("ops request steps", err)
	}
	v.Steps = make([]opsStep, 0, len(steps))
	for _, x := range steps {
		v.Steps = append(v.Steps, toOpsStep(x))
		if v.Binding == nil && x.ToBinding != "" {
			v.Status = x.ToBinding // superseded: its last own state
		}
	}
	if v.Binding == nil && op.Kind != domain.OperationRevoke {
		if v.Revocation, v.Binding, err = opsRevocationOf(ctx, st, id); err != nil {
			return v, domain.Internal("ops request revocation", err)
		}
	}
	if err := s.opsProgress(ctx, op, own, steps, &v); err != nil {
		return v, err
	}
	v.Hint = domain.HintFor(domain.StepStatus(op.Step), v.Status)
	return v, nil
}

// opsProgress sets the step bar of op and, when op no longer holds its
// binding (own nil), the status its owner's page shows.
func (s *Server) opsProgress(ctx context.Context, op store.Operation, own *store.Binding, steps []store.OperationStep, v *opsRequestView) error {
	if s.deps.Business.Requests == nil {
		// No status store wired (a server built for the ops reads
		// alone): the bar from what was read here.
		in := domain.ProgressInput{Flow: op.Flow, Kind: op.Kind, Status: v.Status, Step: domain.StepStatus(op.Step)}
		for _, x := range steps {
			in.History = append(in.History, domain.StepStatus(x.ToStep))
		}
		v.Progress = domain.Progress(in)
		return nil
	}
	// The status and step bar its owner's page shows, decided by the
	// same code: a grant whose binding went on to a revocation or a
	// renewal reads as what became of its access (REVOKED, …), never as
	// the VALIDATED its own history ends with. A request holding its
	// binding keeps the binding's own status here (a renewal's
	// RENEWING), the operators' word.
	pv, err := s.requestViewOf(ctx, op, own, false)
	if err != nil {
		return domain.Internal("ops request view", err)
	}
	if own == nil {
		v.Status = pv.Status
	}
	v.Progress = pv.Progress
	return nil
}

// opsRequestRecords adds what is recorded around op: its place in the
// queue, its batch, the callbacks received for it and its audit records.
func (s *Server) opsRequestRecords(ctx context.Context, st OpsStore, op store.Operation, v *opsRequestView) error {
	id := op.OperationID
	if qp, err := st.BatchQueuePosition(ctx, id); err == nil {
		v.Queue = &opsQueue{ProjectID: qp.ProjectID, BatchID: qp.BatchID, Position: qp.Position, AdmittedAt: qp.AdmittedAt.UTC()}
	} else if !errors.Is(err, domain.ErrNotFound) {
		return domain.Internal("ops request queue", err)
	}
	if err := opsAccessOf(ctx, st, id, v); err != nil {
		return err
	}
	if op.BatchID != 0 {
		bt, err := s.opsBatch(ctx, op.BatchID, false)
		if err != nil {
			return err
		}
		v.Batch = bt
	}
	inbox, err := st.ApprovalCallbackList(ctx, id, opsInboxLimit)
	if err != nil {
		return domain.Internal("ops request approval callbacks", err)
	}
	v.ApprovalCallbacks = make([]opsApprovalCallback, 0, len(inbox))
	for _, c := range inbox {
		v.ApprovalCallbacks = append(v.ApprovalCallbacks, opsApprovalCallback{
			DeliveryKey: c.DeliveryKey, ApprovalID: c.ApprovalID, Result: c.Result, Source: c.Source,
			Disposition: c.Disposition, Reason: c.Reason, Duplicates: c.Duplicates, ReceivedAt: c.ReceivedAt.UTC(),
			DecidedBy: c.DecidedBy,
		})
	}
	if v.DeployCallbacks, err = opsDeployCallbacksOf(ctx, st, op); err != nil {
		return domain.Internal("ops request deploy callbacks", err)
	}
	audits, err := st.AuditListByResource(ctx, id, opsAuditLimit)
	if err != nil {
		return domain.Internal("ops request audit", err)
	}
	v.Audit = make([]opsAudit, 0, len(audits))
	for _, a := range audits {
		v.Audit = append(v.Audit, opsAudit{Actor: a.Actor, Action: a.Action, Params: a.Params, Outcome: a.Outcome, At: a.CreatedAt.UTC()})
	}
	return nil
}

// toOpsBinding is b as the console shows it.
func toOpsBinding(b store.Binding) *opsBinding {
	return &opsBinding{Subject: b.Subject, TargetKey: b.TargetKey, Status: b.Status, OperationID: b.OperationID,
		ExpiresAt: timePtr(b.ExpiresAt), Expired: b.Expired, Version: b.Version, UpdatedAt: b.UpdatedAt.UTC()}
}

// toOpsStep is a step history entry as the console shows it.
func toOpsStep(x store.OperationStep) opsStep {
	return opsStep{
		From: stepView{x.FromStep, domain.StepStatus(x.FromStep).String()}, To: stepView{x.ToStep, domain.StepStatus(x.ToStep).String()},
		FromBinding: x.FromBinding, ToBinding: x.ToBinding, Actor: x.Actor, Note: x.Note, At: x.CreatedAt.UTC(),
	}
}

// opsRevocationOf is grant id's revocation and the binding it holds, or
// nils when the grant has none (it still holds its binding, or a later
// request took the relationship over).
func opsRevocationOf(ctx context.Context, st OpsStore, id string) (*opsRevocation, *opsBinding, error) {
	rid := domain.RevocationID(id)
	b, err := st.BindingGetByOperation(ctx, rid)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	rop, err := st.OperationGet(ctx, rid)
	if err != nil {
		return nil, nil, err
	}
	return &opsRevocation{OperationID: rid, Status: b.Status, Reason: rop.RevokeReason, Text: rop.Reason}, toOpsBinding(b), nil
}

func toOpsOperation(o store.Operation) opsOperation {
	v := opsOperation{
		OperationID: o.OperationID, Subject: o.Subject, TargetKey: o.TargetKey, ProjectID: o.ProjectID, Flow: o.Flow,
		Kind: o.Kind, GrantOperationID: o.GrantOperationID, RevokeReason: o.RevokeReason,
		Version: o.Version, BatchID: o.BatchID, Branch: o.Branch, ApprovalID: o.ApprovalID, Reason: o.Reason, Days: o.Days,
		ExpiresAt: timePtr(o.ExpiresAt), NextAction: o.NextAction, DueAt: timePtr(o.DueAt), LeaseOwner: o.LeaseOwner,
		LeaseExpiresAt: timePtr(o.LeaseExpiresAt), Attempts: o.Attempts, LastError: o.LastError,
		CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC(),
	}
	if o.MRIID != 0 {
		v.MR = &mrView{IID: o.MRIID, URL: o.MRURL}
	}
	return v
}
