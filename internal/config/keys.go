package config

import "strings"

// Keys of the flat (non-family) items, for the generic accessors
// (Snapshot.Duration, Int, Bool, String, List) and for Overlay maps.
// Keys are camelCase and matched case-insensitively in every source.
const (
	KeyServerListen            = "server.listen"
	KeyServerReadHeaderTimeout = "server.readHeaderTimeout"
	KeyServerReadTimeout       = "server.readTimeout"
	KeyServerWriteTimeout      = "server.writeTimeout"
	KeyServerIdleTimeout       = "server.idleTimeout"
	KeyServerShutdownTimeout   = "server.shutdownTimeout"
	KeyServerPublicURL         = "server.publicURL"

	KeyDatabaseDriver          = "database.driver"
	KeyDatabaseDSN             = "database.dsn"
	KeyDatabaseMaxOpenConns    = "database.maxOpenConns"
	KeyDatabaseMaxIdleConns    = "database.maxIdleConns"
	KeyDatabaseConnMaxLifetime = "database.connMaxLifetime"
	KeyDatabaseConnMaxIdleTime = "database.connMaxIdleTime"
	KeyDatabaseSyncWait        = "database.syncWait"

	KeyGitLabBaseURL  = "gitlab.baseURL"
	KeyGitLabProjects = "gitlab.projects"

	KeyGitLabRateAPIPerMinute       = "gitlab.rateLimit.apiPerMinute"
	KeyGitLabRatePipelinesPerMinute = "gitlab.rateLimit.pipelinesPerMinute"
	KeyGitLabRateMissedPipeline     = "gitlab.rateLimit.missedPipelineAfter"

	KeyApprovalBaseURL           = "approval.baseURL"
	KeyApprovalMaxRetries        = "approval.maxRetries"
	KeyApprovalBackoff           = "approval.backoffMs"
	KeyApprovalCheckItemsEnabled = "approval.checkItems.enabled"
	// KeyApprovalVerifyDecisions makes an approval callback a wake-up: the
	// decision applied is the one read back from the approval system.
	KeyApprovalVerifyDecisions = "approval.verifyDecisions"
	KeyPermissionBaseURL       = "permission.baseURL"
	KeyOIDCIssuer              = "oidc.issuer"
	KeyIdentityDirectoryFile   = "identity.directoryFile"

	KeyInstanceID                = "instance.id"
	KeyInstanceHeartbeatInterval = "instance.heartbeatInterval"
	KeyInstanceLiveAfter         = "instance.liveAfter"
	KeySimEmbedded               = "sim.embedded"
	KeySimListen                 = "sim.listen"
	KeyLogLevel                  = "log.level"

	KeyEtcdEndpoints   = "config.etcd.endpoints"
	KeyEtcdPrefix      = "config.etcd.prefix"
	KeyEtcdDialTimeout = "config.etcd.dialTimeout"
	KeyEtcdUsername    = "config.etcd.username"
	KeyEtcdPassword    = "config.etcd.password"
	KeyEtcdTLSCA       = "config.etcd.tls.ca"
	KeyEtcdTLSCert     = "config.etcd.tls.cert"
	KeyEtcdTLSKey      = "config.etcd.tls.key"

	KeyRateLimitWindow         = "ratelimit.window"
	KeyRateLimitTrustedProxies = "ratelimit.trustedProxies"
	KeyIdentityTrustedProxies  = "identity.trustedProxies"
	KeyOIDCAudience            = "oidc.audience"
	KeyOIDCAccountClaim        = "oidc.accountClaim"
	KeyOIDCAccountField        = "oidc.accountField"
	KeyOIDCJWKSMinRefresh      = "oidc.jwksMinRefresh"
	KeyOIDCClockSkew           = "oidc.clockSkew"
	KeyRateLimitGlobalEnabled  = "ratelimit.global.enabled"
	KeyAccessTimezone          = "access.timezone"

	KeyWorkflowApproveFirst     = "workflow.approveFirst"
	KeyWorkflowWorkers          = "workflow.workers"
	KeyWorkflowQueueSize        = "workflow.queueSize"
	KeyWorkflowLeaseDuration    = "workflow.leaseDuration"
	KeyWorkflowMaxRegenerations = "workflow.maxRegenerations"
	KeyWorkflowPollInterval     = "workflow.pollInterval"

	KeyReconcileInterval = "reconcile.interval"
	KeyReconcileMinAge   = "reconcile.minAge"
	KeyReconcileMaxAge   = "reconcile.maxAge"
	// KeyReconcileInference switches the watermark inference on (default)
	// or off (exact matches only).
	KeyReconcileInference = "reconcile.inference"

	KeyExpiryInterval  = "expiry.interval"
	KeyExpiryChunkSize = "expiry.chunkSize"
	// KeyExpiryRenewWindow is the share of a grant's duration, in percent,
	// at its end during which re-applying renews it.
	KeyExpiryRenewWindow = "expiry.renewWindow"
	// KeyExpiryRenewWindowMin is the shortest renewal window, whatever the
	// grant's duration.
	KeyExpiryRenewWindowMin = "expiry.renewWindowMin"

	KeyBatchInterval      = "batch.interval"
	KeyBatchMaxRequests   = "batch.maxRequests"
	KeyBatchMaxSplitDepth = "batch.maxSplitDepth"
	KeyBatchTimeout       = "batch.timeout"
	KeyBatchResumeAfter   = "batch.resumeAfter"
	// KeyBatchGatherWindow is how long after the first admission of a
	// burst its project's round runs (batch.interval stays the safety net).
	KeyBatchGatherWindow = "batch.gatherWindow"
	// KeyBatchStrayInterval is how often every instance closes the open
	// MRs of batch branches that no active batch records or may record.
	KeyBatchStrayInterval = "batch.strayInterval"

	// The live status stream (GET /api/requests/{operationId}/events).
	KeyEventsPollInterval = "events.pollInterval"
	KeyEventsHeartbeat    = "events.heartbeat"
	KeyEventsMaxStreams   = "events.maxStreams"
	// KeyEventsMaxStreamsPerCaller bounds one caller's open streams on an
	// instance, so one person cannot take every stream of events.maxStreams.
	KeyEventsMaxStreamsPerCaller = "events.maxStreamsPerCaller"

	// KeyAuthzCacheTTL is how long a permission check's answer is reused
	// for the same account and rule codes; 0 asks every time.
	KeyAuthzCacheTTL = "authz.cacheTTL"

	// KeyAuditSigningKey is the Ed25519 key that signs every audit export's
	// manifest (secret); KeyAuditRetention how long the audit chain keeps a
	// record; KeyAuditChainInterval how often each instance chains new
	// records (docs/audit.md).
	KeyAuditSigningKey    = "audit.signingKey"
	KeyAuditRetention     = "audit.retention"
	KeyAuditChainInterval = "audit.chainInterval"

	// KeyAccessRepoScanInterval is how often each instance reads the new
	// commits of every binding file on the default branch into the
	// access history (docs/api.md, "Access history"); 0 turns it off.
	KeyAccessRepoScanInterval = "access.repoScanInterval"

	// KeyNotifyAllowSafetyOptOut lets a person turn off the safety
	// messages (access.expiring, access.removed) on their preferences
	// page (docs/notifications.md, "Preferences").
	KeyNotifyAllowSafetyOptOut = "notify.allowSafetyOptOut"
	// The notification channels and the outbox's delivery
	// (docs/notifications.md): webhooks, chat incoming webhooks,
	// the SMTP server and the operators' addresses; how often a delivery
	// is tried, and when the expiry reminders go out.
	KeyNotifyWebhooks        = "notify.webhooks"
	KeyNotifyChat            = "notify.chat"
	KeyNotifySMTPHost        = "notify.smtp.host"
	KeyNotifySMTPPort        = "notify.smtp.port"
	KeyNotifySMTPUsername    = "notify.smtp.username"
	KeyNotifySMTPPassword    = "notify.smtp.password"
	KeyNotifySMTPFrom        = "notify.smtp.from"
	KeyNotifySMTPStartTLS    = "notify.smtp.startTLS"
	KeyNotifyOperators       = "notify.operators"
	KeyNotifyMaxAttempts     = "notify.maxAttempts"
	KeyNotifyExpiryReminders = "notify.expiryReminders"
	// KeyNotifyInterval: how often each instance's deliverer looks for due
	// events; KeyNotifyReminderScanInterval: how often it also scans for
	// the expiry reminders due.
	KeyNotifyInterval             = "notify.interval"
	KeyNotifyReminderScanInterval = "notify.reminderScanInterval"

	KeyIdempotencyTTL             = "idempotency.ttl"
	KeyIdempotencyCleanupInterval = "idempotency.cleanupInterval"
	KeyIdempotencyInFlightLease   = "idempotency.inFlightLease"

	// KeyUIContact names whom a person asks when a request failed (the web
	// app's failure page): a team, a chat channel, an address.
	KeyUIContact = "ui.contact"
	// DefaultUIContact is ui.contact's fallback.
	DefaultUIContact = "the team that runs changeflow"

	KeyBreakerFailures = "breaker.failures"
	KeyBreakerOpenFor  = "breaker.openFor"
)

