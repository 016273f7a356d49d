package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/periodic"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
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
	full := roundPlan{size: d.Config().Batch().MaxRequests}
	page, err := d.Store.BatchList(ctx, store.BatchListParams{ProjectID: projectID, Limit: 1})
	if err != nil || len(page.Items) == 0 {
		return full, err
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

// startBatch builds the batch's MR and hands the batch to the engine:
//
//  1. the MR by the deterministic branch changeflow/batch-<id> (any
//     state): opened or merged → adopt; closed → settle the batch;
//  2. the branch's head (else the target branch's head: the pin), then
//     every member's binding file at that commit: the members' entries are
//     added per file — several members of one file are one edit — and
//     committed from exactly that commit (start_sha) as ONE commit with a
//     Changeflow-Operation trailer per member, unless the branch already
//     holds them all (commitBatch);
//  3. CreateMR (409, or no answer / 5xx: possibly ours from a lost answer
//     → look it up by the branch, and adopt it in this same round);
//  4. one transaction (store.BatchApply): the MR on the batch row (first:
//     only a batch still RUNNING or BLOCKED), the MR and batch_id on every
//     member, every member CREATE_ADMITTED → CREATE_STARTED →
//     CREATE_MR_CREATED (checked moves, batched statements), and the
//     driver's batch_poll_pipeline due now.
//
// Before 2, revocation members with nothing left to remove are settled
// at once and leave the batch (settleAbsentRemovals, round_absent.go).
// Steps 2–3 are openBatchMR, step 4 recordBatchMR; where a batch read
// again stands towards the round's MR is mrClaimOf's choice.
//
// A crash anywhere before 4 commits leaves a RUNNING batch without an MR
// recorded; the next round on any instance finds the slot occupied by it
// and runs startBatch again, which adopts what the dead one did.
func (d Flow) startBatch(ctx context.Context, b store.Batch) (mrIID int64, members int, err error) {
	ops, err := d.Store.BatchMemberOperations(ctx, b.ID)
	if err != nil {
		return 0, 0, err
	}
	if len(ops) == 0 {
		return 0, 0, fmt.Errorf("batch %d has no members", b.ID)
	}
	// Revocations a round of this batch already settled as nothing to
	// remove are no longer part of its change (round_absent.go).
	if ops = flow.RemainingMembers(ops); len(ops) == 0 {
		return 0, 0, nil // settled with the batch in one transaction
	}
	project := strconv.FormatInt(b.ProjectID, 10)

	branch, mr, found, err := d.batchBranch(ctx, b, project)
	if err != nil {
		return 0, len(ops), err
	}
	if found && mr.State == gitlab.MRStateClosed {
		_, err := d.SettleBatch(ctx, b.ID, "BATCH_MR_CLOSED", errBatchMRClosed.Error(), "round")
		return mr.IID, len(ops), err
	}
	if !found {
		opened, err := d.openBatchMR(ctx, b, project, branch, ops)
		if err != nil || opened.done {
			return opened.mr.IID, opened.members, err
		}
		mr, ops = opened.mr, opened.ops
	}
	iid, err := d.recordBatchMR(ctx, b, project, branch, mr, ops)
	return iid, len(ops), err
}

// openedMR is what openBatchMR did: the MR it opened (or found after a
// lost answer) for ops, the members still to build; done when the round
// ends there, with mr.IID and members as startBatch's answer.
type openedMR struct {
	mr      gitlab.MR
	ops     []store.Operation
	members int
	done    bool
}

// openBatchMR is startBatch's steps 2 and 3 on a branch without an MR:
// the absent removals settled, the batch's commit, then the MR opened.
func (d Flow) openBatchMR(ctx context.Context, b store.Batch, project, branch string, ops []store.Operation) (openedMR, error) {
	// Before the commit is built: revocations whose entry is gone from
	// the default branch are settled at once and leave the batch.
	ops, err := d.settleAbsentRemovals(ctx, b, project, ops)
	if errors.Is(err, errNoMembersLeft) {
		return openedMR{done: true}, nil
	}
	if err != nil {
		return openedMR{members: len(ops)}, err
	}
	title, body, err := d.commitBatch(ctx, b, project, branch, ops)
	if err != nil {
		return openedMR{members: len(ops)}, err
	}
	// The look-up above may be stale by now: another round may have
	// resumed this batch and recorded its MR (and even merged it — a
	// merged MR does not stop GitLab from opening a second one on the
	// same branch), or the batch may have ended without one. Opening
	// an MR then would leave it open for good.
	now, err := d.Store.BatchGet(ctx, b.ID)
	if err != nil {
		return openedMR{members: len(ops)}, err
	}
	if mrClaimOf(now, 0) == mrTaken {
		d.Log().Info("batch round: the batch moved on before its MR was opened; opening none",
			"batch", b.ID, "status", now.Status.String(), "mr", now.MRIID)
		return openedMR{mr: gitlab.MR{IID: now.MRIID}, members: len(ops), done: true}, nil
	}
	mr, err := d.GitLab.CreateMR(ctx, project, gitlab.CreateMRRequest{
		SourceBranch: branch, TargetBranch: d.MainBranch(), Title: title, Description: body,
	})
	if gitlab.IsConflict(err) || gitlab.IsTransient(err) {
		// A lost answer may hide a created MR: look it up by the
		// branch now rather than leave the batch to a later round.
		createErr := err
		var found bool
		mr, found, err = d.GitLab.FindMRBySourceBranch(ctx, project, branch, gitlab.StateOpened)
		if err == nil && !found {
			err = fmt.Errorf("MR of %s not found after: %w", branch, createErr)
		}
	}
	if err != nil {
		return openedMR{members: len(ops), done: true}, fmt.Errorf("open MR: %w", err)
	}
	return openedMR{mr: mr, ops: ops, members: len(ops)}, nil
}

// mrClaim is where a batch read again stands towards an MR a round is
// about to open or record.
type mrClaim int

const (
	// mrFree: the batch is active and records no MR; the round's MR is
	// the one to record.
	mrFree mrClaim = iota
	// mrSame: the batch records this same MR already (another round got
	// there first); the batch is on its way.
	mrSame
	// mrTaken: the batch records another MR, or it ended; an MR of this
	// round would be nobody's.
	mrTaken
)

// mrClaimOf places batch now, as read again, towards MR iid (0: none
// opened yet).
func mrClaimOf(now store.Batch, iid int64) mrClaim {
	switch {
	case iid != 0 && now.MRIID == iid:
		return mrSame
	case now.MRIID != 0 || !now.Status.Active():
		return mrTaken
	}
	return mrFree
}

// recordBatchMR is startBatch's step 4: one transaction links MR mr to
// the batch and its members ops and moves them on; it answers the MR the
// batch now has. Pre-empted, the batch read again decides: the same MR
// recorded by another round is fine; a batch that has another MR or ended
// leaves this one a stray, closed now.
func (d Flow) recordBatchMR(ctx context.Context, b store.Batch, project, branch string, mr gitlab.MR, ops []store.Operation) (int64, error) {
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return mr.IID, err
	}
	ids := make([]string, len(ops))
	for i, op := range ops {
		ids[i] = op.OperationID
	}
	actor := "batch-" + strconv.FormatInt(b.ID, 10)
	moves, err := planMoves(states, msMRCreated, func(m store.BatchMemberState) bool {
		return m.Binding == domain.BindingMRCreating && domain.StepStatus(m.Step) == domain.StepCreateAdmitted
	}, actor, fmt.Sprintf("batch %d: MR !%d", b.ID, mr.IID))
	if err != nil {
		return mr.IID, err
	}
	link := &store.BatchMR{IID: mr.IID, URL: mr.WebURL, Branch: branch, SplitDepth: b.SplitDepth, ParentBatchID: b.ParentBatchID}
	_, err = d.Store.BatchApply(ctx, store.BatchApplyParams{
		BatchID: b.ID, SetMR: link, LinkMR: link, LinkOps: ids, Moves: moves,
		Schedule: &store.BatchSchedule{OperationID: ops[0].OperationID, Action: flow.ActionBatchPollPipeline},
	})
	if errors.Is(err, domain.ErrPreempted) {
		if now, gerr := d.Store.BatchGet(ctx, b.ID); gerr == nil {
			switch mrClaimOf(now, mr.IID) {
			case mrSame:
				// Another round (a resumer, or the claimer it was resuming
				// for) recorded this same MR first; the batch is on its way.
				return mr.IID, nil
			case mrTaken:
				// The batch has another MR, or ended (merged, settled,
				// nothing left to remove) while this round's creation was
				// in flight: this MR is nobody's and no step will ever
				// merge or close it (round_stray.go).
				return now.MRIID, d.closeStrayMR(ctx, now, project, mr.IID)
			}
		}
	}
	if err != nil {
		return mr.IID, fmt.Errorf("record MR !%d: %w", mr.IID, err)
	}
	return mr.IID, nil
}

