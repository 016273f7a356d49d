package single

import (
	"context"

	"changeflow/internal/store"
	"changeflow/internal/workflow/callbacks"
)

// Store is what the single-request steps read and write beyond the
// engine's own writes, with what applying a decision or a confirmation
// needs (callbacks.Store); *store.Store is one.
type Store interface {
	callbacks.Store
	AuditInsert(ctx context.Context, p store.AuditInsertParams) (inserted bool, err error)
	BatchMemberOperations(ctx context.Context, batchID int64) ([]store.Operation, error)
	OperationStepList(ctx context.Context, operationID string) ([]store.OperationStep, error)
}

// RetriggerStore is what an operator's retrigger reads and writes;
// *store.Store is one.
type RetriggerStore interface {
	BatchGet(ctx context.Context, id int64) (store.Batch, error)
	BatchMembers(ctx context.Context, batchID int64) ([]store.BatchMember, error)
	BatchQueuePosition(ctx context.Context, operationID string) (store.QueuePosition, error)
	BatchResume(ctx context.Context, id, version int64) (int64, error)
	BindingGetByOperation(ctx context.Context, operationID string) (store.Binding, error)
	OperationGet(ctx context.Context, operationID string) (store.Operation, error)
	WorkCallbackApply(ctx context.Context, p store.WorkCallbackParams) (store.WorkCallbackResult, error)
}
