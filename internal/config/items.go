package config

import (
	"slices"
	"time"
)

// Unit shorthands for the table below.
const (
	ms     = time.Millisecond
	sec    = time.Second
	minute = time.Minute
	hr     = time.Hour
)

// itemTable is every flat item, in documentation order. It is a function,
// not a package variable, so nothing global is mutable; instanceID is the
// computed default of instance.id (host name + pid), injected so tests are
// deterministic.
//
// Minimums: Counts and durations are "clamped to ≥ 0" (docs/configuration.md). Where 0
// would panic (a ticker), spin, or silently disable a safety mechanism, the
// lower bound is higher and documented in the row (1ms for intervals, 10ms
// for workflow.pollInterval whose every tick is a database query, 1s for
// leases, 1m for idempotency records).
func itemTable(instanceID string) []item {
	restart, hot := true, false
	it := []item{
		// server.* — read once when the listener starts.
		{key: KeyServerListen, typ: "host:port", def: "127.0.0.1:8080", restart: true,
			fallback: "missing/empty/not host:port → 127.0.0.1:8080",
			why:      "a loopback default never exposes the service more widely than intended", resolve: resolveListen},
		durItem(KeyServerReadHeaderTimeout, 5*sec, 1*sec, sec, restart, "0 would mean no header deadline (slow-loris); at least 1s"),
		durItem(KeyServerReadTimeout, 30*sec, 0, sec, restart, "0 = no deadline (net/http); negative is meaningless"),
		durItem(KeyServerWriteTimeout, 60*sec, 0, sec, restart, "0 = no deadline (net/http); negative is meaningless"),
		durItem(KeyServerIdleTimeout, 120*sec, 0, sec, restart, "0 = use readTimeout (net/http)"),
		durItem(KeyServerShutdownTimeout, 30*sec, 0, sec, restart, "how long in-flight requests may drain; 0 = stop at once"),
		{key: KeyServerPublicURL, typ: "URL (absolute http/https)",
			fallback: "missing/empty/not an absolute http(s) URL → unset (while loopback is trusted, only loopback Host values are served)",
			why:      "the Host check against DNS rebinding must not be widened by a half-parsed value", resolve: resolveURL},

		// database.* — the pool is opened once.
		{key: KeyDatabaseDriver, typ: "sqlite | mysql (case-insensitive)", def: "sqlite", restart: true,
			fallback: "missing/empty → sqlite; anything else → startup error (reload: old snapshot kept)",
			why:      "guessing a database would write to the wrong store; the program must not start", resolve: resolveDriver},
		{key: KeyDatabaseDSN, typ: "string (secret: password masked)", def: defaultSQLiteDSN, restart: true, noLayer: true,
			fallback: "missing/empty with sqlite → the default DSN under ./var; missing/empty with mysql → startup error",
			why:      "an empty MySQL DSN would connect to a local default server with unknown data", resolve: resolveDSN},
		intItem(KeyDatabaseMaxOpenConns, 10, 1, 10000, restart, "0 would mean unlimited in database/sql and can exhaust MySQL max_connections"),
		// The idle pool defaults to the open limit: with fewer, every burst
		// wider than it closes the extra connections on release and opens
		// them again for the next one (SQLite: the file, its pragmas, the
		// schema and the prepared reads; MariaDB: a TCP login), which was
		// ~9 % of the status read's CPU under load (docs/benchmarks.md).
		// connMaxIdleTime still closes what stays unused.
		intItem(KeyDatabaseMaxIdleConns, 10, 0, 10000, restart, "0 = no idle pool, only slower"),
		durItem(KeyDatabaseConnMaxLifetime, 30*minute, 0, sec, restart, "0 = connections live forever (database/sql)"),
		durItem(KeyDatabaseConnMaxIdleTime, 5*minute, 0, sec, restart, "0 = idle connections are never closed (database/sql)"),
		intItem(KeyDatabaseSyncWait, 1, 0, 15, restart, "Galera only (wsrep_sync_wait; ignored on SQLite and a single MariaDB/MySQL): 1 makes every read wait until this node has applied what the cluster committed before it, so a request answered 202 by an instance on another node is found (no stale 404); 0 reads whatever the node has applied (faster, may be behind); 2/4 add UPDATE-DELETE/INSERT, a mask up to 15"),

		// The embedded simulators come before the external systems: with
		// sim.embedded on, an unset dependency URL is derived from sim.listen
		// (simURLItem reads both from the values resolved so far).
		boolItem(KeySimEmbedded, false, restart, "simulators in a production process would answer for real systems"),
		{key: KeySimListen, typ: "host:port", def: "127.0.0.1:8090", restart: true,
			fallback: "missing/empty/not host:port → 127.0.0.1:8090",
			why:      "the simulators are a local tool: loopback only, at the address the local run documents (README.md)", resolve: resolveListen},

		// External systems.
		simURLItem(KeyGitLabBaseURL, "/gitlab/", "a half-parsed URL fails later and less clearly; unset is an explicit state"),
		{key: KeyGitLabProjects, typ: "list of project ids or paths (YAML list, or comma-separated)", restart: true,
			fallback: "missing/empty → none; malformed entries (not a positive id or group/project path) dropped with reason",
			why:      "one bad entry must not hide the good ones", resolve: resolveProjects},
		intItem(KeyGitLabRateAPIPerMinute, 0, 0, 1000000, hot, "0 = unpaced (GitLab's 429s are still waited out); each instance paces itself, so with N instances set GitLab's per-user limit ÷ N, a little under (gitlab.com: 2000 ÷ N; docs/workflow.md, \"GitLab's limits\")"),
		intItem(KeyGitLabRatePipelinesPerMinute, 0, 0, 100000, hot, "0 = unpaced; paces the calls that start a pipeline (a commit, opening an MR, a rebase, a pipeline retry or creation) per project, on each instance: with N instances set GitLab's per-project limit ÷ N (gitlab.com: 25 ÷ N)"),
		durItem(KeyGitLabRateMissedPipeline, 60*sec, 1*ms, sec, hot, "how long an MR's head may stay without any pipeline before changeflow creates one (GitLab drops the pipeline of a push over its pipeline rate); shorter than GitLab's own delay in creating a pipeline would create a second one"),
		simURLItem(KeyApprovalBaseURL, "/approval/", "see gitlab.baseURL"),
		intItem(KeyApprovalMaxRetries, 3, 0, 100, hot, "negative would skip the call entirely"),
		durItem(KeyApprovalBackoff, 500*ms, 0, ms, hot, "negative would be a negative sleep"),
		boolItem(KeyApprovalCheckItemsEnabled, false, hot, "the client-library approver is the verified path; a typo must not switch approvers"),
		boolItem(KeyApprovalVerifyDecisions, true, hot, "true applies only the decision read back from the approval system for the approval changeflow recorded, so a forged callback carrying the shared token can at most cause a read; false trusts the callback's claim (still bound to the recorded approvalId and MR) and saves one read per decision"),
		simURLItem(KeyPermissionBaseURL, "/permission/", "unset: every permission check fails, which denies"),
		simURLItem(KeyOIDCIssuer, "/oidc/", "unset: bearer tokens cannot be verified, so they authenticate nobody"),
		withType(stringItem(KeyIdentityDirectoryFile, "", restart, "missing/empty → unset (no directory: only canonical accounts resolve)",
			"an untrusted identity skips metrics rather than guessing"),
			"string (path of a YAML list of `{account, email, employeeId, displayName}`; example: docs/directory.example.yaml)"),

		// Instance and process.
		{key: KeyInstanceID, typ: "string (no whitespace)", def: instanceID, restart: true,
			fallback: "missing/empty/containing whitespace → host name + \"-\" + pid",
			why:      "two instances sharing an id would steal each other's leases; the computed id is unique per process", resolve: resolveInstanceID},
		durItem(KeyInstanceHeartbeatInterval, 10*sec, 1*ms, sec, hot, "0 would spin; liveAfter must exceed it (else both fall back)"),
		durItem(KeyInstanceLiveAfter, 30*sec, 1*ms, sec, hot, "≤ heartbeatInterval would declare live instances dead: both fall back to defaults"),
		{key: KeyLogLevel, typ: "debug | info | warn | error (case-insensitive)", def: "info",
			fallback: "missing/empty/unknown → info",
			why:      "info keeps fall-back warnings visible without debug volume", resolve: resolveLogLevel},

		// The config center itself: only defaults/file/env/overlay may set these.
		{key: KeyEtcdEndpoints, typ: "list of URLs or host:port", restart: true,
			fallback: "missing/empty → no config center; blank entries dropped",
			why:      "etcd is optional; without endpoints the file and env are the whole configuration", resolve: resolveEndpoints},
		{key: KeyEtcdPrefix, typ: "string (key prefix, no trailing /)", def: "/changeflow", restart: true,
			fallback: "missing/empty → /changeflow; a trailing / is removed",
			why:      "keys are read from <prefix>/…; the / boundary keeps /changeflow-staging out", resolve: resolvePrefix},
		durItem(KeyEtcdDialTimeout, 5*sec, 100*ms, sec, restart, "bounds how long startup waits for an unreachable etcd"),
		stringItem(KeyEtcdUsername, "", restart, "missing/empty → no authentication", "etcd can set trusted proxies, rule codes and callback tokens: production must set it (with TLS, or the password crosses the network in clear)"),
		secretItem(KeyEtcdPassword, restart, "missing/empty → no authentication", "see config.etcd.username"),
		stringItem(KeyEtcdTLSCA, "", restart, "missing/empty → the system's roots when TLS is on (https:// endpoint or a client certificate); unreadable or no certificate in it → no config center (logged), never plaintext",
			"PEM file of the CA that signed etcd's server certificate; a TLS setting that cannot be honoured must not fall back to a connection anyone on the path can read or forge"),
		stringItem(KeyEtcdTLSCert, "", restart, "missing/empty → no client certificate; set without config.etcd.tls.key, or unreadable → no config center (logged)",
			"PEM client certificate for etcd's --client-cert-auth; turns TLS on"),
		stringItem(KeyEtcdTLSKey, "", restart, "missing/empty → no client certificate; see config.etcd.tls.cert",
			"PEM private key of config.etcd.tls.cert"),

		// Rate limiting.
		durItem(KeyRateLimitWindow, 60*sec, 1*ms, sec, hot, "a zero window would divide Retry-After by zero; limits themselves fail open"),
		{key: KeyRateLimitTrustedProxies, typ: "list of IPs or CIDRs", fallback: "missing/empty → none (the peer address is the client); malformed entries dropped with reason; an explicit [] is none without a warning",
			why: "trusting a malformed entry could let clients forge X-Forwarded-For", resolve: resolveProxies},
		boolItem(KeyRateLimitGlobalEnabled, false, hot, "per-instance limiting needs no shared state; the global quota is opt-in"),
		{key: KeyIdentityTrustedProxies, typ: "list of IPs or CIDRs", fallback: "missing/empty → none (auth-proxy headers are refused from every peer); malformed entries dropped with reason; an explicit [] is none without a warning",
			why: "login headers from an untrusted peer would let anyone claim any identity", resolve: resolveProxies},
		stringItem(KeyOIDCAudience, "changeflow", hot, "missing/empty → changeflow",
			"a token minted for another audience must not log anyone in here"),
		{key: KeyOIDCAccountClaim, typ: "claim name", def: "sub",
			fallback: "missing/empty/not a claim name, or a claim that names no person (iss, aud, azp, exp, iat, nbf, nonce, email_verified, …) → sub",
			why:      "only (iss, sub) is stable and unique in OIDC; a claim the user can edit must never be guessed into the account", resolve: resolveClaimName},
		{key: KeyOIDCAccountField, typ: "account | email | employeeId (case-insensitive)", def: "account",
			fallback: "missing/empty/unknown → account",
			why:      "the account field is the strictest match: a token whose claim is not account-shaped is refused rather than matched on another field", resolve: resolveAccountField},
		{key: KeyOIDCJWKSMinRefresh, typ: "duration (bare integer = seconds)", def: "1m", min: int64(sec), max: int64(hr), unit: sec,
			fallback: "missing/empty/malformed → 1m; negative or below 1s → 1s; above 1h → 1h",
			why:      "every token naming an unknown key would otherwise cost a call to the issuer; above an hour a rotation takes too long to reach us", resolve: resolveDuration},
		{key: KeyOIDCClockSkew, typ: "duration (bare integer = seconds)", def: "1m", min: int64(sec), max: int64(5 * minute), unit: sec,
			fallback: "missing/empty/malformed → 1m; negative or below 1s → 1s; above 5m → 5m",
			why:      "how far in the future a token's iat may lie: clocks differ, so 0 would refuse an issuer a moment ahead; a large skew would accept tokens minted with a forward-dated clock", resolve: resolveDuration},

		// Access windows.
		{key: KeyAccessTimezone, typ: "IANA zone name, e.g. Europe/Berlin", def: "UTC",
			fallback: "missing/empty → UTC; unknown zone (or \"Local\") → every window is outside",
			why:      "a window read in the wrong zone would open a restricted resource at the wrong hours", resolve: resolveTimezone},

		// Workflow.
		boolItem(KeyWorkflowApproveFirst, false, hot, "a typo must not switch the flow of every new request; the legacy flow stays the default"),
		intItem(KeyWorkflowWorkers, 4, 1, 256, restart, "0 workers would accept work that never runs"),
		intItem(KeyWorkflowQueueSize, 100, 1, 100000, restart, "a full queue persists the rejection; at least 1 slot"),
		durItem(KeyWorkflowLeaseDuration, 30*sec, 1*sec, sec, hot, "a tiny lease lets another instance take over work still running"),
		intItem(KeyWorkflowMaxRegenerations, 3, 0, 20, hot, "how often one single-request MR is regenerated on the target after a failed rebase caused by a change made outside changeflow; a conflict made only by changeflow's own merges of the file always regenerates (it is progress, bounded by the requests); 0 = every outside conflict goes to a person; the cap stops a target that keeps moving from looping"),
		durItem(KeyWorkflowPollInterval, 1*sec, 10*ms, ms, hot, "how long an idle instance waits before it looks for due work again (the latency between polling steps); every look is a claim query, so below 10ms it would spin against the database"),

		// Reconciliation.
		durItem(KeyReconcileInterval, 1*minute, 1*ms, sec, hot, "0 would spin"),
		durItem(KeyReconcileMinAge, 2*minute, 0, sec, hot, "minAge ≥ maxAge would be an empty window: both fall back to defaults"),
		durItem(KeyReconcileMaxAge, 24*hr, 0, sec, hot, "see minAge"),
		boolItem(KeyReconcileInference, true, hot,
			"true also validates an MR below the highest MR a deploy callback reported for its project (valid only while the pipeline deploys in merge order); false validates only MRs whose own deploy callback was recorded"),

		// Expiry (revocation at expiresAt).
		durItem(KeyExpiryInterval, 1*minute, 10*ms, sec, hot, "how often every instance looks for VALIDATED grants whose expiresAt passed (database clock) and creates their revocations (overlapping scans are safe); the access lasts up to this long past its expiry before its removal starts; each look is one index range read, so below 10ms it would spin"),
		intItem(KeyExpiryChunkSize, 200, 1, 500, hot, "expired grants revoked per transaction (a fixed number of statements each); larger chunks hold row locks longer against the grants' own writes, and 500 is the store's IN-list bound"),
		intItem(KeyExpiryRenewWindow, 25, 0, 100, hot, "percent of a grant's duration, at its end, during which re-applying renews it (outside it the answer stays ALREADY_IN_EFFECT, saying when renewal opens); with expiry.renewWindowMin the window is the longer of the two; 0 leaves only the minimum, 100 allows renewing at once"),
		durItem(KeyExpiryRenewWindowMin, 24*hr, 0, sec, hot, "the shortest renewal window whatever the grant's duration (a one-day grant's last quarter would be six hours, too short to get an approval in); 0 leaves only the percentage"),

		// Batching.
		durItem(KeyBatchInterval, 30*sec, 1*ms, sec, hot, "0 would spin"),
		durItem(KeyBatchGatherWindow, 2*sec, 10*ms, sec, hot,
			"an admission runs its project's round this long after the first admission of a burst, so the admissions of the next moments share its MR: longer makes bigger batches (fewer MRs and pipelines) and adds that much latency to each request; the minimum is a round per admission (one MR per request when they trickle in) — not 0, since a claim takes only requests admitted before the database clock's now (millisecond precision) and a round in the admission's own millisecond would miss it. batch.interval stays the safety net (a crash of the admitting instance before its round)"),
		intItem(KeyBatchMaxRequests, 50, 1, 1000, hot, "the ceiling of the adaptive round bound (halved after a batch whose checks failed, growing back with each merge: docs/flows/batch.md, \"How big a round is\"); 0 would claim nothing; a huge batch makes one MR nobody can review, and GitLab keeps at most 1,000 diff versions per MR"),
		intItem(KeyBatchMaxSplitDepth, 6, 0, 10, hot, "bounds how often a failed batch is bisected; a batch of several still failing at the bound is BLOCKED for a person — 6 halves the default 50 down to single requests"),
		durItem(KeyBatchTimeout, 30*minute, 1*sec, sec, hot, "a batch in flight longer than this is settled"),
		durItem(KeyBatchStrayInterval, 5*minute, 1*sec, sec, hot,
			"how often every instance lists its projects' open MRs (a page or a few per project) and closes those on a batch branch whose batch ended or records another MR — what a round killed between a late MR creation and its close left open (overlapping runs are safe: the close re-reads, merged wins); shorter closes such an MR sooner and costs one GitLab list per project per run; it runs at the batch Tick, so batch.interval bounds it from below"),
		durItem(KeyBatchResumeAfter, 2*minute, 1*sec, sec, hot, "how long a batch without an MR waits while the instance that claimed it is alive and may still be building it (a round that returned or whose instance stopped heartbeating is resumed at once); too short and a slow round is raced by another (harmless: every remote write is looked up first)"),

		// The live status stream (docs/api.md, "Live status").
		durItem(KeyEventsPollInterval, 500*ms, 50*ms, ms, hot,
			"how often an instance reads the versions of every request its open streams watch (one statement for all of them, only while a stream is open); a change reaches the browser within about this much: longer is fewer reads and slower news"),
		durItem(KeyEventsHeartbeat, 15*sec, 1*sec, sec, hot,
			"a comment line this often keeps proxies from closing an idle stream and finds dead connections; below 1s it would be most of the traffic"),
		intItem(KeyEventsMaxStreams, 1000, 1, 100000, hot,
			"open streams per instance; one more is refused with 503 RETRY_LATER (the web app then polls): each stream holds a connection and a goroutine"),
		intItem(KeyEventsMaxStreamsPerCaller, 5, 1, 1000, hot,
			"open streams per caller (their account; a caller without one by client address) on an instance; one more is refused with 429 RATE_LIMITED and Retry-After (the web app then polls) and a stream's slot is freed when it ends (client gone, shutdown): without it one person opening a thousand streams took every slot of events.maxStreams and everyone else got 503; a person watches a few requests in a few tabs, so 5 is room for that, not for a flood"),

		// Authorization: the permission checks' cache.
		durItem(KeyAuthzCacheTTL, 30*sec, 0, sec, hot,
			"how long the permission service's answer for one account and one set of rule codes is reused (the ops routes, /api/me, the admin check); a deny is kept for the shorter of this and 10s, never longer than an allow, so a rule just granted works within seconds; a failed check is never cached (it denies, and the next call asks again); a cached answer is served while the service is down until it expires, then the check fails closed; a rule revoked at the permission service still works for up to this long; 0 asks the service on every call"),

		// Idempotency.
		durItem(KeyIdempotencyTTL, 24*hr, 1*minute, sec, hot, "0 would expire records at once and let duplicates through"),
		durItem(KeyIdempotencyCleanupInterval, 10*minute, 1*ms, sec, hot, "0 would spin"),
		durItem(KeyIdempotencyInFlightLease, 30*sec, 1*sec, sec, hot,
			"how long a retry of a key whose first request died answers 409 before taking the key over; "+
				"below 1s a merely slow first request would be raced by its own client's retry (still one request, but a wasted attempt); "+
				"a lease at or beyond idempotency.ttl never fires"),

		// The audit chain and its export (docs/audit.md).
		{key: KeyAuditSigningKey, secret: true, typ: "string (secret, masked): the standard base64 of a 32-byte Ed25519 seed (openssl rand -base64 32), or a PEM PKCS #8 Ed25519 private key (openssl genpkey -algorithm ed25519)",
			fallback: "missing/empty → unset: GET /ops/audit/export answers 503 and serve warns at start (the local profile signs with a published development key); anything else → startup error naming the item (reload: old snapshot kept)",
			why:      "an export without a signature proves nothing, and a half-read key would sign with a key nobody holds", resolve: resolveSigningKey},
		durItem(KeyAuditRetention, 400*24*hr, 24*hr, sec, hot,
			"how long the chain keeps a record (by occurredAt) before retention removes it and moves the anchor; 400 days covers a SOC 2 Type II period of 12 months with room; at least 1d, far beyond the chainer's lookback"),
		durItem(KeyAuditChainInterval, 10*sec, 100*ms, sec, hot,
			"how often each instance chains new records; an export chains up to the moment it starts whatever this is, so it only bounds how far the stored chain trails the records"),

		// The repository part of the access history (docs/api.md).
		durItem(KeyAccessRepoScanInterval, 5*minute, 0, sec, hot,
			"how often each instance reads the new commits of every binding file on the default branch into the access history (entries changeflow did not write); 0 turns the reader off; passes of several instances are safe (one applies each commit)"),

		// A person's notification preferences (docs/notifications.md).
		boolItem(KeyNotifyAllowSafetyOptOut, false, hot,
			"the messages that access is about to end or has ended stay on for everyone unless the operator allows turning them off: a person who missed them learns of the loss when their work fails; a typo must not switch them off"),

		// Circuit breaker.
		intItem(KeyBreakerFailures, 5, 1, 1000, hot, "0 would open the breaker before any failure"),
		durItem(KeyBreakerOpenFor, 30*sec, 1*ms, sec, hot, "0 would never fail fast"),

		// The web app.
		stringItem(KeyUIContact, DefaultUIContact, hot, "missing/empty → "+DefaultUIContact,
			"a failed request's page must name whom to ask (a team, a chat channel, an address); the fallback still says who, in general words"),
	}
	// The rest of notify.* follows notify.allowSafetyOptOut, so the guide
	// lists the notification items together.
	at := slices.IndexFunc(it, func(i item) bool { return i.key == KeyNotifyAllowSafetyOptOut })
	it = slices.Insert(it, at+1, notifyItems()...)
	it = append(it, pollingItems(PollingPipeline, 5*sec, 12, 30*sec, 1*hr)...)
	it = append(it, pollingItems(PollingRebase, 2*sec, 10, 10*sec, 10*minute)...)
	// The approval poll only covers a lost callback: a person decides, so
	// it is slow (≈ 300 polls over a day, below the engine's claim bound
	// of 500) and its timeout stops the polling, never the request.
	it = append(it, approvalPollingItems(30*sec, 10, 5*minute, 24*hr)...)
	return it
}