// batchBranch picks the branch batch b is built on and its MR, if any:
// the first of its branches (BatchBranchName, then FreshBranchName 2, 3 …)
// that holds nothing changeflow did not write. A branch with an MR the
// committer bot did not open (foreign_mr), or with a commit by anyone else
// (foreign_branch), is a security event and is skipped — never adopted,
// never built on. The choice is made from the repository's state alone,
// the same on every run, so a crash or a lost answer finds the branch and
// MR a dead round made; a branch that turns foreign after changeflow used
// it is skipped too, and the MR left behind there is the stray sweep's. Past
// maxBranchAttempts branches the batch is blocked for a person.
func (d Flow) batchBranch(ctx context.Context, b store.Batch, project string) (string, gitlab.MR, bool, error) {
	first := flow.BatchBranchName(b.ID)
	var skipped []string
	for n := 1; n <= flow.MaxBranchAttempts; n++ {
		branch := flow.FreshBranchName(first, n)
		mr, found, err := d.GitLab.FindMRBySourceBranch(ctx, project, branch, gitlab.StateAll)
		if err != nil {
			return "", gitlab.MR{}, false, fmt.Errorf("look up MR of %s: %w", branch, err)
		}
		if found {
			bot, err := d.single().Committer(ctx)
			if err != nil {
				return "", gitlab.MR{}, false, fmt.Errorf("read the committer bot's account: %w", err)
			}
			if mr.AuthorUsername != bot.Username {
				if err := d.single().RecordSecurityEvent(ctx, single.ForeignMR(single.BatchResource(b.ID), mr)); err != nil {
					return "", gitlab.MR{}, false, err
				}
				skipped = append(skipped, branch)
				continue
			}
		}
		if found {
			return branch, mr, true, nil
		}
		br, err := d.GitLab.GetBranch(ctx, project, branch)
		if gitlab.IsNotFound(err) {
			return branch, gitlab.MR{}, false, nil
		}
		if err != nil {
			return "", gitlab.MR{}, false, fmt.Errorf("look up branch %s: %w", branch, err)
		}
		own, why, err := d.single().BranchIsOwn(ctx, project, branch)
		if err != nil {
			return "", gitlab.MR{}, false, fmt.Errorf("check branch %s: %w", branch, err)
		}
		if own {
			return branch, gitlab.MR{}, false, nil
		}
		if err := d.single().RecordSecurityEvent(ctx, single.SecurityEvent{Kind: single.SecurityForeignBranch, Resource: single.BatchResource(b.ID),
			Branch: branch, SHA: br.CommitID, Why: why}); err != nil {
			return "", gitlab.MR{}, false, err
		}
		skipped = append(skipped, branch)
	}
	why := single.OutOfBranches("the batch's branches " + strings.Join(skipped, ", ") + " hold content changeflow did not write")
	if err := d.blockBatch(ctx, b.ID, why); err != nil {
		return "", gitlab.MR{}, false, err
	}
	return "", gitlab.MR{}, false, fmt.Errorf("batch %d blocked: %w", b.ID, errBatchBlocked)
}

