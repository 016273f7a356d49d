package batch

import (
	"context"
	"time"

	"changeflow/internal/store"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/single"
)

// Store is what the batch path reads and writes beyond the engine's own
// writes, with what the single-request steps it reuses need
// (single.Store); *store.Store is one.
type Store interface {
	single.Store
	BatchApply(ctx context.Context, p store.BatchApplyParams) ([]store.BatchMember, error)
	BatchBlock(ctx context.Context, p store.BatchBlockParams) (int64, error)
	BatchBuildRelease(ctx context.Context, id int64, builder string) error
	BatchBuildTake(ctx context.Context, id int64, builder string) error
	BatchClaim(ctx context.Context, p store.BatchClaimParams) (store.Claim, error)
	BatchGet(ctx context.Context, id int64) (store.Batch, error)
	BatchList(ctx context.Context, p store.BatchListParams) (store.BatchPage, error)
	BatchMemberStates(ctx context.Context, batchID int64) ([]store.BatchMemberState, error)
	BatchMembers(ctx context.Context, batchID int64) ([]store.BatchMember, error)
	BatchResumable(ctx context.Context, p store.BatchResumableParams) (store.Batch, error)
	BatchStranded(ctx context.Context, within time.Duration, limit int) ([]store.StrandedMember, error)
	BatchTimedOut(ctx context.Context, maxAge time.Duration, limit int) ([]store.Batch, error)
	BatchWaiting(ctx context.Context, projectID int64, ids []string) ([]string, error)
}

// Flow is the batch path over the shared Env and its store: the batch
// steps (Register), the rounds that build batches (Rounds), and their
// settlement.
type Flow struct {
	flow.Env
	Store Store
}

// applier applies deploy confirmations through the callbacks' own guards.
func (d Flow) applier() callbacks.Applier {
	return callbacks.Applier{Env: d.Env, Store: d.Store}
}

// single is the single-request steps over d: a batch MR, once open, is
// handled by them.
func (d Flow) single() single.Steps {
	return single.Steps{Env: d.Env, Store: d.Store}
}
