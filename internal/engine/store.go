package engine

import (
	"context"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Store is what the engine needs of the database: claim due rows under a
// lease, write an outcome (or an intermediate state) under that lease,
// and give a row back. *store.Store implements it. Keeping it this narrow
// is what lets the engine know no business: every other read and write a
// step makes goes through the flow's own dependencies.
type Store interface {
	// WorkClaimDue claims at most limit due rows for owner.
	WorkClaimDue(ctx context.Context, owner string, lease time.Duration, limit int) ([]store.WorkItem, error)
	// WorkClaimOne claims operationID if it is due and not held elsewhere.
	WorkClaimOne(ctx context.Context, operationID, owner string, lease time.Duration) (store.WorkItem, bool, error)
	// WorkComplete writes an outcome under the lease, with its checked
	// transition.
	WorkComplete(ctx context.Context, p store.WorkCompleteParams) (store.WorkResult, error)
	// WorkReject writes the declared rejection state of a refused row.
	WorkReject(ctx context.Context, operationID string, l store.Lease, step int, binding domain.BindingStatus, reason, actor string) (store.WorkResult, error)
	// WorkRelease gives a row back, due again after delay.
	WorkRelease(ctx context.Context, operationID string, l store.Lease, delay time.Duration) error
}

// The store the composition root passes in satisfies the interface.
var _ Store = (*store.Store)(nil)
