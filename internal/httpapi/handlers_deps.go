package httpapi

import (
	"context"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/doctor"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
)

// The narrow interfaces the business handlers need. Each is a subset of
// *store.Store's named operations with the store's own signatures, so the
// composition root passes the store itself and there is no adapter to keep
// in step. The cost is that httpapi depends on the store's value types
// (store.Operation, store.Binding …); handlers still never see SQL, and
// tests substitute fakes or — as they mostly do — a real store on both
// databases.

// RequestStore is what the user request endpoints need (submit, status,
// "my records", stats).
type RequestStore interface {
	IdempotencyBegin(ctx context.Context, p store.IdempotencyBeginParams) (store.IdempotencyResult, error)
	IdempotencyComplete(ctx context.Context, p store.IdempotencyCompleteParams) error
	IdempotencyRelease(ctx context.Context, subject, key, operationID string) (bool, error)
	OperationSubmit(ctx context.Context, p store.OperationSubmitParams) (store.OperationSubmitResult, error)
	OperationGet(ctx context.Context, operationID string) (store.Operation, error)
	// OperationViewGet is the status read's one statement: the columns
	// of the operation and of the binding it owns that the view shows.
	OperationViewGet(ctx context.Context, operationID string) (store.OperationWithBinding, error)
	OperationListBySubject(ctx context.Context, p store.OperationListBySubjectParams) (store.OperationPage, error)
	OperationStepList(ctx context.Context, operationID string) ([]store.OperationStep, error)
	// OperationRenewalsOf: the renewals of a request, newest first — the
	// status read of an old request follows its chain of renewals.
	OperationRenewalsOf(ctx context.Context, p store.OperationRenewalsOfParams) ([]store.Operation, error)
	BindingGetByOperation(ctx context.Context, operationID string) (store.Binding, error)
	BindingGet(ctx context.Context, subject, targetKey string) (store.Binding, error)
	// BindingListBySubject: the caller's bindings, for the Targets page's
	// "mine" (targets.go).
	BindingListBySubject(ctx context.Context, subject string) ([]store.Binding, error)
	BatchQueuePosition(ctx context.Context, operationID string) (store.QueuePosition, error)
	BatchWaitingCount(ctx context.Context, projectID int64) (int, error)
	// BatchGet: the status read says when a member's batch is BLOCKED.
	BatchGet(ctx context.Context, id int64) (store.Batch, error)
}

// OpsStore is what the read-only operations endpoints need.
type OpsStore interface {
	OperationGet(ctx context.Context, operationID string) (store.Operation, error)
	OperationStepList(ctx context.Context, operationID string) ([]store.OperationStep, error)
	BindingGetByOperation(ctx context.Context, operationID string) (store.Binding, error)
	BatchQueuePosition(ctx context.Context, operationID string) (store.QueuePosition, error)
	BatchGet(ctx context.Context, id int64) (store.Batch, error)
	// OperationFind is the search over every request (ops_find.go).
	OperationFind(ctx context.Context, p store.OperationFindParams) (store.OperationPage, error)
	BatchList(ctx context.Context, p store.BatchListParams) (store.BatchPage, error)
	BatchMembers(ctx context.Context, batchID int64) ([]store.BatchMember, error)
	AuditListByResource(ctx context.Context, resource string, limit int) ([]store.AuditRecord, error)
	AuditListByActionPrefix(ctx context.Context, prefix string, limit int) ([]store.AuditRecord, error)
	ApprovalCallbackList(ctx context.Context, operationID string, limit int) ([]store.ApprovalCallbackRecord, error)
	DeployCallbackListByMR(ctx context.Context, projectID, mrIID int64, limit int) ([]store.DeployCallbackRecord, error)
	DeployCallbackList(ctx context.Context, p store.DeployCallbackListParams) ([]store.DeployCallbackRecord, error)
	// For the expired entries changeflow does not own (ops_unowned.go).
	OperationOwnersOf(ctx context.Context, ids []string) ([]store.OperationOwner, error)
	DatabaseNow(ctx context.Context) (time.Time, error)
	// The access history (ops_access.go).
	AccessAtTarget(ctx context.Context, target string, at time.Time) ([]store.AccessInterval, error)
	AccessAtSubject(ctx context.Context, subject string, at time.Time) ([]store.AccessInterval, error)
	AccessHistory(ctx context.Context, target string, from, to time.Time, limit int) ([]store.AccessInterval, bool, error)
	AccessOfOperation(ctx context.Context, operationID string) (store.AccessInterval, error)
}