// staleWriteAttempts bounds how often commitBatch reads again after a
// refused commit (gitlab.IsStaleWrite) within one round. Each refusal means
// the repository moved under the round; past the bound the round ends with
// the error and the batch is resumed like any round that died half-way.
const staleWriteAttempts = 5

// commitBatch is startBatch's step 2: the batch's commit, pinned to the
// commit its files were read at. A refusal because what was read went away
// is answered by a fresh read and a new commit in the same round.
func (d Flow) commitBatch(ctx context.Context, b store.Batch, project, branch string, ops []store.Operation) (title, body string, err error) {
	title, message, body := flow.BatchText(b.ID, ops)
	for attempt := 1; ; attempt++ {
		at, err := d.PinBranch(ctx, project, branch, d.MainBranch())
		if err != nil {
			return "", "", fmt.Errorf("look up branch: %w", err)
		}
		actions, err := d.BatchFiles(ctx, project, at.SHA, ops)
		if errors.Is(err, bindingfile.ErrInvalid) || errors.Is(err, flow.ErrTargetGone) {
			// No retry fixes a file that does not parse (or a target that
			// is gone): block the batch for a person instead of failing
			// every round and re-admitting the members forever.
			ref := d.MainBranch()
			if at.BranchExists {
				ref = branch
			}
			if berr := d.blockBatch(ctx, b.ID, fmt.Sprintf("building the batch MR from %s@%s: %v", ref, flow.Short(at.SHA), err)); berr != nil {
				return "", "", errors.Join(err, berr)
			}
			return "", "", fmt.Errorf("batch %d blocked: %w", b.ID, errBatchBlocked)
		}
		if err != nil {
			return "", "", err
		}
		if len(actions) == 0 {
			return title, body, nil
		}
		_, err = d.GitLab.CreateCommit(ctx, project, at.Commit(branch, message, actions))
		if err == nil {
			return title, body, nil
		}
		if !gitlab.IsStaleWrite(err) || attempt >= staleWriteAttempts {
			return "", "", fmt.Errorf("commit: %w", err)
		}
		d.Log().Info("batch commit refused, reading again", "batch", b.ID, "attempt", attempt, "err", err)
	}
}

