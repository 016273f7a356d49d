package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/periodic"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// Revocation (docs/flows/lifecycle.md, "Revocation (access ends)"): the expiry
// scan, and giving access back. Both create revocations through
// store.RevocationCreate — exactly once per grant, whoever races — after
// which the removal runs the grant's own machinery: create_mr on a target
// without batching, the project's batch rounds otherwise.

// ExpiryResult counts one expiry scan.
type ExpiryResult struct {
	// Scanned is how many expired VALIDATED bindings the scan read.
	Scanned int `json:"scanned"`
	// Revoked is how many revocations this scan created (a binding another
	// instance's scan took first counts in Scanned only).
	Revoked int `json:"revoked"`
	// Chunks is how many chunks (transactions) the scan used.
	Chunks int `json:"chunks"`
	// Lapsed is how many renewals with an MR of their own (running or
	// stopped on a failure, either flow) this scan withdrew because their
	// grant had expired (the grant itself is revoked by a later scan,
	// once the renewal's MR is closed and its row handed back).
	Lapsed int `json:"lapsed"`
}

// ExpiryActor is the step-history actor of the scan's revocations.
const ExpiryActor = "expiry-scan"

// Expiry runs the expiry scan every expiry.interval (read before each
// wait, so a reload applies) on every instance; scans of several
// instances, and a manual run, may overlap: each revocation is created
// once (store.RevocationCreate).
type Expiry struct {
	rv Revoker
	// Wake, when set, is called after a scan created revocations whose
	// create_mr is due, so the engine starts them at once.
	Wake func()

	svc periodic.Service
}

// NewExpiry returns the expiry scan over env and st.
func NewExpiry(env flow.Env, st Store) *Expiry {
	return &Expiry{rv: Revoker{Env: env, Store: st}}
}

// ScanOnce revokes every VALIDATED binding whose expiresAt has passed by
// the database clock: chunks of expiry.chunkSize read in index order
// (store.RevocationCandidatesExpired), each revoked in one transaction of
// a fixed number of statements. A chunk that lost a race to another
// writer (domain.ErrPreempted) is skipped; its rows are read again by the
// next scan. Any other error stops the scan after the chunks before it.
// Then it cuts the renewals of grants that expired while the renewal
// owned the row (cutExpiredRenewals).
func (x *Expiry) ScanOnce(ctx context.Context) (ExpiryResult, error) {
	size := x.rv.Config().Expiry().ChunkSize
	var res ExpiryResult
	wake, err := x.revokeExpired(ctx, size, &res)
	if err == nil {
		var woke bool
		woke, err = x.cutExpiredRenewals(ctx, size, &res)
		wake = wake || woke
	}
	if wake && x.Wake != nil {
		x.Wake()
	}
	return res, err
}

// revokeExpired is the scan's first part: every expired VALIDATED binding,
// chunk by chunk, counted into res. wake: a revocation created takes the
// single-request path, whose create_mr is due now.
func (x *Expiry) revokeExpired(ctx context.Context, size int, res *ExpiryResult) (wake bool, err error) {
	var cursor store.ExpiredCursor
	for {
		cands, next, err := x.rv.Store.RevocationCandidatesExpired(ctx, cursor, size)
		if err != nil || len(cands) == 0 {
			return wake, err
		}
		res.Scanned += len(cands)
		res.Chunks++
		created, err := x.rv.createRevocations(ctx, cands, domain.RevokeExpired, "expired", ExpiryActor)
		res.Revoked += len(created)
		for _, c := range created {
			wake = wake || !c.Batching
		}
		if err != nil && !errors.Is(err, domain.ErrPreempted) {
			return wake, err
		}
		cursor = next
	}
}

