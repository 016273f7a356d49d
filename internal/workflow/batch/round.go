package batch

import (
	"context"
	"errors"
	"sync"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/periodic"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// RoundResult is what one batch round did.
type RoundResult struct {
	// Outcome is the claim's answer: CLAIMED, SLOT_OCCUPIED,
	// NOTHING_WAITING, PREEMPTED or BUSY.
	Outcome string `json:"outcome"`
	// BatchID is the batch claimed (or the project's active batch when the
	// slot was occupied); 0 otherwise.
	BatchID int64 `json:"batchId,omitempty"`
	Members int   `json:"members,omitempty"`
	MRIID   int64 `json:"mrIid,omitempty"`
	// Resumed: the slot was held by a batch whose MR had not been recorded
	// yet (its round died half-way); this round finished building it.
	Resumed bool `json:"resumed,omitempty"`
	// SplitDepth: how many times the claim size was halved after batches
	// whose check pipeline failed (culprit isolation).
	SplitDepth int `json:"splitDepth,omitempty"`
	// Blocked: building the batch's MR met a cause no retry fixes (a
	// binding file that does not parse, a target no longer configured);
	// the batch is BLOCKED for a person (GET /ops/batches shows why).
	Blocked bool `json:"blocked,omitempty"`
}

// codePipelineFailed is the failure code of a batch whose check pipeline
// failed deterministically; the next rounds bisect it (planRound).
const codePipelineFailed = "BATCH_PIPELINE_FAILED"

// roundPlan is what the project's next round claims.
type roundPlan struct {
	size  int
	depth int
	// only, when set, restricts the claim to these requests (one half of
	// a failed batch, culprit isolation); parent is that failed batch.
	only   []string
	parent int64
}

// batchRounds is newest-first batches as domain.AdaptiveBatchBound reads
// them: the finished ones, oldest first.
func batchRounds(newestFirst []store.Batch) []domain.BatchRound {
	out := make([]domain.BatchRound, 0, len(newestFirst))
	for i := len(newestFirst) - 1; i >= 0; i-- {
		b := newestFirst[i]
		if b.Status != domain.BatchSucceeded && b.Status != domain.BatchFailed {
			continue
		}
		out = append(out, domain.BatchRound{Depth: b.SplitDepth, Merged: b.Status == domain.BatchSucceeded,
			ChecksFailed: b.Status == domain.BatchFailed && b.FailureCode == codePipelineFailed})
	}
	return out
}

// planRound decides the project's next claim (culprit isolation, a
// bisection), from the project's latest batch L — read from the database,
// so every instance agrees:
//
//   - L FAILED because its check pipeline failed, with several members:
//     claim the first half of its members (those waiting again, claim
//     order), at L's split depth + 1, parent L;
//   - L SUCCEEDED and is a half of a pipeline-failed batch P: the checks
//     failed for P and passed for L, so the change that breaks them is in
//     the rest of P — claim the first half of P's members still waiting,
//     at L's depth + 1, parent P (if that half passes too, the rest of P is
//     what remains, and so on);
//   - otherwise — no failure, a culprit found (L failed alone: it is not
//     re-admitted), nothing of P left, any other failure — claim up to
//     batch.maxRequests from the head of the queue at depth 0.
//
// A half is never larger than what it narrows down, so a culprit among n
// is found with at most ~2·log₂ n extra MRs; requests admitted meanwhile
// wait until the bisection ends. A batch of several members still failing
// at batch.maxSplitDepth is blocked for a person (batchSettleStep), so the
// depth stays bounded.
func (d Flow) planRound(ctx context.Context, projectID int64) (roundPlan, error) {
	ceiling := d.Config().Batch().MaxRequests
	page, err := d.Store.BatchList(ctx, store.BatchListParams{ProjectID: projectID, Limit: domain.BatchBoundHistory})
	if err != nil {
		return roundPlan{size: ceiling}, err
	}
	// A full round takes up to the adaptive bound (domain.AdaptiveBatchBound):
	// the ceiling while batches merge, less after one whose checks failed.
	full := roundPlan{size: domain.AdaptiveBatchBound(batchRounds(page.Items), ceiling)}
	if full.size < ceiling {
		d.Log().Info("batch: round bound below the ceiling after failed checks", "project", projectID, "bound", full.size, "ceiling", ceiling)
	}
	if len(page.Items) == 0 {
		return full, nil
	}
	last := page.Items[0]
	pipelineFailed := func(b store.Batch) bool {
		return b.Status == domain.BatchFailed && b.FailureCode == codePipelineFailed
	}
	var suspect store.Batch
	switch {
	case pipelineFailed(last):
		suspect = last
	case last.Status == domain.BatchSucceeded && last.ParentBatchID != 0:
		parent, err := d.Store.BatchGet(ctx, last.ParentBatchID)
		if err != nil {
			return full, err
		}
		if !pipelineFailed(parent) {
			return full, nil
		}
		suspect = parent
	default:
		return full, nil
	}
	members, err := d.Store.BatchMembers(ctx, suspect.ID)
	if err != nil {
		return roundPlan{}, err
	}
	if suspect.ID == last.ID && len(members) <= 1 {
		return full, nil // the culprit was found; the rest goes on as usual
	}
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.OperationID
	}
	waiting, err := d.Store.BatchWaiting(ctx, projectID, ids)
	if err != nil {
		return roundPlan{}, err
	}
	if len(waiting) == 0 {
		return full, nil
	}
	half := waiting[:max(1, len(waiting)/2)]
	return roundPlan{size: len(half), depth: last.SplitDepth + 1, only: half, parent: suspect.ID}, nil
}

