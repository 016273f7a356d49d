package batch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

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
	merged, sha, err := d.closeAndRead(ctx, b)
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
		p.MergeSHA = sha
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