// cutExpiredRenewals is the scan's second part: grants that expired while
// a renewal of them owns the row, not yet in effect — expiry wins in every
// flow (docs/flows/lifecycle.md, "Renewal"). One read of where each renewal
// is; what happens to it is decided before anything is written
// (sortExpiryCuts, domain.ExpiryCutOf) and applied by the store's guarded
// writes. wake: something was scheduled.
func (x *Expiry) cutExpiredRenewals(ctx context.Context, size int, res *ExpiryResult) (wake bool, err error) {
	renewals, err := x.rv.Store.ExpiredRenewals(ctx, size)
	if err != nil || len(renewals) == 0 {
		return false, err
	}
	cuts := sortExpiryCuts(renewals)
	for _, r := range cuts.left {
		x.rv.Log().Info("expiry: renewal left as it is", "renewal", r.Renewal, "grant", r.GrantOperationID,
			"step", domain.StepStatus(r.RenewalStep), "cut", domain.ExpiryCutOf(r.Place()).String())
	}
	if len(cuts.withRevocation) > 0 {
		res.Scanned += len(cuts.withRevocation)
		res.Chunks++
		created, err := x.rv.createRevocations(ctx, cuts.withRevocation, domain.RevokeExpired, "expired", ExpiryActor)
		res.Revoked += len(created)
		wake = len(created) > 0
		if err != nil && !errors.Is(err, domain.ErrPreempted) {
			return wake, err
		}
	}
	if len(cuts.lapse) == 0 {
		return wake, nil
	}
	res.Chunks++
	switch err := x.rv.Store.RenewalLapse(ctx, store.RenewalLapseParams{Action: flow.ActionWithdraw, Actor: ExpiryActor, Rows: cuts.lapse}); {
	case err == nil:
		res.Lapsed = len(cuts.lapse)
		return true, nil
	case !errors.Is(err, domain.ErrPreempted):
		return wake, err
	}
	return wake, nil
}

// expiryCuts are the expired renewals sorted by what the scan does to
// them.
type expiryCuts struct {
	// withRevocation: no MR — cut in the revocation's own transaction,
	// which takes the row at once; its approval is withdrawn by the
	// renewal's withdraw action (from the batch set there is none to
	// withdraw).
	withRevocation []store.RevocationCandidate
	// lapse: an MR of its own, or one being created — withdrawn
	// (RENEW_EXPIRED, the withdraw action closes the MR — merged wins —
	// and hands the row back), after which the grant is VALIDATED and
	// expired again and a later scan revokes it.
	lapse []store.RenewalLapsed
	// left: merged, ended, cut already, or its batch's to finish.
	left []store.ExpiredRenewal
}

// sortExpiryCuts sorts renewals, in order, by domain.ExpiryCutOf.
func sortExpiryCuts(renewals []store.ExpiredRenewal) expiryCuts {
	var out expiryCuts
	for _, r := range renewals {
		switch domain.ExpiryCutOf(r.Place()) {
		case domain.ExpiryCutWithRevocation:
			out.withRevocation = append(out.withRevocation, r.RevocationCandidate)
		case domain.ExpiryCutWithdraw:
			out.lapse = append(out.lapse, r.Lapsed())
		default:
			out.left = append(out.left, r)
		}
	}
	return out
}

// createRevocations creates the revocations of cands for reason, each
// admitted to its project's batch set when its target batches (a target
// no longer configured takes the single-request path, whose create_mr
// then stops in REVOKE_FAILED naming it: a person decides), and counts
// each created one once, after its commit (I9).
func (rv Revoker) createRevocations(ctx context.Context, cands []store.RevocationCandidate, reason domain.RevokeReason, text, actor string) ([]store.RevocationCreated, error) {
	cfg := rv.Config()
	rows := make([]store.RevocationRow, len(cands))
	for i, c := range cands {
		t, ok := cfg.Target(c.TargetKey)
		rows[i] = store.RevocationRow{RevocationCandidate: c, Batching: ok && t.Batching}
	}
	created, err := rv.Store.RevocationCreate(ctx, store.RevocationCreateParams{
		Reason: reason, Text: text, Actor: actor, SingleAction: flow.ActionCreateMR, RenewalAction: flow.ActionWithdraw, Rows: rows,
	})
	for _, c := range created {
		rv.ObserverOrNop().RevocationCreated(ctx, c, reason)
	}
	rv.renewalsCut(ctx, cands, created, reason)
	return created, err
}