// Start runs triggered rounds when they are due (Env.RoundTrigger: an
// admission batch.gatherWindow after the first of a burst, a settled
// batch at once), and rounds and the timeout sweep every batch.interval
// (read at every pass) for every gitlab.projects entry with a numeric id,
// until Stop or ctx ends. Safe to call twice; a no-op after Stop.
func (r *Rounds) Start(ctx context.Context) error {
	r.svc.Start(ctx, r.loop)
	return nil
}

// Stop ends the loop and waits for a running round. Safe twice.
func (r *Rounds) Stop() { r.svc.Stop() }

// loop runs triggered rounds when they are due (RoundTrigger) and a full
// Tick every batch.interval. The interval is measured from the last Tick,
// not from the last triggered round, so a steady stream of admissions
// never postpones the safety net (the timeout sweep, the resumption of a
// batch whose round died).
func (r *Rounds) loop(ctx context.Context) {
	trig := r.d.RoundTrigger
	clock := trig.Clock()
	lastTick := clock.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		interval := r.d.Config().Batch().Interval
		if interval <= 0 {
			interval = 10 * time.Second
		}
		now := clock.Now()
		wait := lastTick.Add(interval).Sub(now)
		if next := trig.Next(); !next.IsZero() {
			wait = min(wait, next.Sub(now))
		}
		t.Reset(max(wait, 0))
		select {
		case <-ctx.Done():
			return
		case <-trig.Woken():
			// A new schedule: recompute the wait. (Since Go 1.23 Reset
			// discards a value the timer may have sent meanwhile.)
			continue
		case <-t.C:
		}
		now = clock.Now()
		if !now.Before(lastTick.Add(interval)) {
			lastTick = now
			r.Tick(ctx)
			// A trigger due now as well runs at the next pass; its round
			// then finds what the Tick left (usually nothing: a few reads).
			continue
		}
		r.RunTriggered(ctx, now)
	}
}