// Polling tiers. Each tier has the four keys
// polling.<tier>.{shortInterval,shortAttempts,longInterval,timeout}.
const (
	PollingPipeline = "pipeline"
	PollingRebase   = "rebase"
	// PollingApproval is the fallback poll of the approval system while a
	// request waits in APPROVAL_SENT (its callback may be lost).
	PollingApproval = "approval"
)

// Callback token names (docs/api.md, "Callbacks"). They are always listed by Effective(),
// so a missing one is visible as "reject every callback".
const (
	CallbackApproval = "approval"
	CallbackDeploy   = "deploy"
	CallbackGitLab   = "gitlab"
)

// previousSuffix turns a callback token name into the name of its
// previous value, e.g. approvalPrevious: the token a sender may still use
// while a rotation is under way (docs/configuration.md, "Rotating a
// callback token").
const previousSuffix = "Previous"

// CallbackPreviousKey is the item holding the previous value of the
// callback token called name, e.g. callbacks.tokens.approvalPrevious.
func CallbackPreviousKey(name string) string {
	return famCallbacks + "." + strings.ToLower(name) + previousSuffix
}

// callbackEntries maps the lower-case spelling of every callback token
// name changeflow reads onto its canonical spelling. The family's free
// segment is otherwise lower-cased, which would turn approvalPrevious into
// approvalprevious in /ops/config and in every message.
func callbackEntries() map[string]string {
	m := map[string]string{}
	for _, n := range []string{CallbackApproval, CallbackDeploy, CallbackGitLab} {
		m[n] = n
		m[strings.ToLower(n+previousSuffix)] = n + previousSuffix
	}
	return m
}