// Start runs ScanOnce every expiry.interval until Stop or ctx ends. A
// second Start, or one after Stop, does nothing.
func (x *Expiry) Start(ctx context.Context) error {
	x.svc.Start(ctx, periodic.Every{
		Interval: func() time.Duration { return x.rv.Config().Expiry().Interval },
		Fallback: time.Minute, Pass: x.pass,
	}.Loop)
	return nil
}

// Stop stops the loop and waits for a scan in progress. Safe twice, and
// before Start.
func (x *Expiry) Stop() { x.svc.Stop() }

// pass is one scan of the loop.
func (x *Expiry) pass(ctx context.Context) {
	res, err := x.ScanOnce(ctx)
	periodic.LogPass(ctx, x.rv.Log(), err, "expiry scan",
		res.Revoked > 0, "revoked expired access", "scanned", res.Scanned, "revoked", res.Revoked, "chunks", res.Chunks)
}

// RevokeResult is the revocation of a grant: the one this call created,
// or the one that already existed (a give-back is idempotent).
type RevokeResult struct {
	// OperationID is the revocation's operationId.
	OperationID string
	// Created: this call created it.
	Created bool
	// Binding is the binding's status after the call (REVOKING at once;
	// later REVOKED or REVOKE_FAILED).
	Binding domain.BindingStatus
}

// ErrNotInEffect: the grant is not VALIDATED, so there is no access to
// give back (it is still being granted, failed, was rejected, or the
// binding belongs to a newer request).
var ErrNotInEffect = errors.New("the request is not in effect")

// Revoke gives grantOperationID's access back (reason GIVEN_BACK, the
// owner) or revokes it (OPERATOR, with the operator's text): the same path
// as the expiry scan, no approval. A second call — or one racing the scan
// — answers the existing revocation. A grant that is not in effect is
// ErrNotInEffect, with the binding's status in the message; an unknown
// one wraps domain.ErrNotFound.
func (rv Revoker) Revoke(ctx context.Context, grantOperationID string, reason domain.RevokeReason, text, actor string) (RevokeResult, error) {
	existing := func() (RevokeResult, bool, error) {
		rev := domain.RevocationID(grantOperationID)
		b, err := rv.Store.BindingGetByOperation(ctx, rev)
		if errors.Is(err, domain.ErrNotFound) {
			return RevokeResult{}, false, nil
		}
		if err != nil {
			return RevokeResult{}, false, err
		}
		return RevokeResult{OperationID: rev, Binding: b.Status}, true, nil
	}
	c, status, err := rv.Store.RevocationCandidateOf(ctx, grantOperationID)
	if errors.Is(err, domain.ErrNotFound) {
		if r, ok, err := existing(); ok || err != nil {
			return r, err
		}
		// A grant whose renewal owns the row is known, not missing: ending
		// the access wins over extending it (revokeRenewing).
		if r, handled, rerr := rv.revokeRenewing(ctx, grantOperationID, reason, text, actor); handled {
			return r, rerr
		}
		return RevokeResult{}, err
	}
	if err != nil {
		return RevokeResult{}, err
	}
	if status != domain.BindingValidated {
		return RevokeResult{}, fmt.Errorf("%s is %s: %w", grantOperationID, status, ErrNotInEffect)
	}
	created, err := rv.createRevocations(ctx, []store.RevocationCandidate{c}, reason, text, actor)
	if err != nil && !errors.Is(err, domain.ErrPreempted) {
		return RevokeResult{}, err
	}
	if len(created) == 1 {
		return RevokeResult{OperationID: created[0].OperationID, Created: true, Binding: domain.BindingRevoking}, nil
	}
	// Lost the race: the scan (or a second call) revoked it first, or the
	// binding moved on.
	if r, ok, err := existing(); ok || err != nil {
		return r, err
	}
	return RevokeResult{}, fmt.Errorf("%s changed while revoking it: %w", grantOperationID, ErrNotInEffect)
}

// RenewalUnderWayError is Revoke's refusal to end an access whose renewal
// is past the point where it can be withdrawn: claimed into a batch, its
// MR open or being merged, or stopped on a failure. Nothing was written;
// Advice says what the owner can do instead.
type RenewalUnderWayError struct {
	Grant, Renewal string
	// Where the renewal is, in the grant's vocabulary (MR_CREATED,
	// MERGING, HANDLE_FAILED, …).
	View domain.BindingStatus
	// Advice is a sentence for the owner.
	Advice string
	// Reason names the case Advice words, for clients that choose their
	// own words (the API's data.reason).
	Reason domain.Reason
}

