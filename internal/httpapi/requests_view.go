package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/store"
)

// adminRule is the permission-service rule code that lets a caller read
// other people's requests (docs/api.md, "User endpoints" "owner, or an admin").
const adminRule = "admin"

// adminCheckMessage is the 429 of bucket adminCheck: reading requests
// that are not one's own, each of which costs a permission check.
const adminCheckMessage = "Too many look-ups of requests that are not yours, please try again later."

// List paging of "my records".
const (
	defaultListLimit = 20
	maxListLimit     = 100
)

// stepView is a step as the API shows it.
type stepView struct {
	Code int    `json:"code"`
	Name string `json:"name"`
}

// blockerView says what a request waits on right now.
type blockerView struct {
	// Kind is APPROVAL, BATCH, PIPELINE, REBASE or DEPLOYMENT.
	Kind   string    `json:"kind"`
	Detail string    `json:"detail"`
	Since  time.Time `json:"since"`
}

// mrView is the request's merge request.
type mrView struct {
	IID int64  `json:"iid"`
	URL string `json:"url"`
}

// requestView is GET /api/requests/{operationId}'s data and one item of
// the list (docs/api.md, "User endpoints").
type requestView struct {
	OperationID string `json:"operationId"`
	Subject     string `json:"subject"`
	TargetKey   string `json:"targetKey"`
	// TargetTitle is the target's title in the configuration in force;
	// omitted when the target is no longer configured.
	TargetTitle string `json:"targetTitle,omitempty"`
	// Reason and Days are what the person asked with (days as granted:
	// the target's maximum when the submission left it out).
	Reason string `json:"reason"`
	Days   int    `json:"days"`
	// ApproverComment is the approver's comment on a rejection, as the
	// approval system reported it (detail only; absent when it gave none).
	ApproverComment string               `json:"approverComment,omitempty"`
	Status          domain.BindingStatus `json:"status"`
	Step            stepView             `json:"step"`
	Hint            domain.Hint          `json:"hint"`
	Blocker         *blockerView         `json:"blocker,omitempty"`
	MR              *mrView              `json:"mr,omitempty"`
	BatchID         int64                `json:"batchId,omitempty"`
	ExpiresAt       *time.Time           `json:"expiresAt,omitempty"`
	// ExpiresFromApproval is true while an approve-first grant waits for
	// its approval: its days count from the approval, so its end is not
	// known yet and expiresAt is absent (docs/api.md, "When the access
	// ends"). The approval fixes expiresAt. A renewal's end is known from
	// its submission and is shown.
	ExpiresFromApproval bool `json:"expiresFromApproval,omitempty"`
	// RenewFrom is when re-applying starts renewing this grant: present
	// while its access is in effect and has an expiry (docs/api.md,
	// "Renewing access").
	RenewFrom *time.Time `json:"renewFrom,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
	// Kind is GRANT for a request for access, REVOKE for the removal of
	// one (a revocation is a request of the same owner, docs/api.md "Give
	// access back"), RENEW for the renewal of a grant in effect
	// (docs/api.md "Renewing access"): the web app words them apart and
	// offers give back and withdraw on grants only.
	Kind domain.OperationKind `json:"kind"`
	// GrantOperationID and RevokeReason are a revocation's: the grant it
	// ends and why (EXPIRED, GIVEN_BACK, OPERATOR). On a renewal,
	// GrantOperationID is the grant it renews (as Renews).
	GrantOperationID string              `json:"grantOperationId,omitempty"`
	RevokeReason     domain.RevokeReason `json:"revokeReason,omitempty"`
	// RevocationID is, on a grant whose access is being removed or was,
	// the revocation that took its binding over (GET
	// /api/requests/{revocationId} follows the removal).
	RevocationID string `json:"revocationId,omitempty"`
	// Renewal is the renewal of this grant, once one was asked for: in
	// flight, or the renewal in effect that carries the access now,
	// however many renewals later (docs/api.md, "Renewing access").
	Renewal *renewalView `json:"renewal,omitempty"`
	// Renews is, on a renewal, the grant it renews.
	Renews string `json:"renews,omitempty"`
	// Progress is the step bar (docs/api.md, "The step bar"), decided
	// from the request's flow, kind, status and history
	// (domain.Progress): the one both the request page and the console
	// draw.
	Progress []domain.ProgressStep `json:"progress"`
}

// renewalView is a grant's renewal as its status read shows it: the
// renewal of this request in flight, or the renewal that carries its
// access now — the next link of the chain, or a later one (a renewal of
// the renewal, …; followAccess).
type renewalView struct {
	OperationID string `json:"operationId"`
	// Status is the renewal's own status (APPROVAL_SENT, MR_CREATING, …,
	// VALIDATED once it is in effect: then it carries the access, and
	// this request's own expiresAt no longer applies).
	Status domain.BindingStatus `json:"status"`
	// ExpiresAt is, on a renewal in effect, when the access ends now.
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// Blocker kinds.
const (
	blockApproval   = "APPROVAL"
	blockBatch      = "BATCH"
	blockPipeline   = "PIPELINE"
	blockRebase     = "REBASE"
	blockDeployment = "DEPLOYMENT"
	// blockBlockedBatch: a member of a BLOCKED batch that is not failed
	// itself waits for a person; it is the one state of a claimed member
	// its owner may withdraw, so the page offers that.
	blockBlockedBatch = "BLOCKED_BATCH"
)

// handleRequestGet is GET /api/requests/{operationId}: the owner sees
// their request; anyone else sees it only if the permission service
// grants them the admin rule. Everyone else — and a caller for whom the
// permission check fails — gets 404 NOT_FOUND, exactly as for an id that
// does not exist, so operationIds cannot be probed. The admin check costs
// a permission round trip only when the caller is not the owner.
func (s *Server) handleRequestGet() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		read, ok := s.readableRequest(w, r)
		if !ok {
			return
		}
		v, err := s.requestViewOf(r.Context(), read.Operation, bindingOf(read), true)
		if err != nil {
			writeError(w, r, s.deps.Logger, domain.Internal("request view", err))
			return
		}
		respondView(w, s.deps.Logger, &v) // respond's bytes, encoded by hand (viewjson.go)
	})
}

// readableRequest is the authorization of a request's status read and of
// its event stream (events.go), written once so both answer alike: the
// request {operationId} when the caller owns it or is an admin; otherwise
// the answer — 404 NOT_FOUND exactly as for an id that does not exist,
// 429 when the caller's adminCheck quota is spent, 500 — is written and
// ok is false. The operation comes with its binding, read in the same
// statement, so that the status read costs one statement, not two; and
// only with the columns the view shows (store.OperationViewGet), so read
// hands nothing but requestViewOf and the owner check.
func (s *Server) readableRequest(w http.ResponseWriter, r *http.Request) (read store.OperationWithBinding, ok bool) {
	b := s.deps.Business
	res, _ := identity.FromContext(r.Context())
	id := r.PathValue("operationId")
	if b.Requests == nil {
		writeError(w, r, s.deps.Logger, domain.Internal("request get: no request store wired", nil))
		return read, false
	}
	read, err := b.Requests.OperationViewGet(r.Context(), id)
	op := read.Operation
	switch {
	case errors.Is(err, domain.ErrNotFound):
		// The admin check runs here too, so a missing id costs what
		// someone else's does and the timing does not tell them apart;
		// so does its rate limit (a 429 says nothing about the id).
		if !s.rl.allow(w, r, config.BucketAdminCheck, adminCheckMessage) {
			return read, false
		}
		_ = s.isAdmin(r.Context(), res.Identity.Account)
		writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeNotFound, "No such request.", "request %s", id))
		return read, false
	case err != nil:
		writeError(w, r, s.deps.Logger, domain.Internal("request get", err))
		return read, false
	}
	if op.Subject != res.Identity.Account && !s.rl.allow(w, r, config.BucketAdminCheck, adminCheckMessage) {
		return read, false
	}
	if op.Subject != res.Identity.Account && !s.isAdmin(r.Context(), res.Identity.Account) {
		writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeNotFound, "No such request.",
			"request %s belongs to %s, caller %s is not an admin", id, op.Subject, res.Identity.Account))
		return read, false
	}
	return read, true
}

// isAdmin asks the permission service whether account holds adminRule.
// Any failure means no (fail closed), logged.
func (s *Server) isAdmin(ctx context.Context, account string) bool {
	p := s.deps.Authz.Permissions
	if p == nil {
		return false
	}
	granted, err := p.Check(ctx, account, []string{adminRule})
	if err != nil {
		s.deps.Logger.Warn("admin check failed; treated as not admin", "subject", account, "err", err)
		return false
	}
	return slices.Contains(granted, adminRule)
}

// queryLimit reads a page-size query parameter: def when absent, else a
// whole number from 1 to max; anything else is recorded in f.
func queryLimit(v string, def, max int, f *fieldErrors) int {
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		f.add("limit", fmt.Sprintf("must be a number from 1 to %d", max))
		return def
	}
	return n
}

// badCursor records a cursor that no listing of ours produced (or another
// listing's).
func badCursor(f *fieldErrors) {
	f.addMessage("cursor", "is not valid; start from the first page", "The cursor is not valid; start from the first page.")
}

// listData is GET /api/requests's data.
type listData struct {
	Items      []requestView `json:"items"`
	NextCursor string        `json:"nextCursor"`
}

// handleRequestList is GET /api/requests?limit=&cursor=: the caller's own
// requests, newest first. limit is 1..100 (default 20); cursor is the
// opaque nextCursor of the previous page ("" on the last page). A bad
// limit or cursor is 400.
func (s *Server) handleRequestList() http.Handler {
	b := s.deps.Business
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		q := r.URL.Query()
		f := &fieldErrors{}
		limit := queryLimit(q.Get("limit"), defaultListLimit, maxListLimit, f)
		cur, err := store.ParseOperationCursor(q.Get("cursor"))
		if err != nil {
			badCursor(f)
		}
		if err := f.err(); err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		if b.Requests == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("request list: no request store wired", nil))
			return
		}
		page, err := b.Requests.OperationListBySubject(r.Context(), store.OperationListBySubjectParams{
			Subject: res.Identity.Account, Limit: limit, After: cur,
		})
		if err != nil {
			writeError(w, r, s.deps.Logger, domain.Internal("request list", err))
			return
		}
		out := listData{Items: make([]requestView, 0, len(page.Items)), NextCursor: page.Next.Encode()}
		for _, op := range page.Items {
			v, err := s.requestView(r.Context(), op, false)
			if err != nil {
				writeError(w, r, s.deps.Logger, domain.Internal("request list view", err))
				return
			}
			out.Items = append(out.Items, v)
		}
		respond(w, s.deps.Logger, domain.CodeOK, out)
	})
}

// requestView builds the API view of op. The status is the binding's
// while op is the binding's current request. Once a later request has
// taken the relationship over (a reset is allowed only from REJECTED or
// CLOSED), op's status is the last binding state its own step history
// recorded. withBlocker adds the blocker (one or two more reads).
func (s *Server) requestView(ctx context.Context, op store.Operation, withBlocker bool) (requestView, error) {
	b, err := s.deps.Business.Requests.BindingGetByOperation(ctx, op.OperationID)
	switch {
	case err == nil:
		return s.requestViewOf(ctx, op, &b, withBlocker)
	case errors.Is(err, domain.ErrNotFound):
		return s.requestViewOf(ctx, op, nil, withBlocker)
	}
	return requestView{}, err
}

// bindingOf is read's binding, nil when none names the operation.
func bindingOf(read store.OperationWithBinding) *store.Binding {
	if !read.HasBinding {
		return nil
	}
	return &read.Binding
}

// requestViewOf is requestView with op's binding already read (b, nil
// when no binding names op).
func (s *Server) requestViewOf(ctx context.Context, op store.Operation, b *store.Binding, withBlocker bool) (requestView, error) {
	st := s.deps.Business.Requests
	step := domain.StepStatus(op.Step)
	v := s.baseView(op)
	if b != nil {
		s.ownBindingStatus(op, *b, &v)
	} else if err := supersededStatus(ctx, st, op, &v); err != nil {
		return requestView{}, err
	}
	if op.Kind == domain.OperationRenew {
		v.Renews = op.GrantOperationID
	}
	v.Hint = domain.HintFor(step, v.Status)
	var err error
	if v.Progress, err = progressOf(ctx, st, op, v); err != nil {
		return requestView{}, err
	}
	if withBlocker {
		if err := s.addBlocker(ctx, op, &v); err != nil {
			return requestView{}, err
		}
	}
	return v, nil
}

// baseView is the part of op's view that its own row says: what was
// asked, the step, the MR, the batch, the times and the kind, with the
// target's title under the configuration in force.
func (s *Server) baseView(op store.Operation) requestView {
	step := domain.StepStatus(op.Step)
	v := requestView{
		OperationID: op.OperationID, Subject: op.Subject, TargetKey: op.TargetKey,
		Reason: op.Reason, Days: op.Days,
		Step:      stepView{Code: op.Step, Name: step.String()},
		BatchID:   op.BatchID,
		CreatedAt: op.CreatedAt.UTC(), UpdatedAt: op.UpdatedAt.UTC(),
		Kind: op.Kind, GrantOperationID: op.GrantOperationID, RevokeReason: op.RevokeReason,
	}
	if v.Kind == "" {
		v.Kind = domain.OperationGrant // the column's default; an Operation built without it
	}
	if cfg := s.deps.Business.Config; cfg != nil {
		if t, ok := cfg.Current().Target(op.TargetKey); ok {
			v.TargetTitle = t.Title
		}
	}
	if op.MRIID != 0 {
		v.MR = &mrView{IID: op.MRIID, URL: op.MRURL}
	}
	v.ExpiresAt, v.ExpiresFromApproval = expiryOf(op, v.Kind)
	return v
}

// expiryOf is when op's access ends as its view shows it: fromApproval
// while an approve-first grant waits for its approval, else its stored
// expiry (nil when it has none).
func expiryOf(op store.Operation, kind domain.OperationKind) (at *time.Time, fromApproval bool) {
	switch {
	case op.MRIID == 0 && kind == domain.OperationGrant && domain.AwaitsApproval(domain.StepStatus(op.Step)):
		// Waiting for its approval without an MR is the approve-first
		// flow (the legacy flow asks once its MR exists; the workflow
		// tells the flows apart the same way). The stored expiry is the
		// submission's provisional one, which the approval replaces
		// (domain.ApprovedExpiry): showing it would promise an end the
		// request will not get.
		return nil, true
	case !op.ExpiresAt.IsZero():
		t := op.ExpiresAt.UTC()
		return &t, false
	}
	return nil, false
}

// addBlocker adds what op waits on and, on a rejection, the approver's
// comment: the detail of a single request's read, not of a list's.
func (s *Server) addBlocker(ctx context.Context, op store.Operation, v *requestView) error {
	bl, err := s.blocker(ctx, op, v.Status)
	if err != nil {
		return err
	}
	v.Blocker = bl
	if v.Status == domain.BindingRejected {
		if v.ApproverComment, err = approverComment(ctx, s.deps.Business.Requests, op.OperationID); err != nil {
			return err
		}
	}
	return nil
}

// progressOf is the step bar of op as v shows it. The history is read
// only for a step that does not say where the request stood (a generic
// failure, a closing step: domain.ProgressNeedsHistory) — never for the
// steps a request waits at, so the status read stays one statement. A
// page of "my requests" pays one indexed read per request that ended
// without effect or stopped on a generic failure: accepted, as the bar's
// truth for those is in their history alone.
func progressOf(ctx context.Context, st RequestStore, op store.Operation, v requestView) ([]domain.ProgressStep, error) {
	step := domain.StepStatus(op.Step)
	in := domain.ProgressInput{Flow: op.Flow, Kind: v.Kind, Status: v.Status, Step: step,
		Renewed: v.Renewal != nil && v.Renewal.Status == domain.BindingValidated}
	if domain.ProgressNeedsHistory(step) {
		steps, err := st.OperationStepList(ctx, op.OperationID)
		if err != nil {
			return nil, fmt.Errorf("step bar history: %w", err)
		}
		in.History = make([]domain.StepStatus, len(steps))
		for i, x := range steps {
			in.History[i] = domain.StepStatus(x.ToStep)
		}
	}
	return domain.Progress(in), nil
}

// renewFrom is when the grant op, in effect until expiresAt, may be
// renewed, under the configuration in force; nil without an expiry.
func (s *Server) renewFrom(op store.Operation, expiresAt time.Time) *time.Time {
	cfg := s.deps.Business.Config
	if cfg == nil || expiresAt.IsZero() {
		return nil
	}
	e := cfg.Current().Expiry()
	at := domain.RenewWindow{Percent: e.RenewWindowPercent, Min: e.RenewWindowMin}.From(expiresAt, op.Duration())
	return &at
}

// approverComment is the comment the rejecting decision recorded in the
// step history (domain.ApproverCommentNote), or "".
func approverComment(ctx context.Context, st RequestStore, operationID string) (string, error) {
	steps, err := st.OperationStepList(ctx, operationID)
	if err != nil {
		return "", err
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if to := domain.StepStatus(steps[i].ToStep); to == domain.StepCloseRejected || to == domain.StepCloseWithdrawn {
			c, _ := domain.ApproverCommentFrom(steps[i].Note)
			return c, nil
		}
	}
	return "", nil
}