// Default rate-limit bucket and the authorization route names that have
// built-in rule codes (docs/api.md, "Operations endpoints"). httpapi registers its routes under these
// names; any other route name has no rules unless configured, i.e. deny.
const (
	BucketApply = "apply"
	// BucketPreview limits GET /api/targets/{key}/preview per caller: each
	// call reads a file from GitLab.
	BucketPreview = "preview"
	// BucketStats limits GET /api/stats per caller: each call counts rows.
	BucketStats = "stats"
	// BucketCallbacks limits the three callback routes per source address
	// (callbacks carry no login), before their token is checked.
	BucketCallbacks = "callbacks"
	// BucketAdminCheck limits GET /api/requests/{operationId} for an
	// operationId that is not the caller's (or does not exist): each such
	// call asks the permission service whether the caller is an admin.
	BucketAdminCheck = "adminCheck"
	// BucketEvents limits opening GET /api/requests/{operationId}/events
	// per caller: each opening reads the request and its history, and a
	// client reconnecting in a loop would otherwise cost that every time.
	BucketEvents = "events"
	// BucketAuthz limits, per caller, every route that asks the permission
	// service (GET /api/me and every /ops/ route), ahead of authorization:
	// a flood of checks that slows the service trips its breaker, which
	// denies every operator.
	BucketAuthz = "authz"

	RouteOpsRequestGet       = "ops-request-get"
	RouteOpsRequestRetrigger = "ops-request-retrigger"
	// RouteOpsRequestRevoke: POST /ops/requests/{operationId}/revoke.
	RouteOpsRequestRevoke = "ops-request-revoke"
	// RouteOpsRequestClose: POST /ops/requests/{operationId}/close.
	RouteOpsRequestClose = "ops-request-close"
	RouteOpsBatchesGet   = "ops-batches-get"
	RouteOpsBatchSettle  = "ops-batch-settle"
	RouteOpsRoundsRun    = "ops-rounds-run"
	RouteOpsReconcileRun = "ops-reconcile-run"
	// RouteOpsExpiryScan: POST /ops/expiry/scan, a manual expiry scan.
	RouteOpsExpiryScan = "ops-expiry-scan"
	RouteOpsConfigGet  = "ops-config-get"
	// RouteOpsReviewGet: GET /ops/reviews and GET /ops/reviews/{id}.
	RouteOpsReviewGet = "ops-review-get"
	// RouteOpsReviewOpen: POST /ops/reviews; its rules also make a caller
	// of the review routes an operator who may act for the owners.
	RouteOpsReviewOpen = "ops-review-open"
	// RouteOpsChecksGet: GET /ops/checks, the deployment checks.
	RouteOpsChecksGet = "ops-checks-get"
)

// Families: keys with a free segment (target key, bucket, route, token name,
// dependency). Their fixed parts are matched case-insensitively; the free
// segment keeps its spelling for targets (target keys are identifiers users
// see) and is lower-cased for the others (they are names in code).
const (
	famTargets   = "targets"
	famRateLimit = "ratelimit"
	famRoutes    = "authz.routes"
	famGitLabTok = "gitlab.tokens"
	famCallbacks = "callbacks.tokens"
	famHTTP      = "http.timeout"
)

// targetFields are the keys under targets.<key>, canonical spelling.
func targetFields() []string {
	return []string{"title", "file", "accessMode", "window.start", "window.end", "batching", "maxDays", "owners", "review.every", "review.dueIn"}
}