// Error describes the refusal.
func (e *RenewalUnderWayError) Error() string {
	return fmt.Sprintf("%s: its renewal %s is under way (%s): %s", e.Grant, e.Renewal, e.View, e.Advice)
}

// revokeAttempts bounds revokeRenewing's re-reads: each lost race means
// the renewal moved (its approval arrived, a round claimed it), and the
// next read decides on its new place; a renewal cannot keep moving
// between withdrawable places for long.
const revokeAttempts = 4

// revokeRenewing ends the access of grant while its renewal owns the
// binding (RENEWING): ending the access wins over extending it. A renewal
// that can still be withdrawn without touching GitLab — waiting for its
// approval (no MR) or in the batch set (not claimed) — is cut off in the
// very transaction that creates the grant's revocation
// (store.RevocationCreate: the renewal RENEW_REVOKED, taken out of the
// batch set, the binding RENEWING → REVOKING; its approval withdrawn
// upstream by its withdraw action). One consistent state whoever races:
// the renewal's approval callback moves its step and version, the guarded
// cut misses, nothing is written, and the next read decides again. A
// renewal past that point is a *RenewalUnderWayError saying what to do:
// its MR is being built, checked or merged — ending the access there would
// race a merge that puts the renewal's entry on main, which the grant's
// removal would not remove (it removes only the grant's entry).
//
// handled is false when grant's row is not RENEWING under a renewal of
// grant (the caller answers as before).
func (rv Revoker) revokeRenewing(ctx context.Context, grant string, reason domain.RevokeReason, text, actor string) (RevokeResult, bool, error) {
	g, err := rv.Store.OperationGet(ctx, grant)
	if err != nil {
		return RevokeResult{}, false, nil
	}
	for range revokeAttempts {
		b, err := rv.Store.BindingGet(ctx, g.Subject, g.TargetKey)
		if err != nil || b.Status != domain.BindingRenewing {
			if err == nil && b.OperationID == domain.RevocationID(grant) {
				// The previous attempt, or a racing scan, revoked it.
				return RevokeResult{OperationID: b.OperationID, Binding: b.Status}, true, nil
			}
			if errors.Is(err, domain.ErrNotFound) || err == nil {
				return RevokeResult{}, false, nil
			}
			return RevokeResult{}, true, err
		}
		r, err := rv.Store.OperationGet(ctx, b.OperationID)
		if err != nil {
			return RevokeResult{}, true, err
		}
		if r.Kind != domain.OperationRenew || r.GrantOperationID != grant {
			return RevokeResult{}, true, fmt.Errorf("%s is being renewed through %s: %w", grant, r.OperationID, ErrNotInEffect)
		}
		if !giveBackCuts(r) {
			return RevokeResult{}, true, renewalUnderWay(g, r, b, false)
		}
		c := store.RevocationCandidate{
			BindingID: b.ID, BindingVersion: b.Version, Subject: b.Subject, TargetKey: b.TargetKey,
			GrantOperationID: grant, ProjectID: r.ProjectID, ExpiresAt: b.ExpiresAt,
			Renewal: r.OperationID, RenewalStep: r.Step, RenewalVersion: r.Version,
		}
		created, err := rv.createRevocations(ctx, []store.RevocationCandidate{c}, reason, text, actor)
		switch {
		case err == nil && len(created) == 1:
			return RevokeResult{OperationID: created[0].OperationID, Created: true, Binding: domain.BindingRevoking}, true, nil
		case errors.Is(err, store.ErrRenewalClaimed):
			return RevokeResult{}, true, renewalUnderWay(g, r, b, true)
		case err != nil && !errors.Is(err, domain.ErrPreempted):
			return RevokeResult{}, true, err
		}
		// Lost a race (the approval arrived, a round claimed it, the scan
		// revoked it): read again.
	}
	return RevokeResult{}, true, fmt.Errorf("%s: its renewal kept moving while the access was being given back: %w", grant, domain.ErrPreempted)
}

