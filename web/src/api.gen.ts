// Generated from docs/openapi.yaml by openapi-typescript
// (web/tools/gen-api/gen.mjs): do not edit. After changing the API
// description, run `npm run gen:api --prefix web` and commit the result.

export interface paths {
    "/healthz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The process is up.
         * @description Checks nothing else on purpose, so a database blip never restarts healthy instances.
         */
        get: operations["getHealthz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/readyz": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * This instance can serve.
         * @description The database answers within the probe's timeout, is (on Galera) a Synced node of the primary component, and its schema is at the version this binary expects.
         */
        get: operations["getReadyz"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Prometheus metrics of this process.
         * @description The Prometheus text exposition format from the process's own registry (docs/api.md "Metrics").
         */
        get: operations["getMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/openapi.json": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * This description, as JSON.
         * @description docs/openapi.yaml converted to JSON once at start-up. Carries an `ETag`; a matching `If-None-Match` answers 304.
         */
        get: operations["getOpenAPI"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/runbook": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The operators' runbook, as Markdown.
         * @description docs/runbook.md as built into the binary, so that it matches the version that runs; the console's Runbook page renders it. No login, like this description. Carries an `ETag`; a matching `If-None-Match` answers 304.
         */
        get: operations["getRunbook"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/me": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Who the caller is, and whether the web app's Operations tab is theirs.
         * @description `operations` is true when the caller holds one of the rule codes of
         *     `authz.routes.ops-request-get.rules`; a failing permission service
         *     answers false. It only hides a tab: every `/ops/` route checks its
         *     own rules. `Cache-Control no-store`. Like every `/ops/` route it
         *     spends the caller's bucket `authz` (429 beyond it), and its check is
         *     answered from the cache within `authz.cacheTTL`. A login the
         *     directory does not know is 403 `UNKNOWN_ACCOUNT`, whose message the
         *     web app shows.
         */
        get: operations["getMe"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/app-config": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * What the web app needs before a login.
         * @description Read from the configuration in force; not secret (the issuer and client ID are in every login redirect). `Cache-Control no-store`.
         */
        get: operations["getAppConfig"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/requests": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The caller's requests, newest first. */
        get: operations["listRequests"];
        put?: never;
        /**
         * Ask for a target.
         * @description Validated against the configuration in force, then idempotent on the
         *     caller's key (`operationId` or the `Idempotency-Key` header: send one,
         *     or the same value in both). Rate limited (bucket `apply`). The 202
         *     means the request is stored and its first step scheduled; poll
         *     `GET /api/requests/{operationId}`.
         */
        post: operations["submitRequest"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/requests/{operationId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * One request's status.
         * @description The owner sees their request; anyone else only with the permission
         *     service's `admin` rule. Everyone else gets 404 exactly as for an id
         *     that does not exist, so ids cannot be probed; looking up ids that are
         *     not one's own is rate limited (bucket `adminCheck`).
         */
        get: operations["getRequest"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/requests/{operationId}/withdraw": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * The owner withdraws a request that has not taken effect.
         * @description Only the owner; anyone else (an admin too) gets 404 exactly as for an
         *     id that does not exist. Waiting for its approval: `CLOSED` at once,
         *     the approval withdrawn upstream in the background. Waiting in the
         *     batch set: taken out, `CLOSED`. Its single-request MR open: the MR is
         *     closed, then `CLOSED` (`202 ACCEPTED` while closing is retried); if
         *     the MR was merged meanwhile the request follows its merge and the
         *     answer is `409 ALREADY_IN_EFFECT`. Stopped on a failure (not in a
         *     claimed batch): as with an open MR — its MR closed, then `CLOSED`,
         *     and the owner may ask again at once. Claimed by a batch, merging, in
         *     effect, or a removal of access (a revocation, the owner's own
         *     give-back too) at any step: 409, the message says what to do
         *     instead. Already
         *     withdrawn or ended otherwise: `200` with its state (idempotent).
         *     Rate limited (bucket `apply`); audited.
         */
        post: operations["withdrawRequest"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/requests/{operationId}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * One request's state changes, as server-sent events.
         * @description The status read as a stream (docs/api.md "Live status"): a `request`
         *     event with the status read's data when the stream opens and after
         *     every change, one `step` event per transition (its `id` the step's
         *     history id). `Last-Event-ID` resumes after that id. Opening one
         *     spends the caller's bucket `events` (429 beyond it). Authorization
         *     is the status read's: 404 for anyone but the owner or an admin,
         *     exactly as for a missing id (bucket `adminCheck`). A comment line
         *     every `events.heartbeat`; at most `events.maxStreamsPerCaller`
         *     open streams per caller (then 429 `RATE_LIMITED` with
         *     `Retry-After`) and `events.maxStreams` per instance (then 503).
         */
        get: operations["getRequestEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/requests/{operationId}/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Give the access of one's own request back.
         * @description The owner ends their access before it expires: a revocation removes
         *     the entry from the binding file (a removal MR, checked, approved and
         *     merged like a grant; batched on a batching target) and the access is
         *     `REVOKED` once the deployment confirms it. No approval is asked. A
         *     second call answers the existing revocation (200). Anyone else's
         *     request, or an unknown id, is 404.
         */
        post: operations["revokeRequest"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/targets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Every target, whether it is open right now, and what the caller holds on it.
         * @description Each item's `mine` is the caller's access or request on the target
         *     (`TargetMine`), read from the database on every call; the rest is the
         *     configuration in force.
         */
        get: operations["listTargets"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/targets/{key}/preview": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The change a request would make to the target's binding file.
         * @description A target that is not configured is `404 NOT_FOUND`. Otherwise
         *     advisory: on any failure (`days` out of range, GitLab down, a file
         *     that does not parse) the answer is `200 OK` with empty `data` (`{}`)
         *     and the cause is logged, so a preview never blocks a submission.
         *     Rate limited (bucket `preview`).
         */
        get: operations["previewTarget"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/stats": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Legacy counters — a bare object, no envelope.
         * @description The links in front of it (rate limiting, login) answer in the envelope as on every route; so does its own failure. Rate limited (bucket `stats`).
         */
        get: operations["getStats"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/reviews": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The access-review items the caller may decide.
         * @description The undecided items of open campaigns whose target the caller owns
         *     (`targets.<key>.owners`), or every one for an operator who holds the
         *     rules of `POST /ops/reviews` — never the caller's own access, which
         *     another owner or an operator decides (docs/reviews.md).
         */
        get: operations["listMyReviewItems"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/reviews/{reviewId}/items/{itemId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Keep or revoke one entry under review (audited).
         * @description An owner of the campaign's target, or an operator, decides one item,
         *     once; nobody decides their own access (`403 REVIEW_NOT_ALLOWED`,
         *     `data.reason` `own_access`). A revoke starts the ordinary removal
         *     at once — an operator revocation with the decider as actor and the
         *     campaign named in its reason — and the answer names it in
         *     `revocationId` (the review pass starts it if this call could not).
         */
        post: operations["decideReviewItem"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/api/notifications/preferences": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Which kinds of message the caller hears of by e-mail.
         * @description Every kind a person may hear of about their own requests and reviews,
         *     whether the caller does (`enabled`; a kind never chosen is on) and
         *     whether they may turn it off (`locked`: the messages that access is
         *     about to end or has ended stay on unless `notify.allowSafetyOptOut`).
         *     Webhooks and chat go to systems an operator configured and are not
         *     a person's to choose (docs/notifications.md, "Preferences").
         */
        get: operations["getMyNotificationPreferences"];
        /**
         * Turn kinds of message on or off (audited).
         * @description `{"<kind>": true|false, …}`: the kinds named are set, the others kept.
         *     Every bad entry is named in `fields` and nothing is saved: a kind
         *     that is not a person's to choose, a value that is not a boolean, or
         *     a locked kind turned off.
         */
        put: operations["setMyNotificationPreferences"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/callbacks/approval": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * The approval system reports a decision.
         * @description Applies only to the approval changeflow submitted for the operation;
         *     with `approval.verifyDecisions` the decision applied is read back from
         *     the approval system. Deduplicated by `requestId`. Once authenticated
         *     and parsed the answer is always 2xx, so the sender stops retrying.
         */
        post: operations["approvalCallback"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/callbacks/deploy": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * The deployment pipeline reports an MR's change in effect.
         * @description Counts only for MRs changeflow merged; every delivery is kept in the deploy inbox with what became of it (`GET /ops/callbacks/deploy`). Deduplicated by `requestId`.
         */
        post: operations["deployCallback"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/callbacks/gitlab": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * A GitLab webhook (pipeline and merge request events).
         * @description Only speeds up waiting; polling stays the fallback. Deduplicated by `Idempotency-Key`, else `X-Gitlab-Event-UUID`.
         */
        post: operations["gitlabWebhook"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/requests/{operationId}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A request in full — both states, step history, batch, callbacks, audit. */
        get: operations["opsGetRequest"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/requests/{operationId}/retrigger": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Resume a stopped request from where it stopped. */
        post: operations["opsRetrigger"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/requests/{operationId}/replay-approval": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Apply the latest recorded approval decision again, through the callback guard. */
        post: operations["opsReplayApproval"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/requests/{operationId}/revoke": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Revoke anyone's access, with a reason (audited). */
        post: operations["opsRevoke"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/requests/{operationId}/close": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * End a request stopped on a failure as CLOSED, closing its MR (audited).
         * @description Only a request stopped on a failure or in a pending step, not in a
         *     claimed batch and not a removal. Its MR is closed and the request
         *     ends `CLOSED` (step `CLOSE_CANCELLED`, the operator and the reason
         *     in its history); if the MR was merged meanwhile the request follows
         *     its merge and the answer is `409 ALREADY_IN_EFFECT` ("merged wins").
         *     A repeat answers the state; a request that has already ended
         *     answers `200` with a message.
         */
        post: operations["opsCloseRequest"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/batches": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Batches, newest first. */
        get: operations["opsListBatches"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/requests": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Find any request — by person, target and status, or what waits on a person — newest first.
         * @description Keyset pages newest first (docs/api.md, "Find requests"). `status` keeps the requests that hold their entry in that state now (a grant or renewal in effect is `VALIDATED`); `attention=true` keeps what waits on a person: a request stopped on a failure or an unknown outcome, one whose status is a failure (`CREATE_FAILED`, `HANDLE_FAILED`, `REVOKE_FAILED`), a member of a `BLOCKED` batch, one at a step for more than twice its bound.
         */
        get: operations["opsFindRequests"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/security-events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Security events — content on changeflow's branches it did not write — newest first.
         * @description Each event is a head, branch or MR on changeflow's branch namespace that changeflow refused (never approved, merged, built on or adopted); see docs/security.md, "Only what changeflow wrote".
         */
        get: operations["opsListSecurityEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/notifications": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The notification outbox at a glance — what waits, the dead letters and the channels turned off.
         * @description pending and oldestPendingSeconds say how many events wait to be delivered and for how long the oldest has; deadLetters are the events that ran out of attempts (notify.maxAttempts), newest first, with what the failing channels answered; disabledChannels are the destinations that answered 410 Gone. See docs/notifications.md.
         */
        get: operations["opsNotifications"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/notifications/{eventId}/replay": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Deliver a dead letter again (its attempts start over; channels that took it are not sent it twice). */
        post: operations["opsReplayNotification"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/notifications/channels/{channel}/enable": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Turn a channel a 410 Gone turned off back on, for the events written from now on. */
        post: operations["opsEnableNotificationChannel"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/audit/export": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The tamper-evident audit export — every recorded access change and decision in a range, hash-chained, with a signed manifest.
         * @description Streams the audit chain's records whose occurredAt lies in [from, to) (the unbroken run of the chain from the first to the last of them, in seq order), each with seq, prevHash and hash, and ends with a manifest signed with Ed25519 (audit.signingKey). Records written in the last few seconds (the chainer's grace) are not in it yet. Verify it offline with `changeflow audit verify FILE --key PUBKEY`; the formats, the hash and the signed bytes are in docs/audit.md. A failure after the first byte cuts the connection (no manifest), so a cut export never verifies.
         */
        get: operations["opsAuditExport"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/audit/key": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The public key that verifies audit exports.
         * @description The public half of audit.signingKey, as base64 of its 32 bytes and as a PEM PUBLIC KEY block; either is what `changeflow audit verify --key` takes. 503 while audit.signingKey is not set.
         */
        get: operations["opsAuditKey"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/batches/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** A batch and its members. */
        get: operations["opsGetBatch"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/batches/{id}/settle": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Settle a stuck or blocked batch — close its MR, read it again, merged wins. */
        post: operations["opsSettleBatch"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/rounds": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Run a batch round now (safe beside the scheduled rounds of every instance). */
        post: operations["opsRunRounds"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/reconcile": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Run reconciliation now. */
        post: operations["opsReconcile"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/expiry/scan": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run an expiry scan now (safe beside the scheduled scans of every instance).
         * @description Revokes every granted access whose expiry has passed by the database clock, as the scheduled scan does; each revocation is created once however many scans overlap. The message says in words how many revocations this call created.
         */
        post: operations["opsExpiryScan"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/config": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The effective configuration, and which items fell back and why (secrets masked). */
        get: operations["opsGetConfig"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/checks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The deployment checks, as `changeflow doctor` prints them.
         * @description Checks the configuration (callback and bot tokens strong and distinct, no loopback trusted for login headers outside --local) and, against GitLab, that `changeflow/*` is protected so only the committer bot may push, that each bot holds the role it needs and that the webhook reaches changeflow. Answered 200 whatever the findings; `data.status` is the worst finding's. Each call reads GitLab, so it spends the preview's rate-limit bucket.
         */
        get: operations["opsGetChecks"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/reviews": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The access-review campaigns, newest first (at most 200). */
        get: operations["opsListReviews"];
        put?: never;
        /**
         * Open an access-review campaign for a target (audited).
         * @description One item per entry in effect on the target now (each changeflow
         *     grant in effect, and each entry changeflow did not write); at
         *     `dueAt` the undecided items take `defaultDecision` (`revoke` is the
         *     safer default; a `keep` campaign is flagged `keepByDefault` in its
         *     report). One open campaign per target.
         */
        post: operations["opsOpenReview"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/reviews/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A campaign's report — who decided what, when, and whether each removal is in effect.
         * @description As JSON, or with `format=csv` a CSV download (`text/csv`, one row
         *     per entry, the columns of `reviewCSVHeader`; a cell a spreadsheet
         *     would read as a formula is prefixed with `'`).
         */
        get: operations["opsGetReview"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/callbacks/deploy": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Every recorded deploy callback, newest first.
         * @description Where callbacks for an MR no request has (`UNKNOWN_MR`) show up.
         */
        get: operations["opsListDeployCallbacks"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/targets/unowned-expired": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Expired entries changeflow does not own, per binding file.
         * @description Every configured target's binding file on the default branch (read
         *     through the preview's GitLab client and breaker), with its entries
         *     whose expiry has passed by the database clock and that no operation
         *     of changeflow's wrote. changeflow never removes those; a person
         *     decides. A file that cannot be read or parsed carries a `problem`
         *     and the others are still checked. Rate limited (bucket `preview`).
         */
        get: operations["opsListUnownedExpired"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/access": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Who had access to a target at an instant, or what a person had.
         * @description "Had access" is an entry in the target's binding file on the default
         *     branch, from the moment its change was in effect (the deployment's
         *     confirmation) until its removal was in effect (docs/api.md, "Access
         *     history"). Each period is half-open, [from, until): at the instant a
         *     renewal took effect only the renewal's period answers. Name exactly
         *     one of `target` and `subject`. One indexed range read. Periods of
         *     `source` `repo` are entries changeflow did not write, read from the
         *     file's history on the default branch by the periodic reader
         *     (`access.repoScanInterval`). The answer also lists where
         *     changeflow's records and the files on the default branch disagree
         *     now (`discrepancies`): by `target`, in its file (one read of the
         *     file from GitLab); by `subject`, the person's in the file of every
         *     target they have a binding on (one file read per such target).
         */
        get: operations["opsAccessAt"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/ops/access/history": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Every period of access to a target overlapping a window, oldest first.
         * @description The periods with `from` < `to` and `until` > `from` (or still open):
         *     [from, to) overlaps [period.from, period.until). At most `limit`
         *     (default and maximum 1000); `more` says there were more — ask for a
         *     narrower window. One indexed range read.
         */
        get: operations["opsAccessHistory"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        /**
         * @description Every code of the error model and its one HTTP status (docs/api.md "Error model").
         * @enum {string}
         */
        ErrorCode: "INVALID_ARGUMENT" | "UNAUTHENTICATED" | "ACCESS_DENIED" | "UNKNOWN_ACCOUNT" | "TARGET_NOT_OPEN" | "REVIEW_NOT_ALLOWED" | "NOT_FOUND" | "METHOD_NOT_ALLOWED" | "MISDIRECTED_REQUEST" | "REQUEST_IN_PROGRESS" | "ALREADY_IN_EFFECT" | "NOT_IN_EFFECT" | "REVIEW_CONFLICT" | "IDEMPOTENCY_IN_FLIGHT" | "IDEMPOTENCY_KEY_REUSED" | "RATE_LIMITED" | "RETRY_LATER" | "INTERNAL_ERROR";
        /**
         * @description The codes of 2xx answers.
         * @enum {string}
         */
        SuccessCode: "OK" | "ACCEPTED" | "DUPLICATE_SUBMIT" | "DUPLICATE" | "IGNORED_STALE";
        /** @description One bad input and what is wrong with it. */
        FieldProblem: {
            /** @description The input as the client named it — a body field as a dotted JSON path (`days`, `ext.mrId`), a query, path or header parameter by its name (`limit`, `id`, `Idempotency-Key`). */
            field: string;
            /** @description What is wrong, in plain words, completing the field's name (`must be between 1 and 30 for this target`). */
            problem: string;
        };
        InvalidArgumentAnswer: {
            /** @constant */
            code: "INVALID_ARGUMENT";
            /** @description One line for clients that show one — the first problem's. */
            message: string;
            data: {
                /** @description Every bad input; empty when the input as a whole is unusable (not JSON, not an object, too large). */
                fields: components["schemas"]["FieldProblem"][];
            };
        };
        UnauthenticatedAnswer: components["schemas"]["ErrorAnswer"];
        AccessDeniedAnswer: components["schemas"]["ErrorAnswer"];
        /** @description A login changeflow does not know (docs/api.md, "401 or 403"). */
        UnknownAccountAnswer: {
            /** @constant */
            code: "UNKNOWN_ACCOUNT";
            /** @description In words, with who to ask. */
            message: string;
            data: {
                /** @description The account the login named, as changeflow read it. */
                account: string;
            };
        };
        /** @description A submission to a target that is not open; `data.reason` is `target_closed` or `outside_window`. */
        TargetNotOpenAnswer: {
            /** @constant */
            code: "TARGET_NOT_OPEN";
            message: string;
            data: components["schemas"]["RefusalData"];
        };
        NotFoundAnswer: components["schemas"]["ErrorAnswer"];
        MethodNotAllowedAnswer: components["schemas"]["ErrorAnswer"];
        MisdirectedAnswer: components["schemas"]["ErrorAnswer"];
        /** @description The request or batch is not in a state this action applies to; `data.reason` says which case (docs/api.md, "Refusal reasons"). */
        InProgressAnswer: {
            /** @constant */
            code: "REQUEST_IN_PROGRESS";
            message: string;
            data: components["schemas"]["RefusalData"];
        };
        /** @description A refused give-back or operator revoke. `data.reason` says why; `data.operationId` names the request to act on instead when this one no longer carries its access: the renewal that carries it now (give that one back), or the removal already under way or done. */
        NotInEffectAnswer: {
            /** @constant */
            code: "NOT_IN_EFFECT";
            message: string;
            data: {
                /** @description `renewed` (a renewal carries the access now: `operationId`), `removed` (it is being removed or was: `operationId` is the revocation) or `not_in_effect`. */
                reason: components["schemas"]["RefusalReason"];
                /** @description The request that carries the access now, or the revocation removing it (`renewed` and `removed` only). */
                operationId?: string;
            };
        };
        /** @description A refused give-back or operator revoke (docs/api.md, "Give access back"). */
        RevokeConflictAnswer: components["schemas"]["NotInEffectAnswer"] | components["schemas"]["InProgressAnswer"];
        /** @description A 409 to a submission; `data` names the request concerned and the reason, null for `IDEMPOTENCY_IN_FLIGHT`. */
        SubmitConflictAnswer: {
            /** @enum {unknown} */
            code: "REQUEST_IN_PROGRESS" | "ALREADY_IN_EFFECT" | "IDEMPOTENCY_IN_FLIGHT";
            message: string;
            data: null | {
                /** @description The caller's request that holds the binding. */
                operationId: string;
                /** @description `in_effect` (`ALREADY_IN_EFFECT`); `in_progress` or `expired_being_removed` (`REQUEST_IN_PROGRESS`). */
                reason: components["schemas"]["RefusalReason"];
                /**
                 * Format: date-time
                 * @description Until when the access is in effect (`ALREADY_IN_EFFECT`).
                 */
                expiresAt?: string;
                /**
                 * Format: date-time
                 * @description From when re-applying renews the access in effect (`ALREADY_IN_EFFECT` before its renewal window opens, an access with an expiry); the message says it too. Inside the window the submission is accepted as a renewal (docs/api.md, "Renewing access").
                 */
                renewFrom?: string;
            };
        };
        IdempotencyReusedAnswer: components["schemas"]["ErrorAnswer"];
        RateLimitedAnswer: components["schemas"]["ErrorAnswer"];
        RetryLaterAnswer: components["schemas"]["ErrorAnswer"];
        InternalAnswer: components["schemas"]["ErrorAnswer"];
        /**
         * @description Which refusal of its code an answer is, for a client to choose its words by (the message is for people and may be reworded); stable snake_case names, each explained in docs/api.md, "Refusal reasons".
         * @enum {string}
         */
        RefusalReason: "renewal_has_change" | "renewal_merging" | "renewal_stopped" | "renewal_expired" | "not_in_effect" | "renewed" | "removed" | "in_progress" | "expired_being_removed" | "in_effect" | "merged_first" | "claimed_by_batch" | "merging" | "stopped_on_failure" | "close_failed" | "is_revocation" | "stopped_while_merging" | "not_stopped" | "pipeline_not_retried" | "not_retriggerable" | "mr_wont_close" | "target_closed" | "outside_window" | "own_access" | "not_reviewer" | "already_decided" | "review_closed" | "review_open";
        /** @description The `data` of a refusal that refers to nothing but its reason. */
        RefusalData: {
            reason: components["schemas"]["RefusalReason"];
        };
        /** @description An error in the envelope; `data` is null. */
        ErrorAnswer: {
            code: components["schemas"]["ErrorCode"];
            message: string;
            data: null;
        };
        HealthAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                /** @constant */
                status: "up";
                version: string;
            };
        };
        Readiness: {
            /** @enum {unknown} */
            status: "ready" | "not ready";
            /** @enum {unknown} */
            database: "ok" | "unreachable" | "not synced";
            /** @description The Galera node's state/status (`Synced/Primary`), `unknown` when it could not be read; absent elsewhere. */
            cluster?: string;
            /** @enum {unknown} */
            migrations: "current" | "pending" | "unknown";
            schemaVersion: number;
            schemaVersionExpected: number;
        };
        ReadyAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: components["schemas"]["Readiness"];
        };
        NotReadyAnswer: {
            /** @constant */
            code: "RETRY_LATER";
            message: string;
            data: components["schemas"]["Readiness"];
        };
        /** @description An OpenAPI 3.1 document (this one). */
        OpenAPIDocument: {
            openapi: string;
        };
        AppConfigAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                /** @description Present when `oidc.issuer` is set; the app then offers "Sign in" (authorization code with PKCE). */
                oidc?: {
                    issuer: string;
                    clientId: string;
                };
                /** @description Present when the simulators run embedded on a known port (the local run). */
                simulators?: {
                    index: string;
                    approval: string;
                };
                /**
                 * @description Present (true) only when the simulators run embedded and login headers are trusted from loopback; the app then offers its "acting as" picker.
                 * @constant
                 */
                userPicker?: true;
                /** @description Whom a person asks when a request failed (`ui.contact`; its fallback when unset), named on the failure page. */
                contact: string;
            };
        };
        MeAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                account: string;
                /** @description The caller holds an operations rule (the console's read rules). */
                operations: boolean;
            };
        };
        /** @description Unknown fields are ignored; at most 64 KiB. */
        SubmitBody: {
            /** @description The client's idempotency key and the request's id; 1..64 printable characters without spaces or `/`. Absent (or null) → the `Idempotency-Key` header, else the server picks a random one. */
            operationId?: string | null;
            /** @description A configured target's key. */
            targetKey: string;
            /** @description 1..500 characters after trimming, on one line (no control or bidirectional-formatting characters). */
            reason: string;
            /** @description 1..the target's `maxDays`; absent (or null) → `maxDays`. */
            days?: number | null;
        };
        SubmitAnswer: {
            /** @enum {unknown} */
            code: "ACCEPTED" | "DUPLICATE_SUBMIT";
            message: string;
            data: {
                operationId: string;
            };
        };
        /**
         * @description The state people see (docs/workflow.md). `REJECTED`, `CLOSED` and `REVOKED` can be asked for again; `REVOKING` is access being removed, `REVOKE_FAILED` a removal that needs a person (the access is still granted); `RENEWING` is access in effect whose renewal is under way (the status of the binding; a request's own status read shows its renewal's progress instead).
         * @enum {string}
         */
        BindingStatus: "APPROVAL_SENDING" | "APPROVAL_SENT" | "MR_CREATING" | "MR_CREATED" | "MERGING" | "MERGED" | "VALIDATED" | "CREATE_FAILED" | "HANDLE_FAILED" | "REJECTED" | "CLOSED" | "REVOKING" | "REVOKED" | "REVOKE_FAILED" | "RENEWING";
        /**
         * @description `GRANT`: a request for access; `REVOKE`: the removal of a grant's entry (its revocation, operationId `<grant>~revoke`); `RENEW`: the renewal of a grant in effect (a re-application inside its renewal window).
         * @enum {string}
         */
        OperationKind: "GRANT" | "REVOKE" | "RENEW";
        /**
         * @description Why a revocation was made: `EXPIRED` (the expiry scan), `GIVEN_BACK` (its owner), `OPERATOR` (an operator).
         * @enum {string}
         */
        RevokeReason: "EXPIRED" | "GIVEN_BACK" | "OPERATOR";
        /**
         * @description `KEEP_WAITING`: stopped where a retry on the same MR helps, or the outcome is not known yet; `CONTACT_MAINTAINERS`: a failure a person must fix.
         * @enum {string}
         */
        Hint: "NONE" | "KEEP_WAITING" | "CONTACT_MAINTAINERS";
        /** @description The internal step (for troubleshooting); codes in ranges by phase. */
        Step: {
            code: number;
            name: string;
        };
        MergeRequest: {
            iid: number;
            url: string;
        };
        /** @description What the request waits on right now. */
        Blocker: {
            /**
             * @description `BLOCKED_BATCH`: a member following a batch that is `BLOCKED` waits for a person, and its owner may withdraw it.
             * @enum {unknown}
             */
            kind: "APPROVAL" | "BATCH" | "BLOCKED_BATCH" | "PIPELINE" | "REBASE" | "DEPLOYMENT";
            detail: string;
            /** Format: date-time */
            since: string;
        };
        Request: {
            operationId: string;
            subject: string;
            targetKey: string;
            /** @description The target's title in the configuration in force; absent once it is no longer configured. */
            targetTitle?: string;
            reason: string;
            /** @description Days asked for (the target's maximum when the submission left it out). */
            days: number;
            /** @description Only on `GET /api/requests/{operationId}` of a `REJECTED` request; the approver's comment as the approval system reported it. */
            approverComment?: string;
            status: components["schemas"]["BindingStatus"];
            step: components["schemas"]["Step"];
            hint: components["schemas"]["Hint"];
            /** @description Only on `GET /api/requests/{operationId}`; absent when nothing is awaited. */
            blocker?: components["schemas"]["Blocker"];
            mr?: components["schemas"]["MergeRequest"];
            batchId?: number;
            /**
             * Format: date-time
             * @description When the access ends. Absent while an approve-first grant waits for its approval (`expiresFromApproval`); its approval fixes it (docs/api.md, "When the access ends").
             */
            expiresAt?: string;
            /** @description Present, `true`, while an approve-first grant waits for its approval: its `days` count from the approval (at most the target's `maxDays`), so its end is not known yet and `expiresAt` is absent. A renewal's end is known from its submission and is shown as `expiresAt`. */
            expiresFromApproval?: boolean;
            /**
             * Format: date-time
             * @description From when re-applying (the normal submit, same target) renews this grant; present while its access is in effect and has an expiry (docs/api.md, "Renewing access").
             */
            renewFrom?: string;
            /** @description On a grant (or a renewal) that was renewed: its renewal in flight, with its progress; or, once a renewal took effect, the renewal that carries the access now — the next one, or a later one when renewals were renewed in turn (`status` `VALIDATED`; this request's own `expiresAt` no longer applies). docs/api.md, "Renewing access". */
            renewal?: {
                operationId: string;
                status: components["schemas"]["BindingStatus"];
                /**
                 * Format: date-time
                 * @description On a renewal that carries the access, when the access ends now.
                 */
                expiresAt?: string;
            };
            /** @description On a renewal, the grant it renews. */
            renews?: string;
            /** Format: date-time */
            createdAt: string;
            /** Format: date-time */
            updatedAt: string;
            kind?: components["schemas"]["OperationKind"];
            /** @description A revocation's grant (the one it ends), or a renewal's (the one it renews). */
            grantOperationId?: string;
            revokeReason?: components["schemas"]["RevokeReason"];
            /** @description On a grant whose access is being removed or was, the revocation that took its binding over. */
            revocationId?: string;
            /** @description The step bar (docs/api.md, "The step bar"): the request's steps in its flow's order, each where it stands, decided from its flow, kind, status and step history. */
            progress: components["schemas"]["ProgressStep"][];
        };
        /** @description One step of the step bar. `key`: `APPROVAL` (the approvers decide; not on a revocation), `PROPOSED` (the change, or the removal, proposed as a merge request), `CHECKS` (its check pipeline), `MERGED` (bot approvals and merge), `DEPLOYED` (the deployment reported the change in effect; a grant or renewal), `REMOVED` (the access removed and deployed: a revocation's last step, and the step a grant gains once its access is being removed), `RENEWED` (a later renewal carries the access on), `EXPIRED` (the access lapsed). `state`: `DONE`, `CURRENT` (under way or waited for), `FAILED` (stopped on a failure, or rejected), `SKIPPED` (will not happen: the request ended before it, or there was nothing to do), `TODO` (not reached yet). */
        ProgressStep: {
            /** @enum {unknown} */
            key: "APPROVAL" | "PROPOSED" | "CHECKS" | "MERGED" | "DEPLOYED" | "REMOVED" | "RENEWED" | "EXPIRED";
            /** @enum {unknown} */
            state: "DONE" | "CURRENT" | "FAILED" | "SKIPPED" | "TODO";
        };
        RequestAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: components["schemas"]["Request"];
        };
        WithdrawAnswer: {
            /** @enum {unknown} */
            code: "OK" | "ACCEPTED";
            message: string;
            data: components["schemas"]["Request"];
        };
        /** @description A refused withdrawal or operator close; `data.reason` says which case (docs/api.md, "Refusal reasons"). */
        WithdrawConflictAnswer: {
            /** @enum {unknown} */
            code: "REQUEST_IN_PROGRESS" | "ALREADY_IN_EFFECT";
            message: string;
            data: components["schemas"]["RefusalData"];
        };
        RequestListAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                items: components["schemas"]["Request"][];
                /** @description The cursor of the next page; empty on the last. */
                nextCursor: string;
            };
        };
        /** @description The legacy counters, a bare object. */
        Stats: {
            /** @description Approved requests waiting in the first configured project's batch queue. */
            pending: number;
            /** @description Requests the caller has submitted (capped at 1000). */
            mine: number;
        };
        TargetListAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                items: {
                    key: string;
                    title: string;
                    /** @enum {unknown} */
                    accessMode: "OPEN" | "TEST_WINDOW" | "CLOSED";
                    open: boolean;
                    /** @description The longest access a request may ask for (`targets.<key>.maxDays`). */
                    maxDays: number;
                    /** @description Why a closed target is closed (`outside the test window 09:00–17:00 UTC`); absent when open. */
                    why?: string;
                    /** @description True on the approve-first flow (`workflow.approveFirst`): a new grant's days count from its approval, so its end is the approval's time + days; false on the legacy flow, where they count from the submission. A renewal counts from the later of now and the current end in either flow (docs/api.md, "When the access ends"). */
                    daysFromApproval: boolean;
                    mine?: components["schemas"]["TargetMine"];
                }[];
            };
        };
        /**
         * @description The caller's own standing on the target (docs/api.md, "GET /api/targets"):
         *     the access they hold, or their request under way or stopped there.
         *     Absent when they hold nothing and nothing of theirs is open on it
         *     (never asked, or the last request was rejected, closed or its access
         *     removed): a new request is then what the target offers them.
         */
        TargetMine: {
            /** @description The binding's state. `VALIDATED`, `RENEWING`, `REVOKING` and `REVOKE_FAILED` are access held (in effect until its removal is deployed); any other is a request not yet in effect. */
            status: components["schemas"]["BindingStatus"];
            /** @description The request to open and act on. While the access is held, the one that carries it (the grant, or the renewal in effect that carries it now) — giving back (`POST /api/requests/{operationId}/revoke`) and renewing act on it; otherwise the request under way. */
            operationId: string;
            /**
             * Format: date-time
             * @description When the access held ends; absent before it is in effect and for an access without expiry.
             */
            expiresAt?: string;
            /** @description `true`: the access held has passed its end (database clock) and its removal is due. Absent otherwise. */
            expired?: boolean;
            /**
             * Format: date-time
             * @description From when asking again renews the access, as on the request's status read; present while it is in effect with an expiry and no renewal is under way.
             */
            renewFrom?: string;
            /** @description The renewal under way (`RENEWING`). */
            renewalId?: string;
            /** @description The removal of the access (`REVOKING`, `REVOKE_FAILED`). */
            revocationId?: string;
        };
        PreviewAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: components["schemas"]["Preview"] | Record<string, never>;
        };
        Preview: {
            targetKey: string;
            project: string;
            file: string;
            ref: string;
            /**
             * @description `own`: `before` and `after` hold only the caller's entry; `file`: the whole file.
             * @enum {unknown}
             */
            scope: "own" | "file";
            entry: {
                subject: string;
                /** Format: date-time */
                expiresAt: string;
            };
            /** @description How many other entries the file holds — never who. */
            otherHolders: number;
            before: string;
            after: string;
            diff: {
                /** @enum {unknown} */
                op: " " | "-" | "+";
                text: string;
            }[] | null;
        };
        ApprovalCallbackBody: {
            /** @description The delivery id (deduplication key). */
            requestId: string;
            approvalId?: string;
            operationId: string;
            /**
             * @description Case-insensitive.
             * @enum {string}
             */
            result: "APPROVED" | "REJECTED" | "WITHDRAWN";
            ext?: {
                /** @description Present on legacy-flow approvals only (the MR the approval is for). */
                mrId?: string | number;
            };
            /** @description Optional: who decided (kept, at most 128 characters, and named in the audit export). */
            decidedBy?: string;
            /** @description Optional: the approver's comment, e.g. a rejection's reason (at most 500 characters kept). */
            comment?: string;
        };
        DeployCallbackBody: {
            /** @description The delivery id (deduplication key). */
            requestId?: string;
            project: number;
            mrIid: number;
            status: string;
        };
        /** @description A GitLab webhook payload; only `object_kind` is read. */
        GitLabWebhookBody: {
            object_kind: string;
        };
        CallbackDoneAnswer: {
            /** @enum {unknown} */
            code: "OK" | "DUPLICATE" | "IGNORED_STALE";
            message: string;
            data: null;
        };
        CallbackRecordedAnswer: {
            /** @constant */
            code: "ACCEPTED";
            message: string;
            data: null;
        };
        /** @description Optional; when sent, a JSON object. Its fields go into the audit record. */
        OptionalObjectBody: Record<string, never>;
        RevokeBody: {
            /** @description Why the access is revoked; one line, at most 500 characters, no control or bidirectional characters. */
            reason: string;
        };
        CloseBody: {
            /** @description Why the request is closed; one line, at most 500 characters, no control or bidirectional characters. */
            reason: string;
        };
        RevokeData: {
            /** @description The grant's operationId. */
            operationId: string;
            /** @description The revocation's operationId (`<operationId>~revoke`); GET /api/requests/{revocationId} follows it. */
            revocationId: string;
            created: boolean;
            bindingStatus: components["schemas"]["BindingStatus"];
        };
        RevokeCreatedAnswer: {
            /** @constant */
            code: "ACCEPTED";
            message: string;
            data: components["schemas"]["RevokeData"];
        };
        RevokeExistingAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: components["schemas"]["RevokeData"];
        };
        /**
         * @description An access-review decision.
         * @enum {string}
         */
        ReviewDecision: "keep" | "revoke";
        ReviewOpenBody: {
            /** @description A configured target. */
            targetKey: string;
            /**
             * Format: date-time
             * @description When undecided items take the default; RFC 3339, in the future.
             */
            dueAt: string;
            defaultDecision: components["schemas"]["ReviewDecision"];
        };
        ReviewDecideBody: {
            decision: components["schemas"]["ReviewDecision"];
            /** @description Optional, one line, at most 500 characters; a revoke's comment goes into the removal's reason. */
            comment?: string;
        };
        ReviewCampaignFields: {
            id: number;
            targetKey: string;
            /** Format: date-time */
            openedAt: string;
            /** Format: date-time */
            dueAt: string;
            defaultDecision: components["schemas"]["ReviewDecision"];
            /** @description The default is `keep`: undecided entries stay — flagged, since `revoke` is the safer default. */
            keepByDefault: boolean;
            /** @description The operator, or `review-schedule` for a scheduled campaign. */
            openedBy: string;
            /** @enum {string} */
            status: "open" | "closed";
            /** Format: date-time */
            closedAt?: string;
            /** @description Opened by `targets.<key>.review.every`. */
            scheduled: boolean;
            items: number;
            decided: number;
        };
        ReviewCampaign: components["schemas"]["ReviewCampaignFields"];
        /** @description One entry under review and what became of it. */
        ReviewItem: {
            id: number;
            reviewId: number;
            subject: string;
            /**
             * @description `changeflow`: a grant changeflow wrote; `repo`: an entry it did not write.
             * @enum {string}
             */
            source: "changeflow" | "repo";
            grantOperationId?: string;
            approvalId?: string;
            /**
             * Format: date-time
             * @description When the grant took effect (for a `repo` item, when the entry was added).
             */
            from?: string;
            /** Format: date-time */
            expiresAt?: string;
            decision?: components["schemas"]["ReviewDecision"];
            /** @description The owner or operator, or `review:<id>` when the campaign's default decided. */
            decidedBy?: string;
            /** Format: date-time */
            decidedAt?: string;
            comment?: string;
            /** @description The campaign's default decided it at the due date. */
            byDefault: boolean;
            /** @description The removal a revoke started (`<operationId>~revoke`; for a `repo` item `review-item-<id>~remove`); follow it at `GET /ops/requests/{operationId}`. */
            revocationId?: string;
            /** @description Why no removal was started (the access had ended already; for a `repo` item also: the entry left the file, or changeflow's own grant holds the access now). */
            revokeNote?: string;
            /** @description The removal's deployment confirmed it (or reconciliation inferred it). */
            removalInEffect: boolean;
            /** @description `GET /api/reviews` only. */
            targetKey?: string;
            /**
             * Format: date-time
             * @description `GET /api/reviews` only.
             */
            dueAt?: string;
        };
        ReviewReport: {
            entries: components["schemas"]["ReviewItem"][];
        } & components["schemas"]["ReviewCampaignFields"];
        ReviewCampaignAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: components["schemas"]["ReviewCampaign"];
        };
        ReviewListAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                reviews: components["schemas"]["ReviewCampaign"][];
            };
        };
        ReviewReportAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: components["schemas"]["ReviewReport"];
        };
        /**
         * @description A kind of notification (docs/notifications.md, "Kinds").
         * @enum {string}
         */
        NotificationKind: "request.submitted" | "request.approved" | "request.rejected" | "request.in_effect" | "request.failed" | "request.withdrawn" | "access.expiring" | "access.removed" | "renewal.in_effect" | "batch.blocked" | "review.assigned" | "security.foreign_head";
        Preference: {
            kind: components["schemas"]["NotificationKind"];
            /** @description The person hears of this kind. */
            enabled: boolean;
            /** @description The person cannot turn it off (a safety message; notify.allowSafetyOptOut is off). */
            locked: boolean;
        };
        /** @description Kinds to set, each to true (on) or false (off), e.g. {"request.submitted": false}. */
        PreferencesBody: {
            [key: string]: boolean;
        };
        PreferencesAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                preferences: components["schemas"]["Preference"][];
            };
        };
        ReviewItemsAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                items: components["schemas"]["ReviewItem"][];
            };
        };
        ReviewItemAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: components["schemas"]["ReviewItem"];
        };
        ReviewNotAllowedAnswer: {
            /** @constant */
            code: "REVIEW_NOT_ALLOWED";
            message: string;
            data: components["schemas"]["RefusalData"];
        };
        ReviewConflictAnswer: {
            /** @constant */
            code: "REVIEW_CONFLICT";
            message: string;
            data: components["schemas"]["RefusalData"];
        };
        RetriggerBody: {
            /** @description When given, must name where the request stopped — its step (`CREATE_FAILED`) or its kept action (`create_mr`). */
            step?: string;
        };
        RoundsBody: {
            /** @description One project; default every numeric `gitlab.projects` entry. */
            projectId?: number;
        };
        Operation: {
            operationId: string;
            subject: string;
            targetKey: string;
            projectId: number;
            flow: string;
            version: number;
            batchId?: number;
            mr?: components["schemas"]["MergeRequest"];
            branch?: string;
            approvalId?: string;
            reason: string;
            days?: number;
            /** Format: date-time */
            expiresAt?: string;
            nextAction?: string;
            /** Format: date-time */
            dueAt?: string;
            leaseOwner?: string;
            /** Format: date-time */
            leaseExpiresAt?: string;
            attempts: number;
            lastError?: string;
            /** Format: date-time */
            createdAt: string;
            /** Format: date-time */
            updatedAt: string;
            kind?: components["schemas"]["OperationKind"];
            /** @description A revocation's grant (the one it ends), or a renewal's (the one it renews). */
            grantOperationId?: string;
            revokeReason?: components["schemas"]["RevokeReason"];
        };
        Binding: {
            subject: string;
            targetKey: string;
            status: components["schemas"]["BindingStatus"];
            operationId: string;
            /** Format: date-time */
            expiresAt?: string;
            expired: boolean;
            version: number;
            /** Format: date-time */
            updatedAt: string;
        };
        StepHistory: {
            from: components["schemas"]["Step"];
            to: components["schemas"]["Step"];
            fromBinding?: components["schemas"]["BindingStatus"];
            toBinding?: components["schemas"]["BindingStatus"];
            actor: string;
            note?: string;
            /** Format: date-time */
            at: string;
        };
        Batch: {
            id: number;
            projectId: number;
            /**
             * @description `BLOCKED` needs a person (`failureCode` `BATCH_NEEDS_A_PERSON`, the reason in `failureMessage`).
             * @enum {unknown}
             */
            status: "RUNNING" | "BLOCKED" | "SUCCEEDED" | "FAILED";
            version: number;
            mr?: components["schemas"]["MergeRequest"];
            branch?: string;
            splitDepth: number;
            /** @description The failed batch this culprit-isolation half was cut from. */
            parentBatchId?: number;
            failureCode?: string;
            failureMessage?: string;
            /** Format: date-time */
            createdAt: string;
            /** Format: date-time */
            updatedAt: string;
            /** @description The batch's requests (in the list too, one read per batch of the page). */
            members?: {
                kind: components["schemas"]["OperationKind"];
                id: number;
                operationId: string;
            }[];
        };
        /** @description Where an admitted request stands in its project's queue. */
        Queue: {
            projectId: number;
            /** @description The claiming batch; absent while waiting. */
            batchId?: number;
            /** @description 1-based place in the waiting queue; absent once claimed. */
            position?: number;
            /** Format: date-time */
            admittedAt: string;
        };
        ApprovalCallbackRecord: {
            deliveryKey: string;
            approvalId: string;
            result: string;
            /** @enum {unknown} */
            source: "callback" | "poll";
            /**
             * @description What the workflow did with it the last time it acted on it (`RECORDED` until then).
             * @enum {unknown}
             */
            disposition: "RECORDED" | "APPLIED" | "STALE" | "UNKNOWN_OPERATION" | "REJECTED_BY_GUARD" | "UNCONFIRMED" | "VERIFY_FAILED";
            reason: string;
            /** @description Later deliveries of the same key. */
            duplicates: number;
            /** Format: date-time */
            receivedAt: string;
            /** @description Who decided, as the delivery reported it; absent when it named nobody. */
            decidedBy?: string;
        };
        /**
         * @description What became of a deploy callback (docs/flows/callbacks.md "The deploy inbox").
         * @enum {string}
         */
        DeployDisposition: "RECORDED" | "APPLIED" | "DUPLICATE" | "EARLY" | "NOT_MERGED" | "UNKNOWN_MR" | "IGNORED";
        DeployCallbackRecord: {
            id: number;
            deliveryKey: string;
            projectId: number;
            mrIid: number;
            status: string;
            disposition: components["schemas"]["DeployDisposition"];
            reason: string;
            duplicates: number;
            /** Format: date-time */
            receivedAt: string;
        };
        AuditRecord: {
            actor: string;
            action: string;
            /** @description The parameters as a JSON object, masked and truncated. */
            params: string;
            outcome: string;
            /** Format: date-time */
            at: string;
        };
        OpsRequestAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                operation: components["schemas"]["Operation"];
                /** @description The request's step bar, as its owner's status read shows it. */
                progress: components["schemas"]["ProgressStep"][];
                /** @description The binding's status while this is its current request; else what became of its access as its owner's status read shows it (`REVOKING`, `REVOKED`, `REVOKE_FAILED` once a revocation took its binding over), or the last one the request's history names (empty when it names none). */
                status: components["schemas"]["BindingStatus"] | "";
                step: components["schemas"]["Step"];
                hint: components["schemas"]["Hint"];
                /** @description null once a later request took the relationship over. */
                binding: components["schemas"]["Binding"] | null;
                steps: components["schemas"]["StepHistory"][];
                batch?: components["schemas"]["Batch"];
                queue?: components["schemas"]["Queue"];
                /** @description The callback inbox, newest first (at most 20); the first is what replay-approval applies. */
                approvalCallbacks: components["schemas"]["ApprovalCallbackRecord"][];
                /** @description The deploy callbacks recorded for the request's MR, newest first (at most 20). */
                deployCallbacks: components["schemas"]["DeployCallbackRecord"][];
                audit: components["schemas"]["AuditRecord"][];
                /** @description On a grant, the revocation that took its binding over (`binding` is then the revocation's); absent while the grant holds its binding. */
                revocation?: {
                    operationId: string;
                    status: components["schemas"]["BindingStatus"];
                    reason: components["schemas"]["RevokeReason"];
                    /** @description The revocation's own reason text (an operator's, or what the scan or a give-back wrote). */
                    text: string;
                };
                /** @description The period of access this grant or renewal opened once in effect (GET /ops/access's item), so the console can link it; absent when it opened none. */
                access?: components["schemas"]["AccessInterval"];
            };
        };
        /** @description One period in which `subject` had access to `targetKey`, [from, until). */
        AccessInterval: {
            subject: string;
            targetKey: string;
            /**
             * Format: date-time
             * @description When the change was in effect (its deploy confirmation)
             */
            from: string;
            /** @description When its removal was in effect, or the renewal replacing it (UTC); null while the access lasts. */
            until: string | null;
            /**
             * @description `changeflow`: from changeflow's own records; `repo`: read from the binding file's history (an entry changeflow did not write).
             * @enum {unknown}
             */
            source: "changeflow" | "repo";
            /** @description The grant or renewal whose confirmation opened the period; for a `repo` period, the entry's own operationId (null when it names none). */
            operationId: string | null;
            /** @description Its approval in the approval system; null when none is known. */
            approvalId: string | null;
            /** @description The merge request that carried it (a batch member's is its batch's); null when unknown. */
            mrIid: number | null;
            /** @description The merge commit on the default branch that put the entry there — for changeflow's periods, the merge commit of the request's MR (a batch member's, its batch MR's), kept by a removal's period; for a `repo` period, the commit that added the entry (`from` is its committed date); null when unknown (requests merged before merge commits were recorded). */
            mergeSha: string | null;
            /** @description The commit that ended the period — for a `repo` period, the commit on the default branch that removed the entry (`until` is its committed date); for changeflow's, the merge commit of the removal (or of the renewal that rewrote the entry); null while open and when unknown. */
            endSha: string | null;
        };
        /** @description One place where changeflow's records and the target's binding file on the default branch disagree, for a person to resolve (docs/api.md, "Access history"). */
        AccessDiscrepancy: {
            subject: string;
            /** @description The target whose binding file disagrees: the asked one by target; by subject, each of the person's. */
            targetKey: string;
            /** @description The entry's operationId (ON_MAIN_NOT_IN_EFFECT) or the open period's request (IN_EFFECT_NOT_ON_MAIN). */
            operationId: string;
            /**
             * @description `ON_MAIN_NOT_IN_EFFECT`: an entry changeflow wrote is on the default branch, but its records say the access ended (put back by hand, a reverted removal). `IN_EFFECT_NOT_ON_MAIN`: its records say the access is in effect, but no entry of changeflow's for the subject is on the default branch (removed or replaced by hand).
             * @enum {unknown}
             */
            kind: "ON_MAIN_NOT_IN_EFFECT" | "IN_EFFECT_NOT_ON_MAIN";
            /** @description What disagrees and what to do */
            message: string;
        };
        AccessAtAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                /**
                 * Format: date-time
                 * @description The instant asked about
                 */
                at: string;
                items: components["schemas"]["AccessInterval"][];
                /** @description The disagreements between changeflow's records and the binding files on the default branch now (not at the instant asked about) — with `target`, that target's file; with `subject`, the person's entries and periods in the file of every target they have a binding on — sorted by target, subject, kind; empty when they agree. Absent when no check is wired. */
                discrepancies?: components["schemas"]["AccessDiscrepancy"][];
                /** @description Why a file could not be compared just now, in words. With `target`, `discrepancies` is then empty; with `subject`, it names the targets not compared, and `discrepancies` holds the other targets'. */
                discrepanciesProblem?: string;
            };
        };
        AccessHistoryAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                /** Format: date-time */
                from: string;
                /** Format: date-time */
                to: string;
                items: components["schemas"]["AccessInterval"][];
                /** @description The window holds more than `limit` periods; ask for a narrower one. */
                more: boolean;
                /** @description The disagreements between changeflow's records and the target's file on the default branch now (not at the instant asked about); empty when they agree. Absent when no check is wired. */
                discrepancies?: components["schemas"]["AccessDiscrepancy"][];
                /** @description Why the file could not be compared just now, in words; `discrepancies` is then empty. */
                discrepanciesProblem?: string;
            };
        };
        UnownedExpiredAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                /**
                 * Format: date-time
                 * @description The database clock the expiries were compared with.
                 */
                checkedAt: string;
                /** @description The branch read (the default branch). */
                ref: string;
                files: {
                    targetKey: string;
                    title: string;
                    project: string;
                    file: string;
                    /** @description Why the file could not be checked, in words (GitLab unreachable, a file that does not parse); `entries` is then empty. */
                    problem?: string;
                    /** @description The expired entries changeflow did not write, oldest expiry first. */
                    entries: {
                        subject: string;
                        operationId: string;
                        /** Format: date-time */
                        expiresAt: string;
                        /**
                         * @description `NO_OPERATION`: no request of changeflow's has this operationId; `OTHER_BINDING`: the operationId is changeflow's but for another subject or target, or a revocation's (copied by hand).
                         * @enum {unknown}
                         */
                        why: "NO_OPERATION" | "OTHER_BINDING";
                    }[];
                    /** @description Expired entries changeflow wrote — the expiry scan removes those. */
                    ownedExpired: number;
                }[];
            };
        };
        RetriggerAnswer: {
            /** @constant */
            code: "ACCEPTED";
            message: string;
            data: {
                operationId: string;
                /** @description The action resumed (due now). */
                action: string;
                from: components["schemas"]["Step"];
            };
        };
        ReplayAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                operationId: string;
                applied: boolean;
            };
        };
        OpsFindAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                items: {
                    operationId: string;
                    subject: string;
                    targetKey: string;
                    /** @description absent when the target is no longer configured */
                    targetTitle?: string;
                    kind: components["schemas"]["OperationKind"];
                    /** @enum {string} */
                    flow: "LEGACY" | "APPROVE_FIRST";
                    status: components["schemas"]["BindingStatus"];
                    /** @description the status in the words the web app shows */
                    statusText: string;
                    step: components["schemas"]["Step"];
                    batchId?: number;
                    /** Format: date-time */
                    createdAt: string;
                    /** Format: date-time */
                    updatedAt: string;
                    /** Format: date-time */
                    expiresAt?: string;
                    /** @description why it waits on a person, in words; absent when it does not */
                    attention?: string;
                }[];
                /** @description The cursor of the next page; empty on the last. */
                nextCursor: string;
            };
        };
        NotificationsAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                /** @description events not yet delivered */
                pending: number;
                /** @description dead letters */
                dead: number;
                /** @description age of the oldest undelivered event; 0 when none */
                oldestPendingSeconds: number;
                deadLetters: {
                    eventId: string;
                    kind: string;
                    operationId?: string;
                    /** @description what the event tells */
                    summary: string;
                    attempts: number;
                    /** @description what the failing channels answered, "<channel>: <error>; …" */
                    lastError: string;
                    /** Format: date-time */
                    createdAt: string;
                }[];
                disabledChannels: {
                    channel: string;
                    /** Format: date-time */
                    disabledAt: string;
                    reason: string;
                }[];
            };
        };
        NotificationReplayAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                eventId: string;
                replayed: boolean;
            };
        };
        NotificationChannelAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                channel: string;
                enabled: boolean;
            };
        };
        SecurityEventListAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                items: {
                    id: number;
                    /** @enum {string} */
                    kind: "foreign_head" | "foreign_branch" | "foreign_mr";
                    /** @description the operationId, batch-<id> or mr-<iid> */
                    resource: string;
                    mrIid?: number;
                    branch?: string;
                    sha?: string;
                    why: string;
                    /** Format: date-time */
                    at: string;
                }[];
            };
        };
        AuditKeyAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                /** @constant */
                algorithm: "Ed25519";
                /** @description the first 16 hex characters of SHA-256 over the 32 key bytes; the manifest names its key with it */
                keyId: string;
                /** @description standard base64 of the 32 raw key bytes */
                publicKey: string;
                /** @description the key as a PEM PUBLIC KEY block (PKIX) */
                pem: string;
            };
        };
        BatchListAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                items: components["schemas"]["Batch"][];
                nextCursor: string;
            };
        };
        BatchAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: components["schemas"]["Batch"];
        };
        SettleAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                batchId: number;
                status: string;
                merged: boolean;
                alreadySettled: boolean;
                readmitted: number;
            };
        };
        RoundsAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                rounds: {
                    projectId: number;
                    /** @enum {unknown} */
                    outcome: "CLAIMED" | "SLOT_OCCUPIED" | "NOTHING_WAITING" | "PREEMPTED" | "BUSY";
                    batchId?: number;
                    members?: number;
                    mrIid?: number;
                    resumed?: boolean;
                    splitDepth?: number;
                    /** @description Building the batch met a cause no retry fixes; the batch is now BLOCKED. */
                    blocked?: boolean;
                }[];
            };
        };
        ReconcileAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                scanned: number;
                validated: number;
                waiting: number;
            };
        };
        ExpiryScanAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                /** @description Expired grants still in effect that the scan read. */
                scanned: number;
                /** @description Revocations this call created (a grant another scan or a give-back took first is read but not counted). */
                revoked: number;
                /** @description Chunks (one transaction each) the scan used. */
                chunks: number;
                /** @description Renewals with a merge request of their own (either flow, running or stopped on a failure) that this scan withdrew because their grant expired first (the grant is revoked by a later scan once their merge requests are closed; one whose merge request merged first is in effect instead). */
                lapsed?: number;
            };
        };
        ConfigAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                version: number;
                /** Format: date-time */
                loadedAt: string;
                /** @description How many items fell back. */
                fellBack: number;
                unknownKeys: string[];
                items: {
                    key: string;
                    /** @description Secrets masked. */
                    value: string;
                    /** @enum {unknown} */
                    source: "default" | "file" | "env" | "etcd" | "overlay";
                    fellBack: boolean;
                    reason?: string;
                }[];
            };
        };
        ChecksAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                status: components["schemas"]["CheckStatus"];
                /** Format: date-time */
                checkedAt: string;
                findings: {
                    /**
                     * @description The check, stable across versions.
                     * @enum {unknown}
                     */
                    id: "secrets" | "trusted-proxies" | "gitlab" | "bot-accounts" | "protected-branch" | "bot-role" | "webhook";
                    /** @description The GitLab project the finding is about. */
                    project?: string;
                    /** @description A configuration key or a bot name. */
                    subject?: string;
                    status: components["schemas"]["CheckStatus"];
                    /** @description What was checked, in words. */
                    title: string;
                    /** @description What was found. */
                    detail: string;
                    /** @description What to change; absent when ok. */
                    fix?: string;
                }[];
            };
        };
        /**
         * @description ok — as it should be; warn — weaker than it should be, or not checkable (says why); fail — a defence is missing or changeflow cannot work.
         * @enum {unknown}
         */
        CheckStatus: "ok" | "warn" | "fail";
        DeployCallbackListAnswer: {
            /** @constant */
            code: "OK";
            message: string;
            data: {
                items: components["schemas"]["DeployCallbackRecord"][];
                nextCursor: string;
            };
        };
    };
    responses: {
        /** @description Bad input; `data.fields` names every bad field and what is wrong with it. */
        BadRequest: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["InvalidArgumentAnswer"];
            };
        };
        /** @description No login, or the login failed. */
        Unauthenticated: {
            headers: {
                "WWW-Authenticate": components["headers"]["WWWAuthenticate"];
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["UnauthenticatedAnswer"];
            };
        };
        /** @description The callback token is missing or wrong, or none is configured. */
        CallbackUnauthenticated: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["UnauthenticatedAnswer"];
            };
        };
        /** @description `ACCESS_DENIED`: none of the route's rule codes is granted (or they could not be checked); the message is always `Access denied`. `UNKNOWN_ACCOUNT`: the login names no account of the identity directory, refused before any rule is checked. */
        AccessDenied: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["AccessDeniedAnswer"] | components["schemas"]["UnknownAccountAnswer"];
            };
        };
        /** @description The login worked but names no account of the identity directory (with no directory configured, it is not an account name), so changeflow does not act for it; the message says who to ask. */
        UnknownAccount: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["UnknownAccountAnswer"];
            };
        };
        /** @description No such resource (or not one the caller may see). */
        NotFound: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["NotFoundAnswer"];
            };
        };
        /** @description `NOT_IN_EFFECT`: the request's access is not in effect, so there is nothing to give back or revoke. `REQUEST_IN_PROGRESS`: a renewal of the access is past the point where it can be withdrawn (its own MR under way, claimed into a batch, merging, stopped). The message says what to do instead; nothing was written. */
        RevokeConflict: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["RevokeConflictAnswer"];
            };
        };
        /** @description `REVIEW_NOT_ALLOWED`: the caller may not decide this item — their own access (`own_access`), or neither an owner of the target nor an operator (`not_reviewer`); the message says who decides it. `UNKNOWN_ACCOUNT`: the login names no account of the identity directory. */
        ReviewNotAllowed: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["ReviewNotAllowedAnswer"] | components["schemas"]["UnknownAccountAnswer"];
            };
        };
        /** @description `REVIEW_CONFLICT`: the item was decided already (`already_decided`), its campaign is closed (`review_closed`), or the target has an open campaign (`review_open`). */
        ReviewConflict: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["ReviewConflictAnswer"];
            };
        };
        /** @description The request or batch is not in a state this action applies to; the message says why. */
        InProgress: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["InProgressAnswer"];
            };
        };
        /** @description The `Host` is not one this server answers for (while loopback is trusted). */
        Misdirected: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["MisdirectedAnswer"];
            };
        };
        /** @description Over the route's quota. */
        RateLimited: {
            headers: {
                "Retry-After": components["headers"]["RetryAfter"];
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["RateLimitedAnswer"];
            };
        };
        /** @description The database or an upstream asked to come back later; nothing was done. */
        RetryLater: {
            headers: {
                "Retry-After": components["headers"]["RetryAfter"];
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["RetryLaterAnswer"];
            };
        };
        /** @description A server-side failure; the cause is in the log only. */
        Internal: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["InternalAnswer"];
            };
        };
        /** @description The path exists, but not with this method (`Allow` names those it has). Not listed per operation. */
        MethodNotAllowed: {
            headers: {
                /** @description The methods the path has. */
                Allow: string;
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["MethodNotAllowedAnswer"];
            };
        };
        /**
         * @description `OK`: recorded and acted on; `DUPLICATE`: this delivery was recorded
         *     before, nothing is done again; `IGNORED_STALE`: recorded, but the
         *     request has moved on or a guard refused it (the inbox says which).
         */
        CallbackDone: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["CallbackDoneAnswer"];
            };
        };
        /** @description Recorded in the inbox; the workflow acts on it from there. */
        CallbackRecorded: {
            headers: {
                [name: string]: unknown;
            };
            content: {
                "application/json": components["schemas"]["CallbackRecordedAnswer"];
            };
        };
    };
    parameters: {
        /** @description The request's id (its idempotency key, or the one the server chose). */
        OperationId: string;
        /** @description The batch's id, a positive integer. */
        BatchId: number;
        /** @description The opaque `nextCursor` of the previous page; absent or empty for the first. */
        Cursor: string;
        /** @description Alias of the body's `operationId`. */
        IdempotencyKey: string;
    };
    requestBodies: never;
    headers: {
        /** @description Whole seconds to wait before retrying. */
        RetryAfter: string;
        /** @description `Bearer realm="changeflow"`. */
        WWWAuthenticate: "Bearer realm=\"changeflow\"";
        /** @description The document's version; send it back in `If-None-Match`. */
        ETag: string;
    };
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    getHealthz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Up. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HealthAnswer"];
                };
            };
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
        };
    };
    getReadyz: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Ready. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReadyAnswer"];
                };
            };
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
            /** @description Not ready; `data` names the failing check, never the driver's error text. */
            503: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotReadyAnswer"];
                };
            };
        };
    };
    getMetrics: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The metrics. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/plain": string;
                };
            };
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
        };
    };
    getOpenAPI: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The OpenAPI 3.1 document. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OpenAPIDocument"];
                };
            };
            /** @description The client's copy is current (`If-None-Match` matched the `ETag`). */
            304: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
        };
    };
    getRunbook: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description docs/runbook.md. */
            200: {
                headers: {
                    ETag: components["headers"]["ETag"];
                    [name: string]: unknown;
                };
                content: {
                    "text/markdown": string;
                };
            };
            /** @description The client's copy is current (`If-None-Match` matched the `ETag`). */
            304: {
                headers: {
                    [name: string]: unknown;
                };
                content?: never;
            };
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
        };
    };
    getMe: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The caller. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["MeAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
        };
    };
    getAppConfig: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The app's configuration. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AppConfigAnswer"];
                };
            };
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
        };
    };
    listRequests: {
        parameters: {
            query?: {
                /** @description Page size. */
                limit?: number;
                /** @description The opaque `nextCursor` of the previous page; absent or empty for the first. */
                cursor?: components["parameters"]["Cursor"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RequestListAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    submitRequest: {
        parameters: {
            query?: never;
            header?: {
                /** @description Alias of the body's `operationId`. */
                "Idempotency-Key"?: components["parameters"]["IdempotencyKey"];
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SubmitBody"];
            };
        };
        responses: {
            /**
             * @description Accepted (`ACCEPTED`), or a repeat of the same key and request
             *     (`DUPLICATE_SUBMIT`, with `Idempotent-Replayed: true`, the first
             *     request's `operationId`).
             */
            202: {
                headers: {
                    /** @description `true` on a replay of an earlier answer. */
                    "Idempotent-Replayed"?: "true";
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SubmitAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            /** @description `TARGET_NOT_OPEN`: the target is closed right now (access mode or window); the message says why. `UNKNOWN_ACCOUNT`: the login names no account of the identity directory. */
            403: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TargetNotOpenAnswer"] | components["schemas"]["UnknownAccountAnswer"];
                };
            };
            /**
             * @description `REQUEST_IN_PROGRESS`: the binding is in flight or awaiting
             *     recovery; `ALREADY_IN_EFFECT`: the access is in effect, the message
             *     says until when — both with `data` naming the caller's request
             *     concerned (`operationId`, and `expiresAt` and `renewFrom` when in
             *     effect);
             *     `IDEMPOTENCY_IN_FLIGHT`: the same key is still being processed
             *     (`data` null).
             */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SubmitConflictAnswer"];
                };
            };
            421: components["responses"]["Misdirected"];
            /** @description The key was used before for a different request. */
            422: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["IdempotencyReusedAnswer"];
                };
            };
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    getRequest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The request's id (its idempotency key, or the one the server chose). */
                operationId: components["parameters"]["OperationId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The request. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RequestAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            404: components["responses"]["NotFound"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    withdrawRequest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The request's id (its idempotency key, or the one the server chose). */
                operationId: components["parameters"]["OperationId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Withdrawn (or ended before); the request as it is now. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WithdrawAnswer"];
                };
            };
            /** @description Withdrawn, its MR still being closed (retried); the request as it is now. */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WithdrawAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            404: components["responses"]["NotFound"];
            /**
             * @description `REQUEST_IN_PROGRESS`: claimed by a batch round, merging,
             *     a removal of access at any step, or withdrawn with the close of its MR
             *     stopped on a failure; `ALREADY_IN_EFFECT`: merged or in effect
             *     (also when the merge won the race with this withdrawal) — the
             *     message says how to give the access back.
             */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WithdrawConflictAnswer"];
                };
            };
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    getRequestEvents: {
        parameters: {
            query?: {
                /** @description Last-Event-ID for clients that cannot set the header. */
                lastEventId?: string;
            };
            header?: {
                /** @description The id of the last event received; the steps after it are sent first. */
                "Last-Event-ID"?: string;
            };
            path: {
                /** @description The request's id (its idempotency key, or the one the server chose). */
                operationId: components["parameters"]["OperationId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The stream; it ends when the client goes or the instance shuts down. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            404: components["responses"]["NotFound"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    revokeRequest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The request's id (its idempotency key, or the one the server chose). */
                operationId: components["parameters"]["OperationId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The revocation already existed. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RevokeExistingAnswer"];
                };
            };
            /** @description The revocation was created. */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RevokeCreatedAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["RevokeConflict"];
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    listTargets: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The targets. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TargetListAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
        };
    };
    previewTarget: {
        parameters: {
            query?: {
                /** @description How many days the request would ask for (1..the target's maxDays; default maxDays). */
                days?: number;
                /** @description `file` shows the whole file to callers holding the rules of `ops-request-get`; anyone else gets their own view. */
                scope?: "own" | "file";
            };
            header?: never;
            path: {
                /** @description The target's key. */
                key: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The preview, or `{}` when it could not be made. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PreviewAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            404: components["responses"]["NotFound"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
        };
    };
    getStats: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The counters, as a bare object. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Stats"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    listMyReviewItems: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The caller's open items, oldest campaign first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReviewItemsAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    decideReviewItem: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The campaign's id. */
                reviewId: number;
                /** @description The item's id within it. */
                itemId: number;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReviewDecideBody"];
            };
        };
        responses: {
            /** @description Decided; the item as it is now. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReviewItemAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["ReviewNotAllowed"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["ReviewConflict"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    getMyNotificationPreferences: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The caller's preferences, in the page's order. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PreferencesAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            421: components["responses"]["Misdirected"];
            500: components["responses"]["Internal"];
        };
    };
    setMyNotificationPreferences: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["PreferencesBody"];
            };
        };
        responses: {
            /** @description Saved; the caller's preferences as they are now. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PreferencesAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["UnknownAccount"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
        };
    };
    approvalCallback: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ApprovalCallbackBody"];
            };
        };
        responses: {
            200: components["responses"]["CallbackDone"];
            202: components["responses"]["CallbackRecorded"];
            400: components["responses"]["BadRequest"];
            401: components["responses"]["CallbackUnauthenticated"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    deployCallback: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["DeployCallbackBody"];
            };
        };
        responses: {
            200: components["responses"]["CallbackDone"];
            202: components["responses"]["CallbackRecorded"];
            400: components["responses"]["BadRequest"];
            401: components["responses"]["CallbackUnauthenticated"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    gitlabWebhook: {
        parameters: {
            query?: never;
            header?: {
                /** @description The delivery's id, stable across GitLab's retries (preferred). */
                "Idempotency-Key"?: string;
                /** @description The delivery's id when `Idempotency-Key` is absent. */
                "X-Gitlab-Event-UUID"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["GitLabWebhookBody"];
            };
        };
        responses: {
            200: components["responses"]["CallbackDone"];
            202: components["responses"]["CallbackRecorded"];
            400: components["responses"]["BadRequest"];
            401: components["responses"]["CallbackUnauthenticated"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsGetRequest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The request's id (its idempotency key, or the one the server chose). */
                operationId: components["parameters"]["OperationId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The request's detail. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OpsRequestAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsRetrigger: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The request's id (its idempotency key, or the one the server chose). */
                operationId: components["parameters"]["OperationId"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["RetriggerBody"];
            };
        };
        responses: {
            /** @description The action resumed, due now. */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RetriggerAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["InProgress"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsReplayApproval: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The request's id (its idempotency key, or the one the server chose). */
                operationId: components["parameters"]["OperationId"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["OptionalObjectBody"];
            };
        };
        responses: {
            /** @description Done; `applied` says whether the decision moved the request on. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReplayAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsRevoke: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The request's id (its idempotency key, or the one the server chose). */
                operationId: components["parameters"]["OperationId"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RevokeBody"];
            };
        };
        responses: {
            /** @description The revocation already existed. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RevokeExistingAnswer"];
                };
            };
            /** @description The revocation was created. */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RevokeCreatedAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["RevokeConflict"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsCloseRequest: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The request's id (its idempotency key, or the one the server chose). */
                operationId: components["parameters"]["OperationId"];
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CloseBody"];
            };
        };
        responses: {
            /** @description Closed (or ended before); the request as it is now. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WithdrawAnswer"];
                };
            };
            /** @description Closed, its MR still being closed (retried); the request as it is now. */
            202: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WithdrawAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            /**
             * @description `REQUEST_IN_PROGRESS`: not stopped (waiting for its next step,
             *     running), in a claimed batch, a removal, or closed with the close
             *     of its MR stopped on a failure; `ALREADY_IN_EFFECT`: merged or in
             *     effect — the message says how to revoke it.
             */
            409: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WithdrawConflictAnswer"];
                };
            };
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsListBatches: {
        parameters: {
            query?: {
                /** @description Page size. */
                limit?: number;
                /** @description The opaque `nextCursor` of the previous page; absent or empty for the first. */
                cursor?: components["parameters"]["Cursor"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BatchListAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsFindRequests: {
        parameters: {
            query?: {
                /** @description The person (account) who asked. */
                subject?: string;
                /** @description The target key. */
                target?: string;
                /** @description The status the request holds now. */
                status?: components["schemas"]["BindingStatus"];
                /** @description Only what waits on a person. */
                attention?: boolean;
                /** @description Page size. */
                limit?: number;
                /** @description The opaque `nextCursor` of the previous page; absent or empty for the first. */
                cursor?: components["parameters"]["Cursor"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["OpsFindAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsListSecurityEvents: {
        parameters: {
            query?: {
                /** @description How many, newest first. */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The events. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SecurityEventListAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsNotifications: {
        parameters: {
            query?: {
                /** @description How many dead letters, newest first. */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The outbox. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotificationsAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsReplayNotification: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The event's id (its CloudEvents id), as GET /ops/notifications lists it. */
                eventId: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["OptionalObjectBody"];
            };
        };
        responses: {
            /** @description The event is due again. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotificationReplayAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsEnableNotificationChannel: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The channel's name, e.g. webhook:audit. */
                channel: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["OptionalObjectBody"];
            };
        };
        responses: {
            /** @description The channel is on. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["NotificationChannelAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsAuditExport: {
        parameters: {
            query: {
                /** @description Start of the range (inclusive), RFC 3339 with a zone. */
                from: string;
                /** @description End of the range (exclusive), RFC 3339 with a zone; after from. */
                to: string;
                /** @description jsonl (one JSON object per line) or csv (a header row, then one row per record). */
                format?: "jsonl" | "csv";
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The export, streamed; its last line (row) is the manifest. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/x-ndjson": string;
                    "text/csv": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsAuditKey: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The key. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AuditKeyAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsGetBatch: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The batch's id, a positive integer. */
                id: components["parameters"]["BatchId"];
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The batch. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BatchAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsSettleBatch: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description The batch's id, a positive integer. */
                id: components["parameters"]["BatchId"];
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["OptionalObjectBody"];
            };
        };
        responses: {
            /** @description Settled, or already settled by another path (`alreadySettled`). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SettleAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            409: components["responses"]["InProgress"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsRunRounds: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["RoundsBody"];
            };
        };
        responses: {
            /** @description One result per project. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RoundsAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsReconcile: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["OptionalObjectBody"];
            };
        };
        responses: {
            /** @description What the run found. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReconcileAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsExpiryScan: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["OptionalObjectBody"];
            };
        };
        responses: {
            /** @description What the scan read and created. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ExpiryScanAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsGetConfig: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Every item. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ConfigAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
        };
    };
    opsGetChecks: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Every finding. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ChecksAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
        };
    };
    opsListReviews: {
        parameters: {
            query?: {
                /** @description Only this target's campaigns. */
                target?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The campaigns. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReviewListAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsOpenReview: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["ReviewOpenBody"];
            };
        };
        responses: {
            /** @description The campaign, opened. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReviewCampaignAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            409: components["responses"]["ReviewConflict"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsGetReview: {
        parameters: {
            query?: {
                /** @description `json` (the default) or `csv`. */
                format?: "json" | "csv";
            };
            header?: never;
            path: {
                /** @description The campaign's id. */
                id: number;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The report. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ReviewReportAnswer"];
                    "text/csv": string;
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            404: components["responses"]["NotFound"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsListDeployCallbacks: {
        parameters: {
            query?: {
                /** @description Only callbacks with this disposition (case-insensitive). */
                disposition?: components["schemas"]["DeployDisposition"];
                /** @description Page size. */
                limit?: number;
                /** @description The opaque `nextCursor` of the previous page; absent or empty for the first. */
                cursor?: components["parameters"]["Cursor"];
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["DeployCallbackListAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsListUnownedExpired: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Every target's file. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["UnownedExpiredAnswer"];
                };
            };
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsAccessAt: {
        parameters: {
            query: {
                /** @description The target key (who had access to it). */
                target?: string;
                /** @description The person (account) — what they had access to. */
                subject?: string;
                /** @description The instant, RFC 3339 (`2026-03-01T09:30:00Z`, or with an offset). */
                at: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The periods that contain the instant, by subject (by target for `subject`). */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessAtAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
    opsAccessHistory: {
        parameters: {
            query: {
                /** @description The target key. */
                target: string;
                /** @description The window's start (inclusive), RFC 3339. */
                from: string;
                /** @description The window's end (exclusive), RFC 3339, after `from`. */
                to: string;
                /** @description The most periods to answer. */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The periods, oldest first. */
            200: {
                headers: {
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["AccessHistoryAnswer"];
                };
            };
            400: components["responses"]["BadRequest"];
            401: components["responses"]["Unauthenticated"];
            403: components["responses"]["AccessDenied"];
            421: components["responses"]["Misdirected"];
            429: components["responses"]["RateLimited"];
            500: components["responses"]["Internal"];
            503: components["responses"]["RetryLater"];
        };
    };
}