// pollingItems are one polling tier: shortAttempts polls every
// shortInterval, then every longInterval until timeout.
func pollingItems(tier string, short time.Duration, attempts int64, long, timeout time.Duration) []item {
	p := "polling." + tier + "."
	return []item{
		durItem(p+"shortInterval", short, 1*ms, sec, false, "0 would spin"),
		intItem(p+"shortAttempts", attempts, 0, 1000, false, "0 = go straight to the long interval"),
		durItem(p+"longInterval", long, 1*ms, sec, false, "0 would spin"),
		durItem(p+"timeout", timeout, 1*ms, sec, false, "the outcome becomes 'timed out' (KEEP_WAITING), never 'processing' forever"),
	}
}

// approvalPollingItems are the polling.approval.* tier: like
// pollingItems, but its timeout only ends the polling — the request keeps
// waiting for its callback, because a person may still decide.
func approvalPollingItems(short time.Duration, attempts int64, long, timeout time.Duration) []item {
	p := "polling." + PollingApproval + "."
	return []item{
		durItem(p+"shortInterval", short, 1*ms, sec, false, "0 would spin"),
		intItem(p+"shortAttempts", attempts, 0, 1000, false, "0 = go straight to the long interval"),
		durItem(p+"longInterval", long, 1*ms, sec, false, "0 would spin"),
		durItem(p+"timeout", timeout, 1*ms, sec, false,
			"bounds the calls to the approval system; when it is spent the request still waits in APPROVAL_SENT for its callback (an operator's retrigger polls again)"),
	}
}