// Rounds runs batch rounds: RunRound on demand (POST /ops/rounds), and
// every batch.interval for every configured project once started, together
// with the timeout sweep. Every instance runs it; overlapping rounds are
// safe (the project's slot answers).
type Rounds struct {
	d    Flow
	wake func()
	// ResumeAfter is how old (database clock) a RUNNING batch without a
	// recorded MR must be before a round takes over building it while the
	// round that claimed it may still be building it (its instance is
	// alive). A batch whose round returned, or whose instance died, is
	// resumed at once (store.BatchResumable). 0: batch.resumeAfter, read at
	// every round (default 2 minutes).
	ResumeAfter time.Duration

	svc periodic.Service
	mu  sync.Mutex
	// building holds the batches a round of this process is building right
	// now: a batch whose recorded builder is this instance is resumed at
	// once only when no round here is still on it (rounds overlap: the
	// scheduler and POST /ops/rounds).
	building map[int64]bool
	// lastStrays is when this process's Tick last ran the stray sweep
	// (zero: never, so the first Tick after a start runs it — a restart
	// after a crash is when a stray is most likely).
	lastStrays time.Time
}

// NewRounds returns the round service over d; e (may be nil) is woken when
// a batch's first durable step was scheduled.
func NewRounds(d Flow, e *engine.Engine) *Rounds {
	if d.RoundTrigger == nil {
		// Only this service's own settlements (the sweep) schedule rounds.
		d.RoundTrigger = flow.NewRoundTrigger(nil)
	}
	r := &Rounds{d: d, wake: func() {}}
	if e != nil {
		r.wake = e.Wake
	}
	return r
}

func claimOutcomeName(o store.ClaimOutcome) string {
	switch o {
	case store.ClaimClaimed:
		return "CLAIMED"
	case store.ClaimSlotOccupied:
		return "SLOT_OCCUPIED"
	case store.ClaimNothingWaiting:
		return "NOTHING_WAITING"
	case store.ClaimPreempted:
		return "PREEMPTED"
	case store.ClaimBusy:
		return "BUSY"
	}
	return "UNKNOWN"
}

