package config

import (
	"crypto/ed25519"
	"time"
)

// The grouped views below read several items at once for the package that
// owns them. They carry no Resolutions; use Snapshot.Resolution(key) or the
// generic accessors when the reason matters.

// Server is server.*: read once when the listener starts.
type Server struct {
	Listen            string
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
}

// Server returns server.*.
func (s *Snapshot) Server() Server {
	return Server{
		Listen:            s.str(KeyServerListen),
		ReadHeaderTimeout: s.dur(KeyServerReadHeaderTimeout),
		ReadTimeout:       s.dur(KeyServerReadTimeout),
		WriteTimeout:      s.dur(KeyServerWriteTimeout),
		IdleTimeout:       s.dur(KeyServerIdleTimeout),
		ShutdownTimeout:   s.dur(KeyServerShutdownTimeout),
	}
}

// Database is database.*: the pool is opened once.
type Database struct {
	// Driver is DriverSQLite or DriverMySQL.
	Driver string
	// DSN is in clear; never log it (Resolution.Value is the masked form).
	DSN             string
	MaxOpenConns    int
	MaxIdleConns    int
	ConnMaxLifetime time.Duration
	ConnMaxIdleTime time.Duration
	// SyncWait is Galera's wsrep_sync_wait mask (store.WithSyncWait).
	SyncWait int
}

// Database returns database.*.
func (s *Snapshot) Database() Database {
	return Database{
		Driver:          s.str(KeyDatabaseDriver),
		DSN:             s.str(KeyDatabaseDSN),
		MaxOpenConns:    s.num(KeyDatabaseMaxOpenConns),
		MaxIdleConns:    s.num(KeyDatabaseMaxIdleConns),
		ConnMaxLifetime: s.dur(KeyDatabaseConnMaxLifetime),
		ConnMaxIdleTime: s.dur(KeyDatabaseConnMaxIdleTime),
		SyncWait:        s.num(KeyDatabaseSyncWait),
	}
}

// Workflow is workflow.*.
type Workflow struct {
	// ApproveFirst selects the approve-first flow; false (the default and
	// the fallback) is the legacy flow.
	ApproveFirst  bool
	Workers       int
	QueueSize     int
	LeaseDuration time.Duration
	// MaxRegenerations bounds how often a single-request MR whose rebase
	// conflicted is regenerated on the target's head (0 = never) when the
	// conflict is not made only by changeflow's own merges, which always
	// regenerate.
	MaxRegenerations int
	// PollInterval is how long an idle engine waits before it looks for
	// due work again; the engine re-reads it before every wait.
	PollInterval time.Duration
}

// Workflow returns workflow.*.
func (s *Snapshot) Workflow() Workflow {
	return Workflow{
		ApproveFirst:     s.flag(KeyWorkflowApproveFirst),
		Workers:          s.num(KeyWorkflowWorkers),
		QueueSize:        s.num(KeyWorkflowQueueSize),
		LeaseDuration:    s.dur(KeyWorkflowLeaseDuration),
		MaxRegenerations: s.num(KeyWorkflowMaxRegenerations),
		PollInterval:     s.dur(KeyWorkflowPollInterval),
	}
}

// Approval is approval.*.
type Approval struct {
	BaseURL    string
	MaxRetries int
	Backoff    time.Duration
	// CheckItems selects the direct-HTTP approver that sends check items;
	// false is the client-library approver.
	CheckItems bool
	// VerifyDecisions (approval.verifyDecisions) treats an approval
	// callback as a wake-up: the decision applied is read back from the
	// approval system (docs/security.md, Callbacks).
	VerifyDecisions bool
}

// Approval returns approval.*.
func (s *Snapshot) Approval() Approval {
	return Approval{
		BaseURL:         s.str(KeyApprovalBaseURL),
		MaxRetries:      s.num(KeyApprovalMaxRetries),
		Backoff:         s.dur(KeyApprovalBackoff),
		CheckItems:      s.flag(KeyApprovalCheckItemsEnabled),
		VerifyDecisions: s.flag(KeyApprovalVerifyDecisions),
	}
}

// GitLabRateLimit is gitlab.rateLimit.*: this instance's pace towards
// GitLab (0 = unpaced) and how long a head without a pipeline waits before
// changeflow creates it.
type GitLabRateLimit struct {
	APIPerMinute        int
	PipelinesPerMinute  int
	MissedPipelineAfter time.Duration
}

// GitLabRateLimit returns gitlab.rateLimit.*.
func (s *Snapshot) GitLabRateLimit() GitLabRateLimit {
	return GitLabRateLimit{
		APIPerMinute:        s.num(KeyGitLabRateAPIPerMinute),
		PipelinesPerMinute:  s.num(KeyGitLabRatePipelinesPerMinute),
		MissedPipelineAfter: s.dur(KeyGitLabRateMissedPipeline),
	}
}