func secretItem(key string, restart bool, fallback, why string) item {
	it := stringItem(key, "", restart, fallback, why)
	it.secret = true
	it.typ = "string (secret, masked)"
	return it
}

// familyDoc documents a key family in the generated docs table.
type familyDoc struct {
	key, typ, def, fallback, why string
	restart                      bool
}

// familyDocs lists the families for docs/configuration.md in the same shape
// as items.
func familyDocs() []familyDoc {
	return []familyDoc{
		{key: "ratelimit.<bucket>.limit", typ: "integer (requests per ratelimit.window)", def: "apply: 10; preview: 30; stats: 60; callbacks: 600 (per source address); adminCheck: 30; events: 30; authz: 120; others: none",
			fallback: "missing/empty/≤ 0/non-numeric → 0 = no limiting", why: "a broken threshold must not block legitimate traffic"},
		{key: "targets.<key>.title", typ: "string", def: "the target key", fallback: "missing/empty → the key", why: "display only"},
		{key: "targets.<key>.file", typ: "repo-relative path", def: "bindings/<key>.yaml",
			fallback: "missing/empty/absolute/containing .. → bindings/<key>.yaml", why: "an MR must never touch a file outside the repository"},
		{key: "targets.<key>.accessMode", typ: "OPEN | TEST_WINDOW | CLOSED (trimmed, case-insensitive)", def: "TEST_WINDOW",
			fallback: "missing/empty → TEST_WINDOW; unknown → CLOSED", why: "a typo must never open a restricted resource"},
		{key: "targets.<key>.window.start", typ: "daily HH:MM[:SS], or local date-time YYYY-MM-DDTHH:MM[:SS] / date YYYY-MM-DD, in access.timezone", def: "none",
			fallback: "missing/malformed → outside the window", why: "a window read wrongly must close, not open"},
		{key: "targets.<key>.window.end", typ: "same form as window.start (exclusive)", def: "none",
			fallback: "missing/malformed/forms differ/not after start → outside the window", why: "see window.start"},
		{key: "targets.<key>.batching", typ: "boolean", def: "true",
			fallback: "missing/empty/malformed → true", why: "batching only changes how many MRs are opened, never who gets access; true is the path the local run exercises"},
		{key: "targets.<key>.maxDays", typ: "integer (days)", def: "30",
			fallback: "missing/empty/non-numeric → 30; < 1 → 1; > 3650 → 3650", why: "0 or negative would grant bindings that expire before they apply"},
		{key: "targets.<key>.owners", typ: "list of accounts (YAML list, or comma-separated; matched case-insensitively)", def: "none",
			fallback: "missing/empty → none: only an operator with ops.write decides the target's review items; an entry that is no account name (a letter or digit, then letters, digits, . _ -; at most 128) is dropped with reason",
			why:      "the owners decide who keeps access to their resource (docs/reviews.md); a misspelt owner must not be someone else, and nobody reviews their own access"},
		{key: "targets.<key>.review.every", typ: "duration (7d, 90d, 2160h; bare integer = seconds)", def: "none",
			fallback: "missing/empty → no scheduled campaign; malformed or ≤ 0 → no scheduled campaign, with reason; below 1h → 1h",
			why:      "a campaign is opened when the target's last one opened at least this long ago (docs/reviews.md); a schedule read wrongly must not flood owners with campaigns"},
		{key: "targets.<key>.review.dueIn", typ: "duration (bare integer = seconds)", def: "14d",
			fallback: "missing/empty/malformed → 14d; below 1h → 1h",
			why:      "how long a scheduled campaign's owners have before undecided items take the default (revoke)"},
		{key: "authz.routes.<route>.rules", typ: "list of rule codes", def: "ops routes: ops.read/ops.write + admin; others: none",
			fallback: "missing/empty → empty = deny; blank entries dropped", why: "missing rules must never mean unauthorized access"},
		{key: "gitlab.tokens.<name>", typ: "string (secret, masked); names committer, approver1, approver2, and doctor (optional: a read_api token of a Maintainer for the deployment checks)", def: "none",
			fallback: "missing/empty → no token (the adapter reports it unset); outside --local a simulator's well-known token, one shorter than 20 bytes, or one another token shares → refused: serve does not start, a reload leaves it unset",
			why:      "a blank token would call GitLab anonymously; a published or shared one lets someone else act as the bot (GitLab's classic tokens are 26 bytes, so the minimum is lower than a callback's)", restart: true},
		{key: "callbacks.tokens.<name>", typ: "string (secret, masked); names approval, deploy, gitlab", def: "none",
			fallback: "missing/empty → reject every callback; outside --local a simulator's well-known token, one shorter than 32 bytes, or one another token shares → refused: serve does not start, a reload rejects that kind's callbacks",
			why:      "an unauthenticated callback could approve or validate anything; a shared secret lets one system speak as another (openssl rand -hex 32 makes one)"},
		{key: "callbacks.tokens.<name>Previous", typ: "string (secret, masked); names approvalPrevious, deployPrevious, gitlabPrevious", def: "none",
			fallback: "missing/empty → only callbacks.tokens.<name> is accepted (no warning: the normal state outside a rotation); outside --local the same rules as the current token, and a value equal to its own current token → refused: serve does not start, a reload accepts only the current token",
			why:      "lets a sender keep the old value while the new one is rolled out (docs/configuration.md, \"Rotating a callback token\"); each callback accepted with it counts in changeflow_callback_token_previous_total, so it can be removed once that stops rising; never accepted when callbacks.tokens.<name> is unset"},
		{key: "http.timeout.<dependency>", typ: "duration (bare integer = seconds)", def: "gitlab 10s, approval 5s, permission 2s, oidc 5s; others 10s",
			fallback: "missing/empty/malformed → the dependency's default; < 1ms → 1ms", why: "every outbound call has a deadline; 0 would mean none"},
	}
}

