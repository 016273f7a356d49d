package httpapi

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"changeflow/internal/config"
)

// route is one endpoint and its cross-cutting metadata. Go has no
// annotations, so the rate limit and allowlist membership are
// data here, next to the handler it governs.
type route struct {
	pattern string
	handler http.Handler
	// metrics: false for endpoints whose traffic is not API traffic
	// (the Prometheus scrape itself).
	metrics bool
	// rateLimit: the route's quota; nil means the
	// route is not rate limited.
	rateLimit *RateLimitSpec
	// login: the route needs a login identity; without one it answers 401
	// (user routes, /api/*). Implied by rules.
	login bool
	// rules names the route in authz.routes.<rules>.rules (one of the
	// config.RouteOps* names): the caller needs one of those rule codes,
	// else 403 (authz.go). "" means no rule check.
	rules string
	// checks: the route asks the permission service on every call without
	// declaring rules (GET /api/me). It and every route with rules spend
	// the caller's authz bucket ahead of authorization (handle).
	checks bool
	// business: the route is on the business-activity allowlist:
	// changeflow_business_activity_total counts it
	// (handlers_activity.go).
	business bool
}

// routes registers every endpoint of the product in one place.
func (s *Server) routes() {
	for _, rt := range []route{
		{pattern: "GET /healthz", handler: s.handleHealthz(), metrics: true},
		{pattern: "GET /readyz", handler: s.handleReadyz(), metrics: true},
		{pattern: "GET /metrics", handler: promhttp.HandlerFor(s.deps.Metrics.Registry, promhttp.HandlerOpts{
			ErrorLog:      slogPromLogger{s.deps.Logger},
			ErrorHandling: promhttp.ContinueOnError,
		})},

		// User endpoints (docs/api.md, "User endpoints"): a login is required.
		{pattern: "POST /api/requests", handler: s.handleSubmit(), metrics: true, login: true, business: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketApply, Message: submitMessage}},
		{pattern: "GET /api/requests/{operationId}", handler: s.handleRequestGet(), metrics: true, login: true},
		// The status read as a stream (events.go): the same authorization
		// and admin-check rate limit, inside the handler (readableRequest);
		// opening one spends the events bucket, and the handler bounds the
		// caller's open streams (events.maxStreamsPerCaller).
		{pattern: "GET /api/requests/{operationId}/events", handler: s.handleRequestEvents(), metrics: true, login: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketEvents, Message: eventsOpenMessage}},
		// Give access back (revoke.go): the owner only.
		{pattern: "POST /api/requests/{operationId}/revoke", handler: s.handleRequestRevoke(), metrics: true, login: true},
		{pattern: "GET /api/requests", handler: s.handleRequestList(), metrics: true, login: true},
		// The owner withdraws a request not yet in effect (requests_withdraw.go);
		// on the business allowlist, and under the apply quota like a submit:
		// each call may write and reach the approval system or GitLab.
		{pattern: "POST /api/requests/{operationId}/withdraw", handler: s.handleWithdraw(), metrics: true, login: true, business: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketApply}},
		{pattern: "GET /api/targets", handler: s.handleTargets(), metrics: true, login: true},
		// Preview reads GitLab on every call, through a GitLab client and
		// breaker of its own (Business.Files), so neither its traffic nor a
		// failing GitLab seen through it can open the workflow's breaker.
		{pattern: "GET /api/targets/{key}/preview", handler: s.handlePreview(), metrics: true, login: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketPreview}},
		// Legacy: a bare object on 200; the links in front answer in the
		// envelope (the 429 too).
		{pattern: "GET /api/stats", handler: s.handleStats(), metrics: true, login: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketStats}},

		// Who the caller is and whether the Operations tab is theirs (me.go).
		// Access reviews (reviews.go): the caller's open items and a
		// decision; who may decide is domain.MayDecide.
		{pattern: "GET /api/reviews", handler: s.handleReviewsMine(), metrics: true, login: true, checks: true},
		{pattern: "POST /api/reviews/{reviewId}/items/{itemId}", handler: s.handleReviewDecide(), metrics: true, login: true, checks: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketApply}},

		// What the caller chose to hear of by e-mail (preferences.go): their own.
		{pattern: "GET /api/notifications/preferences", handler: s.handlePreferencesGet(), metrics: true, login: true},
		{pattern: "PUT /api/notifications/preferences", handler: s.handlePreferencesPut(), metrics: true, login: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketApply}},

		{pattern: "GET /api/me", handler: s.handleMe(), metrics: true, login: true, checks: true},

		// What the web app needs before a login (appconfig.go): no login.
		{pattern: "GET /api/app-config", handler: s.handleAppConfig(), metrics: true},
		// The API description (docs/openapi.yaml, openapi.go): no login.
		{pattern: "GET /api/openapi.json", handler: s.handleOpenAPI(), metrics: true},
		// The operators' runbook (docs/runbook.md, runbook.go): no login.
		{pattern: "GET /api/runbook", handler: s.handleRunbook(), metrics: true},

		// Callbacks (docs/api.md, "Callbacks"): authenticated by their shared token in
		// the handler, before the body is read; no login. One bucket per
		// source address for all three, spent before the token is
		// compared, so a flood of forged callbacks is bounded too.
		{pattern: "POST /callbacks/approval", handler: s.handleApprovalCallback(), metrics: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketCallbacks}},
		{pattern: "POST /callbacks/deploy", handler: s.handleDeployCallback(), metrics: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketCallbacks}},
		{pattern: "POST /callbacks/gitlab", handler: s.handleGitLabWebhook(), metrics: true,
			rateLimit: &RateLimitSpec{Bucket: config.BucketCallbacks}},

		// Operations (docs/api.md, "Operations endpoints"), read-only.
		// The search over every request (ops_find.go).
		{pattern: "GET /ops/requests", handler: s.handleOpsFind(), metrics: true, rules: config.RouteOpsRequestGet},
		{pattern: "GET /ops/requests/{operationId}", handler: s.handleOpsRequest(), metrics: true, rules: config.RouteOpsRequestGet},
		{pattern: "GET /ops/batches", handler: s.handleOpsBatches(), metrics: true, rules: config.RouteOpsBatchesGet},
		{pattern: "GET /ops/security-events", handler: s.handleOpsSecurityEvents(), metrics: true, rules: config.RouteOpsRequestGet},
		// The notification outbox (ops_notifications.go): its depth, dead
		// letters and gone channels, read like a request; a replay and a
		// channel turned back on are writes of the retrigger class.
		{pattern: "GET /ops/notifications", handler: s.handleOpsNotifications(), metrics: true, rules: config.RouteOpsRequestGet},
		{pattern: "POST /ops/notifications/{eventId}/replay", handler: s.handleOpsNotificationReplay(), metrics: true, rules: config.RouteOpsRequestRetrigger},
		{pattern: "POST /ops/notifications/channels/{channel}/enable", handler: s.handleOpsNotificationChannelEnable(), metrics: true, rules: config.RouteOpsRequestRetrigger},
		// The tamper-evident audit export and the key that verifies it
		// (ops_audit.go, docs/audit.md): reads of a request's class.
		{pattern: "GET /ops/audit/export", handler: s.handleOpsAuditExport(), metrics: true, rules: config.RouteOpsRequestGet},
		{pattern: "GET /ops/audit/key", handler: s.handleOpsAuditKey(), metrics: true, rules: config.RouteOpsRequestGet},
		{pattern: "GET /ops/batches/{id}", handler: s.handleOpsBatch(), metrics: true, rules: config.RouteOpsBatchesGet},
		{pattern: "GET /ops/config", handler: s.handleOpsConfig(), metrics: true, rules: config.RouteOpsConfigGet},
		// The deployment checks (ops_checks.go): each call reads GitLab
		// several times, so it spends the preview's quota like the other
		// reads that go to GitLab.
		{pattern: "GET /ops/checks", handler: s.handleOpsChecks(), metrics: true, rules: config.RouteOpsChecksGet,
			rateLimit: &RateLimitSpec{Bucket: config.BucketPreview}},
		// The deploy-callback inbox (ops_deploy_inbox.go): a read of the same class as a request's detail.
		{pattern: "GET /ops/callbacks/deploy", handler: s.handleOpsDeployCallbacks(), metrics: true, rules: config.RouteOpsRequestGet},
		// Expired entries changeflow does not own (ops_unowned.go): a read of
		// a request's class, which reads every target's file from GitLab —
		// under the preview's quota, the other read that goes to GitLab.
		{pattern: "GET /ops/targets/unowned-expired", handler: s.handleOpsUnownedExpired(), metrics: true, rules: config.RouteOpsRequestGet,
			rateLimit: &RateLimitSpec{Bucket: config.BucketPreview}},
		// Who had access to what and when (ops_access.go): indexed reads
		// of the store's access history, of a request's class.
		{pattern: "GET /ops/access", handler: s.handleOpsAccess(), metrics: true, rules: config.RouteOpsRequestGet},
		{pattern: "GET /ops/access/history", handler: s.handleOpsAccessHistory(), metrics: true, rules: config.RouteOpsRequestGet},
		// Operations, write (ops_write.go): retrigger a stopped request,
		// replay its recorded approval decision, run reconciliation now.
		{pattern: "POST /ops/requests/{operationId}/retrigger", handler: s.handleOpsRetrigger(), metrics: true, rules: config.RouteOpsRequestRetrigger},
		{pattern: "POST /ops/requests/{operationId}/replay-approval", handler: s.handleOpsReplayApproval(), metrics: true, rules: config.RouteOpsRequestRetrigger},
		{pattern: "POST /ops/reconcile", handler: s.handleOpsReconcile(), metrics: true, rules: config.RouteOpsReconcileRun},
		// A manual expiry scan (ops_expiry.go), beside the scheduled ones.
		{pattern: "POST /ops/expiry/scan", handler: s.handleOpsExpiryScan(), metrics: true, rules: config.RouteOpsExpiryScan},
		// Revoke anyone's access (revoke.go), audited.
		{pattern: "POST /ops/requests/{operationId}/revoke", handler: s.handleOpsRevoke(), metrics: true, rules: config.RouteOpsRequestRevoke},
		// Close a stopped request (ops_close.go).
		{pattern: "POST /ops/requests/{operationId}/close", handler: s.handleOpsClose(), metrics: true, rules: config.RouteOpsRequestClose},
		// Operations, write, batch path (ops_batch_write.go): run a round
		// now, settle a batch.
		// Access reviews (reviews.go): open a campaign (audited), list
		// them, read one's report (JSON or CSV).
		{pattern: "POST /ops/reviews", handler: s.handleOpsReviewOpen(), metrics: true, rules: config.RouteOpsReviewOpen},
		{pattern: "GET /ops/reviews", handler: s.handleOpsReviews(), metrics: true, rules: config.RouteOpsReviewGet},
		{pattern: "GET /ops/reviews/{id}", handler: s.handleOpsReview(), metrics: true, rules: config.RouteOpsReviewGet},
		{pattern: "POST /ops/rounds", handler: s.handleOpsRounds(), metrics: true, rules: config.RouteOpsRoundsRun},
		{pattern: "POST /ops/batches/{id}/settle", handler: s.handleOpsBatchSettle(), metrics: true, rules: config.RouteOpsBatchSettle},

		// The web app (docs/webapp.md, internal/web): the entry page and the
		// hashed assets. Client routes and root files reach the same
		// handler through serveMux's fallback (isAppRequest), counted as
		// webPagesRoute.
		{pattern: "GET /{$}", handler: s.deps.Web, metrics: true},
		{pattern: "GET /assets/", handler: s.deps.Web, metrics: true},
	} {
		s.handle(rt)
	}
	s.pages = s.apiMetrics(webPagesRoute, s.deps.Web)
}