// RunRound runs one round for the config repo projectID: claim the waiting
// set (store.BatchClaim, up to batch.maxRequests), recording this instance
// as the batch's builder; when claimed, build the batch's MR and schedule
// its durable steps. Otherwise, a RUNNING batch without an MR recorded
// whose round is not building it any more → finish building that batch
// (idempotent: every remote write is looked up first). "Not any more"
// (store.BatchResumable): its round returned without recording the MR (a
// lost create-MR answer it could not resolve, GitLab down), its instance
// stopped heartbeating (killed), or it is this instance and no round here
// is on it (restarted under the same id) — all at once; only a builder
// that is alive elsewhere is given ResumeAfter. Anything else does nothing.
//
// Whatever startBatch answers, the round then releases the batch
// (store.BatchBuildRelease), so the next round — on any instance — need
// not wait for a round that is over.
func (r *Rounds) RunRound(ctx context.Context, projectID int64) (RoundResult, error) {
	plan, err := r.d.planRound(ctx, projectID)
	if err != nil {
		return RoundResult{}, err
	}
	inst := r.d.Config().Instance()
	claim, err := r.d.Store.BatchClaim(ctx, store.BatchClaimParams{ProjectID: projectID, MaxRequests: plan.size, Only: plan.only, Builder: inst.ID})
	if err != nil {
		return RoundResult{}, err
	}
	res := RoundResult{Outcome: claimOutcomeName(claim.Outcome), BatchID: claim.BatchID, Members: len(claim.Members), SplitDepth: plan.depth}
	parent := plan.parent
	switch claim.Outcome {
	case store.ClaimClaimed:
		r.startBuilding(claim.BatchID) // a new batch: nobody here builds it yet
	case store.ClaimSlotOccupied, store.ClaimNothingWaiting:
		// A batch whose round is over before recording its MR: finish it.
		// One whose builder is alive elsewhere may still be being built
		// there. (The claim's pre-check answers "nothing waiting" before it
		// looks at the slot.)
		resumeAfter := r.ResumeAfter
		if resumeAfter <= 0 {
			resumeAfter = r.d.Config().Batch().ResumeAfter
		}
		b, err := r.d.Store.BatchResumable(ctx, store.BatchResumableParams{
			ProjectID: projectID, MinAge: resumeAfter, Self: inst.ID, LiveAfter: inst.LiveAfter,
		})
		if errors.Is(err, domain.ErrNotFound) {
			return res, nil
		}
		if err != nil {
			return res, err
		}
		if !r.startBuilding(b.ID) {
			return res, nil // a round of this process is on it right now
		}
		if err := r.d.Store.BatchBuildTake(ctx, b.ID, inst.ID); err != nil {
			r.stopBuilding(ctx, b.ID, inst.ID)
			return res, err
		}
		res.BatchID, res.Resumed, res.SplitDepth, parent = b.ID, true, b.SplitDepth, b.ParentBatchID
	default:
		return res, nil
	}
	defer r.stopBuilding(ctx, res.BatchID, inst.ID)
	b, err := r.d.Store.BatchGet(ctx, res.BatchID)
	if err != nil {
		return res, err
	}
	b.SplitDepth, b.ParentBatchID = res.SplitDepth, parent
	mr, n, err := r.d.startBatch(ctx, b)
	res.MRIID, res.Members = mr, n
	if errors.Is(err, errBatchBlocked) {
		res.Blocked = true
		return res, nil
	}
	if err != nil {
		return res, err
	}
	r.wake()
	return res, nil
}

// startBuilding notes that a round of this process builds batch id; false
// when one already does.
func (r *Rounds) startBuilding(id int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.building[id] {
		return false
	}
	if r.building == nil {
		r.building = map[int64]bool{}
	}
	r.building[id] = true
	return true
}

// stopBuilding ends this round's build of batch id: in the database first
// (so no other round waits for it), then in process. A failed release is
// only logged: the batch is then resumed after batch.resumeAfter, as
// before rounds recorded their builder.
func (r *Rounds) stopBuilding(ctx context.Context, id int64, self string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.d.Store.BatchBuildRelease(rctx, id, self); err != nil {
		r.d.Log().Warn("batch round: build not released; another round resumes it after batch.resumeAfter", "batch", id, "err", err)
	}
	r.mu.Lock()
	delete(r.building, id)
	r.mu.Unlock()
}