// CallbackStore records callback deliveries once per delivery id: the
// durable inbox (callbacks.go).
type CallbackStore interface {
	ApprovalCallbackInsert(ctx context.Context, p store.ApprovalCallbackParams) (inserted bool, err error)
	DeployCallbackInsert(ctx context.Context, p store.DeployCallbackParams) (store.DeployCallbackInserted, error)
	GitLabEventInsert(ctx context.Context, eventUUID, kind string) (inserted bool, err error)
}

// ConfigSource reads the configuration in force; *config.Manager
// implements it. Handlers read it once per request.
type ConfigSource interface {
	Current() *config.Snapshot
}

// WorkSubmitter runs an operation's due action now if the worker pool
// takes it; *engine.Engine implements it. A pool refusal is persisted
// by the engine as the action's declared failure before it returns, so a
// poller sees "failed", never "processing".
type WorkSubmitter interface {
	Submit(ctx context.Context, operationID string) (ok bool, err error)
}

// FileReader reads a file of the config repo; gitlab.GitLab (the port)
// implements it. The preview uses it as the committer bot.
type FileReader interface {
	GetFile(ctx context.Context, project, path, ref string) (gitlab.File, error)
}

// Business is the business handlers' dependencies (Deps.Business). A nil
// store makes its endpoints answer 500 with the generic message (logged),
// never a fake success.
type Business struct {
	// Config is the configuration source (targets, workflow switch,
	// idempotency TTL, callback tokens, gitlab.projects).
	Config ConfigSource
	// Requests backs /api/requests and /api/stats.
	Requests RequestStore
	// Ops backs /ops/*.
	Ops OpsStore
	// OpsActions backs the ops write endpoints of the single-request path
	// and reconciliation (ops_write.go); nil answers them with 500.
	OpsActions OpsActions
	// BatchActions backs the batch write endpoints (ops_batch_write.go):
	// POST /ops/rounds and POST /ops/batches/{id}/settle; nil answers
	// them with 500.
	BatchActions BatchActions
	// Revoker backs the revoke endpoints (revoke.go); nil answers them
	// with 500.
	Revoker Revoker
	// Reviews backs the access-review routes (reviews.go); nil answers
	// them with 500.
	Reviews ReviewStore
	// Preferences backs a person's notification preferences
	// (preferences.go); nil answers them with 500.
	Preferences PreferenceStore
	// Notifications backs the console's view of the notification outbox
	// (ops_notifications.go); nil answers it with 500.
	Notifications NotificationStore
	// ReviewRemovals starts a revoke's removal as it is decided
	// (*review.Reviews); nil leaves it to the review pass.
	ReviewRemovals ReviewRemovals
	// Callbacks is the callback inbox.
	Callbacks CallbackStore
	// Sink acts on a recorded callback; nil until the workflow implements
	// it, and callbacks are then only recorded (callbacks.go).
	Sink CallbackSink
	// Files reads the config repo for the preview and the expired
	// entries changeflow does not own (ops_unowned.go); nil degrades
	// every preview to empty data and answers the latter with 500.
	Files FileReader
	// AccessCheck tells where changeflow's records and a target's file on
	// the default branch disagree, for GET /ops/access and
	// /ops/access/history by target (ops_access_check.go); nil leaves
	// the answers without discrepancies.
	AccessCheck AccessChecker
	// Withdraw backs POST /api/requests/{operationId}/withdraw
	// (*withdraw.Withdrawer); nil answers it with 500.
	Withdraw RequestWithdrawer
	// Work hands a new request's first action to the workflow's bounded
	// pool at once (*engine.Engine); nil leaves it to the engine's
	// poller, which finds it due in the operation row.
	Work WorkSubmitter
	// Checks runs the deployment checks for GET /ops/checks (the same as
	// `changeflow doctor`); nil answers it with 500.
	Checks func(context.Context) doctor.Report
	// Audit backs GET /ops/audit/export and GET /ops/audit/key
	// (ops_audit.go); nil answers them with 500.
	Audit AuditChain
	// Events feeds GET /api/requests/{operationId}/events (events.go);
	// serve closes it when shutting down. Nil answers the stream with 500.
	Events *EventFeed
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewID generates server-side operationIds; nil means a random UUID.
	NewID func() string
}