// Reconcile is reconcile.*: the sliding window [now-MaxAge, now-MinAge],
// and whether the watermark inference is on.
type Reconcile struct {
	Interval time.Duration
	MinAge   time.Duration
	MaxAge   time.Duration
	// Inference validates an MR below its project's deployed watermark;
	// false leaves only exact matches (a deploy callback for the MR).
	Inference bool
}

// Reconcile returns reconcile.*; MinAge < MaxAge always holds.
func (s *Snapshot) Reconcile() Reconcile {
	return Reconcile{Interval: s.dur(KeyReconcileInterval), MinAge: s.dur(KeyReconcileMinAge), MaxAge: s.dur(KeyReconcileMaxAge),
		Inference: s.flag(KeyReconcileInference)}
}

// Events is events.*: the live status stream.
type Events struct {
	PollInterval time.Duration
	Heartbeat    time.Duration
	MaxStreams   int
	// MaxStreamsPerCaller bounds one caller's open streams on an instance.
	MaxStreamsPerCaller int
}

// AuthzCacheTTL is authz.cacheTTL: how long a permission check's answer
// is reused; 0 disables the cache.
func (s *Snapshot) AuthzCacheTTL() time.Duration { return s.dur(KeyAuthzCacheTTL) }

// Events returns events.*.
func (s *Snapshot) Events() Events {
	return Events{PollInterval: s.dur(KeyEventsPollInterval), Heartbeat: s.dur(KeyEventsHeartbeat), MaxStreams: s.num(KeyEventsMaxStreams),
		MaxStreamsPerCaller: s.num(KeyEventsMaxStreamsPerCaller)}
}

// Expiry is expiry.*: the expiry scan's interval and chunk size, and the
// renewal window.
type Expiry struct {
	Interval  time.Duration
	ChunkSize int
	// RenewWindowPercent and RenewWindowMin make the renewal window: the
	// last max(RenewWindowPercent % of the grant's duration,
	// RenewWindowMin) before its expiry (domain.RenewWindow).
	RenewWindowPercent int
	RenewWindowMin     time.Duration
}

// Expiry returns expiry.*.
func (s *Snapshot) Expiry() Expiry {
	return Expiry{
		Interval: s.dur(KeyExpiryInterval), ChunkSize: s.num(KeyExpiryChunkSize),
		RenewWindowPercent: s.num(KeyExpiryRenewWindow), RenewWindowMin: s.dur(KeyExpiryRenewWindowMin),
	}
}

// Batch is batch.*.
type Batch struct {
	Interval      time.Duration
	MaxRequests   int
	MaxSplitDepth int
	Timeout       time.Duration
	// ResumeAfter: how old a RUNNING batch without a recorded MR must be
	// before another round takes over building it (its round died).
	ResumeAfter time.Duration
	// GatherWindow: how long after the first admission of a burst the
	// project's round runs.
	GatherWindow time.Duration
	// StrayInterval: how often an instance closes the open MRs of batch
	// branches no active batch records or may record.
	StrayInterval time.Duration
}

// Batch returns batch.*.
func (s *Snapshot) Batch() Batch {
	return Batch{
		Interval:      s.dur(KeyBatchInterval),
		MaxRequests:   s.num(KeyBatchMaxRequests),
		MaxSplitDepth: s.num(KeyBatchMaxSplitDepth),
		Timeout:       s.dur(KeyBatchTimeout),
		ResumeAfter:   s.dur(KeyBatchResumeAfter),
		GatherWindow:  s.dur(KeyBatchGatherWindow),
		StrayInterval: s.dur(KeyBatchStrayInterval),
	}
}

// PollingTier is one polling.<tier>.* group: ShortAttempts polls
// every ShortInterval, then every LongInterval until Timeout.
type PollingTier struct {
	ShortInterval time.Duration
	ShortAttempts int
	LongInterval  time.Duration
	Timeout       time.Duration
}

// Polling returns polling.<tier>.* for PollingPipeline, PollingRebase or
// PollingApproval; an unknown tier gets the pipeline tier.
func (s *Snapshot) Polling(tier string) PollingTier {
	if tier != PollingRebase && tier != PollingApproval {
		tier = PollingPipeline
	}
	p := "polling." + tier + "."
	return PollingTier{
		ShortInterval: s.dur(p + "shortInterval"),
		ShortAttempts: s.num(p + "shortAttempts"),
		LongInterval:  s.dur(p + "longInterval"),
		Timeout:       s.dur(p + "timeout"),
	}
}

// Audit is audit.*: the chain's retention and chaining interval, and the
// export's signing key (nil when unset).
type Audit struct {
	SigningKey    ed25519.PrivateKey
	Retention     time.Duration
	ChainInterval time.Duration
}