// giveBackCuts reports whether giving the access back can cut renewal r
// off in the revocation's own transaction, without touching GitLab: it
// waits for its approval with no MR of its own, or it is in the batch
// set. In the batch set whatever operation.batch_id says: a failed
// batch's settlement puts its members back and leaves the column naming
// it. Whether a round holds the renewal now is the waiting row's
// batch_id, which the store's guarded cut tests (store.ErrRenewalClaimed).
func giveBackCuts(r store.Operation) bool {
	switch domain.StepStatus(r.Step) {
	case domain.StepCreateApprovalSubmitting, domain.StepCreateApprovalSubmitted:
		return r.MRIID == 0
	case domain.StepCreateAdmitted:
		return true
	}
	return false
}

// renewalUnderWay is the refusal for renewal r of grant g, by where it
// is; claimed: a batch round took it out of the batch set first.
func renewalUnderWay(g, r store.Operation, b store.Binding, claimed bool) error {
	view := r.Kind.GrantView(b.Status, domain.StepStatus(r.Step))
	e := &RenewalUnderWayError{Grant: g.OperationID, Renewal: r.OperationID, View: view}
	ownMR := !claimed && r.BatchID == 0 && domain.StepStatus(r.Step) != domain.StepCreateAdmitted
	switch {
	case domain.StepStatus(r.Step) == domain.StepRenewExpired:
		e.Reason = domain.ReasonRenewalExpired
		e.Advice = fmt.Sprintf("the access has expired and its renewal %s is being closed; the access is removed by the expiry scan once that is done, "+
			"so there is nothing to give back", r.OperationID)
	case view == domain.BindingCreateFailed || view == domain.BindingHandleFailed || domain.StepStatus(r.Step).Stopped():
		e.Reason = domain.ReasonRenewalStopped
		e.Advice = fmt.Sprintf("the renewal %s stopped on a failure and waits for an operator; ask an operator to revoke the access "+
			"once it is decided — in any case the access ends at its expiry, which the renewal no longer extends once it has passed", r.OperationID)
	case ownMR && (view == domain.BindingMRCreating || view == domain.BindingMRCreated ||
		view == domain.BindingApprovalSending || view == domain.BindingApprovalSent):
		e.Reason = domain.ReasonRenewalHasChange
		e.Advice = fmt.Sprintf("the renewal %s has its own merge request under way; withdraw the renewal first (POST /api/requests/%s/withdraw), "+
			"then give the access back", r.OperationID, r.OperationID)
	default:
		e.Reason = domain.ReasonRenewalMerging
		e.Advice = fmt.Sprintf("the renewal %s is being merged (claimed into a batch, or its merge request is merging); wait until it is in effect, "+
			"then give the access back (POST /api/requests/%s/revoke)", r.OperationID, r.OperationID)
	}
	return e
}

// renewalsCut reports the renewals cut off in the revocations created: a
// candidate read with its renewal (store.ExpiredRenewals, or
// a give-back's while the renewal waited) whose revocation this call
// created had its renewal closed in the same transaction — EXPIRED for
// the expiry's cut (RENEW_EXPIRED), CLOSED for a give-back's or an
// operator's (RENEW_REVOKED: ended without effect; the access is being
// removed for another reason than its expiry). A revocation another
// caller created first is not in created, so each cut is counted once, by
// the transaction that made it.
func (rv Revoker) renewalsCut(ctx context.Context, cands []store.RevocationCandidate, created []store.RevocationCreated, reason domain.RevokeReason) {
	if len(created) == 0 {
		return
	}
	outcome := domain.RenewalExpired
	if reason != domain.RevokeExpired {
		outcome = domain.RenewalClosed
	}
	renewal := map[string]string{}
	for _, c := range cands {
		if c.Renewal != "" {
			renewal[c.GrantOperationID] = c.Renewal
		}
	}
	for _, c := range created {
		if r, ok := renewal[c.GrantOperationID]; ok {
			rv.ObserverOrNop().RenewalEnded(ctx, r, outcome)
		}
	}
}