// webPagesRoute is the metrics route label of the app's client routes:
// one label for every page path, so cardinality stays bounded.
const webPagesRoute = "GET /{page}"

// handle wraps a route in its per-route chain and registers it. The order
// is fixed (docs/api.md "Rate limiting"; rate limiting → authorization → API metrics →
// business-activity metrics); each link is added when the route asks for it.
func (s *Server) handle(rt route) {
	h := rt.handler
	if rt.business {
		h = s.act.wrap(rt.pattern, h)
	}
	if rt.metrics {
		h = s.apiMetrics(rt.pattern, h)
	}
	// Authorization wraps before rate limiting so it runs after it (docs/api.md "Rate limiting").
	if rt.login || rt.rules != "" {
		h = s.authorize(rt, h)
	}
	// A route that asks the permission service spends the caller's authz
	// bucket first, so a flood of calls that would each cost a check is
	// refused with 429 before the service is asked (the cache spares most
	// of the rest). It runs after the route's own bucket: a call refused
	// there spends nothing here.
	if rt.rules != "" || rt.checks {
		h = s.rateLimit(RateLimitSpec{Bucket: config.BucketAuthz, Message: authzRateMessage}, h)
	}
	// Rate limiting wraps last so that it runs first (docs/api.md "Rate limiting").
	if rt.rateLimit != nil {
		h = s.rateLimit(*rt.rateLimit, h)
	}
	s.mux.Handle(rt.pattern, h)
	s.registered = append(s.registered, rt)
}

// apiMetrics counts arrival before the handler and status and latency
// after it. It never writes a response and never reads the body; the
// recorder itself swallows its own failures.
func (s *Server) apiMetrics(pattern string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.deps.Metrics.RequestReceived(pattern, r.Method)
		tw, ok := w.(*trackingWriter)
		if !ok {
			tw = &trackingWriter{ResponseWriter: w}
		}
		start := time.Now()
		defer func() {
			// Recorded even when the handler panics, as the 500 the
			// recovery handler will write; then the panic continues.
			status := tw.Status()
			if v := recover(); v != nil {
				s.deps.Metrics.RequestCompleted(pattern, r.Method, http.StatusInternalServerError, time.Since(start))
				panic(v)
			}
			s.deps.Metrics.RequestCompleted(pattern, r.Method, status, time.Since(start))
		}()
		next.ServeHTTP(tw, r)
	})
}