// defaultBuckets, defaultRoutes and defaultHTTPTimeouts seed the families
// in the defaults layer, so they appear in Effective() with source
// "default" and can be overridden per entry.
//
// The read and callback buckets are generous for people and for upstream
// systems (per ratelimit.window, 60 s by default) and exist to bound what
// one caller can make changeflow spend on GitLab, the database and the
// permission service; a 429 on a callback is retried by its sender, and
// polling stays the workflow's fallback.
func defaultBuckets() map[string]any {
	return map[string]any{BucketApply: 10, BucketPreview: 30, BucketStats: 60, BucketCallbacks: 600, BucketAdminCheck: 30, BucketEvents: 30, BucketAuthz: 120}
}

func defaultRoutes() map[string]any {
	read := []any{"ops.read", "admin"}
	write := []any{"ops.write", "admin"}
	return map[string]any{
		RouteOpsRequestGet:       read,
		RouteOpsRequestRetrigger: write,
		RouteOpsRequestRevoke:    write,
		RouteOpsRequestClose:     write,
		RouteOpsBatchesGet:       read,
		RouteOpsBatchSettle:      write,
		RouteOpsRoundsRun:        write,
		RouteOpsReconcileRun:     write,
		RouteOpsExpiryScan:       write,
		RouteOpsConfigGet:        read,
		RouteOpsChecksGet:        read,
		RouteOpsReviewGet:        read,
		RouteOpsReviewOpen:       write,
	}
}

func defaultHTTPTimeouts() map[string]time.Duration {
	return map[string]time.Duration{"gitlab": 10 * sec, "approval": 5 * sec, "permission": 2 * sec, "oidc": 5 * sec}
}

// fallbackHTTPTimeout is the deadline of a dependency nobody configured.
const fallbackHTTPTimeout = 10 * time.Second
