package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Paging of GET /ops/requests.
const (
	defaultFindLimit = 50
	maxFindLimit     = 100
)

// slowFactor is how many times its bound a step may take before the
// attention view lists it as waiting far longer than it should
// (docs/api.md, "Find requests").
const slowFactor = 2

// opsFound is one row of GET /ops/requests: what the console's list
// shows, and the operationId its row links to.
type opsFound struct {
	OperationID string `json:"operationId"`
	Subject     string `json:"subject"`
	TargetKey   string `json:"targetKey"`
	// TargetTitle is omitted when the target is no longer configured.
	TargetTitle string               `json:"targetTitle,omitempty"`
	Kind        domain.OperationKind `json:"kind"`
	Flow        string               `json:"flow"`
	// Status is the request's status as its owner's page shows it;
	// Step the exact step.
	Status domain.BindingStatus `json:"status"`
	// StatusText is the status in the words the web app shows for it.
	StatusText string     `json:"statusText"`
	Step       stepView   `json:"step"`
	BatchID    int64      `json:"batchId,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	// Attention says, in words, why the request waits on a person;
	// absent when it does not.
	Attention string `json:"attention,omitempty"`
}

// statusWords are the statuses in the words a person reads: the same
// table as web/src/words.ts's statusWords (TestStatusWordsMatchTheWebApp).
var statusWords = map[domain.BindingStatus]string{
	domain.BindingApprovalSending: "Sending for approval",
	domain.BindingApprovalSent:    "Waiting for approval",
	domain.BindingMRCreating:      "Preparing the change",
	domain.BindingMRCreated:       "Change proposed, checks running",
	domain.BindingMerging:         "Merging the change",
	domain.BindingMerged:          "Merged, waiting for deployment",
	domain.BindingValidated:       "In effect",
	domain.BindingCreateFailed:    "The change could not be prepared",
	domain.BindingHandleFailed:    "Stopped while applying the change",
	domain.BindingRejected:        "Rejected",
	domain.BindingClosed:          "Closed",
	domain.BindingRevoking:        "Access being removed",
	domain.BindingRevoked:         "Access removed; you can ask again",
	domain.BindingRevokeFailed:    "Removing the access stopped; it is still granted",
	domain.BindingRenewing:        "In effect; a renewal is under way",
}

// statusText is s in words; "In progress" for a status without words,
// as the web app says.
func statusText(s domain.BindingStatus) string {
	if w, ok := statusWords[s]; ok {
		return w
	}
	return "In progress"
}

// findData is GET /ops/requests's data.
type findData struct {
	Items      []opsFound `json:"items"`
	NextCursor string     `json:"nextCursor"`
}

// failedBindings are the binding states that wait on a person whatever
// the request's step says.
var failedBindings = []domain.BindingStatus{domain.BindingCreateFailed, domain.BindingHandleFailed, domain.BindingRevokeFailed}

// slowRule is one bound of the attention view: a request still at one of
// steps after slowFactor × bound has waited far past it.
type slowRule struct {
	steps []domain.StepStatus
	bound time.Duration
	// what names the bound in the attention text.
	what string
}

// slowRules are the attention view's bounds, from the configuration in
// force: waiting for the approver is bounded by polling.approval.timeout,
// a merged change waiting for its deployment by reconcile.maxAge (past
// it reconciliation no longer looks), every other step in progress by the
// longest of polling.pipeline.timeout, polling.rebase.timeout and
// batch.timeout.
func slowRules(cfg *config.Snapshot) []slowRule {
	approval := []domain.StepStatus{domain.StepCreateApprovalSubmitted}
	deploy := []domain.StepStatus{domain.StepHandleMerged}
	var machine []domain.StepStatus
	for _, st := range domain.Steps() {
		if st.Kind() == domain.KindInProgress && st != domain.StepCreateApprovalSubmitted {
			machine = append(machine, st)
		}
	}
	work := max(cfg.Polling(config.PollingPipeline).Timeout, cfg.Polling(config.PollingRebase).Timeout, cfg.Batch().Timeout)
	return []slowRule{
		{steps: approval, bound: cfg.Polling(config.PollingApproval).Timeout, what: "the approval poll's bound"},
		{steps: deploy, bound: cfg.Reconcile().MaxAge, what: "the reconciliation's bound"},
		{steps: machine, bound: work, what: "the bound of a pipeline, a rebase or a batch"},
	}
}

// handleOpsFind is GET /ops/requests?subject=&target=&status=&attention=&
// limit=&cursor=: every request matching the filters, newest first,
// keyset-paginated (docs/api.md, "Find requests").
func (s *Server) handleOpsFind() http.Handler {
	return s.opsCall(config.RouteOpsRequestGet, nil, func(r *http.Request) (string, any, error) {
		st := s.deps.Business.Ops
		cfgSrc := s.deps.Business.Config
		if st == nil || s.deps.Business.Requests == nil || cfgSrc == nil {
			return "", nil, domain.Internal("ops find: no store wired", nil)
		}
		q := r.URL.Query()
		f := &fieldErrors{}
		p := store.OperationFindParams{Subject: q.Get("subject"), TargetKey: q.Get("target")}
		if v := q.Get("status"); v != "" {
			p.Status = domain.BindingStatus(v)
			if !p.Status.Valid() {
				f.addMessage("status", "is not a request status", fmt.Sprintf("%q is not a request status; leave it out or use one such as VALIDATED.", v))
			}
		}
		attention := false
		switch q.Get("attention") {
		case "", "false":
		case "true":
			attention = true
		default:
			f.addMessage("attention", "must be true or false", "attention must be true or false.")
		}
		p.Limit = queryLimit(q.Get("limit"), defaultFindLimit, maxFindLimit, f)
		cur, err := store.ParseOperationCursor(q.Get("cursor"))
		if err != nil {
			badCursor(f)
		}
		p.After = cur
		if err := f.err(); err != nil {
			return "", nil, err
		}
		now, err := st.DatabaseNow(r.Context())
		if err != nil {
			return "", nil, domain.Internal("ops find: database clock", err)
		}
		rules := slowRules(cfgSrc.Current())
		if attention {
			p.Attention = attentionParams(rules, now)
		}
		page, err := st.OperationFind(r.Context(), p)
		if err != nil {
			return "", nil, domain.Internal("ops find", err)
		}
		out := findData{Items: make([]opsFound, 0, len(page.Items)), NextCursor: page.Next.Encode()}
		for _, op := range page.Items {
			v, err := s.requestView(r.Context(), op, false)
			if err != nil {
				return "", nil, domain.Internal("ops find view", err)
			}
			item := opsFound{
				OperationID: v.OperationID, Subject: v.Subject, TargetKey: v.TargetKey, TargetTitle: v.TargetTitle,
				Kind: v.Kind, Flow: op.Flow, Status: v.Status, StatusText: statusText(v.Status), Step: v.Step, BatchID: v.BatchID,
				CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, ExpiresAt: v.ExpiresAt,
			}
			if item.Attention, err = s.attentionOf(r, op, v.Status, rules, now); err != nil {
				return "", nil, err
			}
			out.Items = append(out.Items, item)
		}
		return "", out, nil
	})
}

// attentionParams is the store's form of the attention view at now.
func attentionParams(rules []slowRule, now time.Time) *store.OperationAttention {
	a := &store.OperationAttention{Bindings: failedBindings}
	for _, st := range domain.Steps() {
		if k := st.Kind(); k == domain.KindFailed || k == domain.KindPending {
			a.Stopped = append(a.Stopped, st)
		}
	}
	for _, r := range rules {
		a.Slow = append(a.Slow, store.SlowStep{Steps: r.steps, Before: now.Add(-slowFactor * r.bound)})
	}
	return a
}

// attentionOf says in words why op waits on a person, "" when it does
// not: the first of its stop on a failure, its unknown outcome, its
// failed status, its blocked batch, its wait far past a bound.
func (s *Server) attentionOf(r *http.Request, op store.Operation, status domain.BindingStatus, rules []slowRule, now time.Time) (string, error) {
	step := domain.StepStatus(op.Step)
	switch step.Kind() {
	case domain.KindFailed:
		return "Stopped on a failure (" + step.String() + "); an operator re-triggers or closes it.", nil
	case domain.KindPending:
		return "The outcome of " + step.String() + " is unknown; a person confirms it.", nil
	}
	switch status {
	case domain.BindingRevokeFailed:
		return "Removing the access stopped; it is still granted.", nil
	case domain.BindingCreateFailed, domain.BindingHandleFailed:
		return "Stopped on a failure; an operator re-triggers or closes it.", nil
	}
	if op.BatchID != 0 {
		b, err := s.deps.Business.Ops.BatchGet(r.Context(), op.BatchID)
		if err != nil {
			return "", domain.Internal("ops find batch", err)
		}
		if b.Status == domain.BatchBlocked {
			return fmt.Sprintf("Its batch %d is blocked; an operator settles it.", op.BatchID), nil
		}
	}
	for _, rule := range rules {
		for _, st := range rule.steps {
			if st == step && op.UpdatedAt.Before(now.Add(-slowFactor*rule.bound)) {
				return fmt.Sprintf("No progress since %s, more than twice %s (%s).",
					op.UpdatedAt.UTC().Format(time.RFC3339), rule.what, rule.bound), nil
			}
		}
	}
	return "", nil
}
