package lifecycle

import (
	"context"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// Store is what the lifecycle reads and writes; *store.Store is one.
type Store interface {
	BindingGet(ctx context.Context, subject, targetKey string) (store.Binding, error)
	BindingGetByOperation(ctx context.Context, operationID string) (store.Binding, error)
	ExpiredRenewals(ctx context.Context, limit int) ([]store.ExpiredRenewal, error)
	OperationGet(ctx context.Context, operationID string) (store.Operation, error)
	RenewalLapse(ctx context.Context, p store.RenewalLapseParams) error
	RevocationCandidateOf(ctx context.Context, grantOperationID string) (store.RevocationCandidate, domain.BindingStatus, error)
	RevocationCandidatesExpired(ctx context.Context, after store.ExpiredCursor, limit int) ([]store.RevocationCandidate, store.ExpiredCursor, error)
	RevocationCreate(ctx context.Context, p store.RevocationCreateParams) ([]store.RevocationCreated, error)
}

// Revoker creates revocations: the expiry scan's, a give-back's and an
// operator's, each once per grant whoever races (store.RevocationCreate).
type Revoker struct {
	flow.Env
	Store Store
}
