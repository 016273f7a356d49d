package workflow

import (
	"context"
	"fmt"
	"time"

	"changeflow/internal/store"
)

// A batch MR nobody owns (docs/workflow.md, "A round whose batch moved
// on"). A round opens its batch's MR only after looking it up by the
// batch's branch, but the look-up and the creation are two calls apart
// from the database: meanwhile another instance's round may resume the
// batch (its builder looked dead, or batch.resumeAfter passed on a loaded
// machine), record its own MR and merge it, or the batch may end without
// one (an operator's or the sweep's settlement that found no MR, every
// member settled as nothing to remove). GitLab refuses a second *open* MR
// for a branch, not one beside a merged or closed MR, so the late creation
// succeeds — and since only the MR recorded on the batch is ever driven or
// settled, that MR stayed open for good (the defect seen once in
// TestServeThreeInstancesRevokeEachExpiredGrantOnce: every removal merged
// and REVOKED, changeflow/batch-2 still open).
//
// The rule: the round that created (or adopted) an MR its batch does not
// record — because the batch records another MR, or ended — closes it
// before it returns. Merged wins: an MR that reads merged is left alone
// and logged. The round also reads the batch again just before it creates
// the MR and opens none when the batch moved on, which leaves only a
// creation already in flight to be closed this way. What this does not
// cover: a round killed between such a late creation and its close; the
// MR then stays open and is closed by hand (the batch has ended, so no
// sweep looks at it any more).

// strayCloseTimeout bounds the close of a stray MR, which runs even when
// the round's context ended: it is the round's own write to undo.
const strayCloseTimeout = 30 * time.Second

// closeStrayMR closes MR iid of batch b's branch, which this round opened
// or adopted and b does not record (b records another MR, or ended).
func (d Deps) closeStrayMR(ctx context.Context, b store.Batch, project string, iid int64) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), strayCloseTimeout)
	defer cancel()
	merged, err := d.closeAndReadMR(cctx, project, iid)
	if err != nil {
		return fmt.Errorf("close MR !%d of batch %d (%s, MR !%d recorded): %w", iid, b.ID, b.Status, b.MRIID, err)
	}
	if merged {
		// Nothing merges an MR no batch records but a person; its change
		// is on the default branch, and whatever the batch did with its
		// members (merged with the recorded MR, or re-admitted) stands:
		// re-applying a member's edit is idempotent.
		d.logger().Error("batch round: an MR its batch does not record was merged",
			"batch", b.ID, "status", b.Status.String(), "mr", iid, "recorded", b.MRIID)
		return nil
	}
	d.logger().Warn("batch round: closed an MR opened after its batch moved on",
		"batch", b.ID, "status", b.Status.String(), "mr", iid, "recorded", b.MRIID)
	return nil
}