// Audit returns audit.*.
func (s *Snapshot) Audit() Audit {
	key, _ := s.vals[KeyAuditSigningKey].(ed25519.PrivateKey)
	return Audit{SigningKey: key, Retention: s.dur(KeyAuditRetention), ChainInterval: s.dur(KeyAuditChainInterval)}
}

// AccessRepoScanInterval is access.repoScanInterval: how often the
// binding files' history is read into the access history (0: never).
func (s *Snapshot) AccessRepoScanInterval() time.Duration { return s.dur(KeyAccessRepoScanInterval) }

// NotifyAllowSafetyOptOut is notify.allowSafetyOptOut: whether a person
// may turn off the safety messages (notify.Kind.Safety).
func (s *Snapshot) NotifyAllowSafetyOptOut() bool { return s.flag(KeyNotifyAllowSafetyOptOut) }

// Idempotency is idempotency.*.
type Idempotency struct {
	TTL             time.Duration
	CleanupInterval time.Duration
	// InFlightLease is how long an IN_FLIGHT key belongs to the request
	// that took it before a retry may take it over.
	InFlightLease time.Duration
}

// Idempotency returns idempotency.*.
func (s *Snapshot) Idempotency() Idempotency {
	return Idempotency{TTL: s.dur(KeyIdempotencyTTL), CleanupInterval: s.dur(KeyIdempotencyCleanupInterval),
		InFlightLease: s.dur(KeyIdempotencyInFlightLease)}
}

// Breaker is breaker.*: open after Failures consecutive failures, for
// OpenFor.
type Breaker struct {
	Failures int
	OpenFor  time.Duration
}

// Breaker returns breaker.*.
func (s *Snapshot) Breaker() Breaker {
	return Breaker{Failures: s.num(KeyBreakerFailures), OpenFor: s.dur(KeyBreakerOpenFor)}
}

// Instance is instance.* and the global rate-limit switch that uses it.
type Instance struct {
	ID                string
	HeartbeatInterval time.Duration
	// LiveAfter: an instance whose last heartbeat is older is not counted
	// as live. Always greater than HeartbeatInterval.
	LiveAfter          time.Duration
	GlobalRateLimiting bool
}

// Instance returns instance.* and ratelimit.global.enabled.
func (s *Snapshot) Instance() Instance {
	return Instance{
		ID:                 s.str(KeyInstanceID),
		HeartbeatInterval:  s.dur(KeyInstanceHeartbeatInterval),
		LiveAfter:          s.dur(KeyInstanceLiveAfter),
		GlobalRateLimiting: s.flag(KeyRateLimitGlobalEnabled),
	}
}

// Endpoints are the external systems' addresses; "" means not configured.
type Endpoints struct {
	GitLab        string
	Approval      string
	Permission    string
	OIDCIssuer    string
	DirectoryFile string
	// SimEmbedded says serve starts the simulators in-process.
	SimEmbedded bool
	// SimListen is where embedded simulators listen.
	SimListen string
	// PublicURL is server.publicURL: the address people reach the service
	// at, the one non-loopback Host served while loopback is trusted.
	PublicURL string
}

// Endpoints returns the external systems' addresses.
func (s *Snapshot) Endpoints() Endpoints {
	return Endpoints{
		GitLab:        s.str(KeyGitLabBaseURL),
		Approval:      s.str(KeyApprovalBaseURL),
		Permission:    s.str(KeyPermissionBaseURL),
		OIDCIssuer:    s.str(KeyOIDCIssuer),
		DirectoryFile: s.str(KeyIdentityDirectoryFile),
		SimEmbedded:   s.flag(KeySimEmbedded),
		SimListen:     s.str(KeySimListen),
		PublicURL:     s.str(KeyServerPublicURL),
	}
}

func (s *Snapshot) str(key string) string        { v, _ := s.String(key); return v }
func (s *Snapshot) dur(key string) time.Duration { v, _ := s.Duration(key); return v }
func (s *Snapshot) num(key string) int           { v, _ := s.Int(key); return v }
func (s *Snapshot) flag(key string) bool         { v, _ := s.Bool(key); return v }

// OIDC is how bearer tokens are checked and mapped to an account; read
// per request, so a reload applies to the next login.
type OIDC struct {
	Audience string
	// AccountClaim is the one claim the account is read from.
	AccountClaim string
	// AccountField is the directory field that claim is matched on:
	// "account", "email" or "employeeId".
	AccountField   string
	JWKSMinRefresh time.Duration
	ClockSkew      time.Duration
}

// OIDC returns oidc.* (beside oidc.issuer, which is in Endpoints).
func (s *Snapshot) OIDC() OIDC {
	return OIDC{
		Audience:       s.str(KeyOIDCAudience),
		AccountClaim:   s.str(KeyOIDCAccountClaim),
		AccountField:   s.str(KeyOIDCAccountField),
		JWKSMinRefresh: s.dur(KeyOIDCJWKSMinRefresh),
		ClockSkew:      s.dur(KeyOIDCClockSkew),
	}
}