// Tick runs one round per configured project and one timeout sweep, and
// the stray sweep when batch.strayInterval has passed since this
// process's last one.
func (r *Rounds) Tick(ctx context.Context) {
	if _, err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
		r.d.Log().Warn("batch sweep", "err", err)
	}
	if r.straysDue() {
		if _, err := r.SweepStrays(ctx); err != nil && ctx.Err() == nil {
			r.d.Log().Warn("stray sweep", "err", err)
		}
	}
	for _, id := range r.Projects() {
		if _, err := r.RunRound(ctx, id); err != nil && ctx.Err() == nil {
			r.d.Log().Warn("batch round", "project", id, "err", err)
		}
	}
}

// straysDue reports whether the stray sweep is due, and if so marks it
// run now. The time is this process's own: nothing is shared, so several
// instances each run it every interval (overlapping runs are safe).
func (r *Rounds) straysDue() bool {
	now := r.d.RoundTrigger.Clock().Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lastStrays.IsZero() && now.Before(r.lastStrays.Add(r.d.Config().Batch().StrayInterval)) {
		return false
	}
	r.lastStrays = now
	return true
}

// SweepStrays runs the stray sweep (Flow.SweepStrayMRs) for every
// configured project and returns how many MRs it closed.
func (r *Rounds) SweepStrays(ctx context.Context) (int, error) {
	n := 0
	var errs []error
	for _, id := range r.Projects() {
		res, err := r.d.SweepStrayMRs(ctx, id)
		n += res.Closed
		if err != nil {
			errs = append(errs, fmt.Errorf("project %d: %w", id, err))
		}
	}
	return n, errors.Join(errs...)
}

// Projects are the numeric ids of gitlab.projects.
func (r *Rounds) Projects() []int64 {
	ps, _ := r.d.Config().List(config.KeyGitLabProjects)
	var out []int64
	for _, p := range ps {
		if id, err := strconv.ParseInt(p, 10, 64); err == nil && id > 0 {
			out = append(out, id)
		}
	}
	return out
}

// Sweep settles every RUNNING batch older than batch.timeout (database
// clock, from its claim): for each, close and re-read its MR, then ONE
// transaction — the batch's guarded write (RUNNING at the version read)
// with every member's move: merged → the members MERGED and the batch
// SUCCEEDED ("merged wins"); else the batch FAILED (BATCH_TIMEOUT) and the
// members back in the waiting set. A crash at any point leaves either the
// RUNNING batch, which the next sweep finds again, or a settled batch with
// its members moved; a running step or another settlement racing it loses
// at the guarded write or at its own commit (leases cleared). A batch whose
// MR will not close is blocked for a person rather than swept again every
// tick. It returns how many batches it settled or blocked.
func (r *Rounds) Sweep(ctx context.Context) (int, error) {
	timeout := r.d.Config().Batch().Timeout
	if timeout <= 0 {
		return 0, nil
	}
	due, err := r.d.Store.BatchTimedOut(ctx, timeout, 0)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, b := range due {
		res, err := r.d.settleBatch(ctx, b.ID, settleOpts{code: store.BatchFailureTimeout,
			message: "the batch did not finish within batch.timeout (" + timeout.String() + ")",
			actor:   "sweep", only: domain.BatchRunning})
		if errors.Is(err, errMRWontClose) {
			if err = r.d.blockBatch(ctx, b.ID, "timed out, and settling it: "+err.Error()); err == nil {
				n++
				continue
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("batch %d: %w", b.ID, err))
			continue
		}
		if !res.AlreadySettled {
			n++
		}
	}
	if err := r.d.recoverStranded(ctx); err != nil {
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// strandedWindow is how far back (by batch creation, database clock) the
// sweep looks for stranded members of FAILED batches. A stranded member
// comes from a settlement split in two that died in between; the next
// sweep — seconds later on any instance — finds it, so a day is ample
// and keeps the scan to the recent failed batches.
const strandedWindow = 24 * time.Hour

// recoverStranded moves on the members store.BatchStranded finds, per
// batch: close and re-read the failed batch's MR (it may still be open —
// the split settlement died before closing it), then one transaction,
// guarded on the batch still FAILED (OnlyIf) and on every member's
// versions: merged → the stranded members MERGED ("merged wins");
// otherwise back to CREATE_ADMITTED and re-admitted, as the settlement
// would have done. Idempotent: a recovered member has a waiting row or a
// MERGED binding and is not found again.
func (d Flow) recoverStranded(ctx context.Context) error {
	stranded, err := d.Store.BatchStranded(ctx, strandedWindow, 0)
	if err != nil || len(stranded) == 0 {
		return err
	}
	byBatch := map[int64][]string{}
	var order []int64
	for _, m := range stranded {
		if _, seen := byBatch[m.BatchID]; !seen {
			order = append(order, m.BatchID)
		}
		byBatch[m.BatchID] = append(byBatch[m.BatchID], m.OperationID)
	}
	var errs []error
	for _, id := range order {
		if err := d.recoverBatchMembers(ctx, id, byBatch[id]); err != nil {
			errs = append(errs, fmt.Errorf("stranded members of batch %d: %w", id, err))
			continue
		}
		d.Log().Warn("re-admitted stranded members of a failed batch", "batch", id, "members", len(byBatch[id]))
	}
	return errors.Join(errs...)
}

func (d Flow) recoverBatchMembers(ctx context.Context, batchID int64, ids []string) error {
	b, err := d.Store.BatchGet(ctx, batchID)
	if err != nil {
		return err
	}
	merged, err := d.closeAndRead(ctx, b)
	if err != nil {
		return err
	}
	states, err := d.Store.BatchMemberStates(ctx, b.ID)
	if err != nil {
		return err
	}
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	pick := func(m store.BatchMemberState) bool { return want[m.OperationID] && m.Binding != "" }
	p := store.BatchApplyParams{BatchID: b.ID, OnlyIf: domain.BatchFailed}
	if merged {
		p.Moves, err = planMoves(states, msMerged, pick, "sweep", fmt.Sprintf("batch %d: MR !%d merged (recovered)", b.ID, b.MRIID))
	} else {
		p.Moves, err = planMoves(states, msAdmitted, pick, "sweep",
			fmt.Sprintf("batch %d failed (%s): back to the waiting set (recovered)", b.ID, b.FailureCode))
		p.Readmit, p.ProjectID = ids, b.ProjectID
	}
	if err != nil {
		return err
	}
	if _, err = d.Store.BatchApply(ctx, p); err != nil {
		return err
	}
	if !merged {
		d.RoundNow(b.ProjectID) // the recovered members wait again
	}
	return nil
}

// RunTriggered runs the round of every project whose trigger is due at
// now (the loop passes the clock's now; tests pass chosen times) and
// returns what each did, in project order. An error is logged and leaves
// the project to its next trigger or the batch.interval safety net.
func (r *Rounds) RunTriggered(ctx context.Context, now time.Time) []RoundResult {
	due, _ := r.d.RoundTrigger.Take(now)
	out := make([]RoundResult, 0, len(due))
	for _, p := range due {
		res, err := r.RunRound(ctx, p)
		if err != nil && ctx.Err() == nil {
			r.d.Log().Warn("triggered batch round", "project", p, "err", err)
		}
		out = append(out, res)
	}
	return out
}
