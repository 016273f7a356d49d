package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// headerReplayed marks a replayed response.
const headerReplayed = "Idempotent-Replayed"

// submitMessage is the 429 text of the apply bucket.
const submitMessage = "Too many submissions, please try again later"

// acceptedData is the body of a 202: what the client polls.
type acceptedData struct {
	OperationID string `json:"operationId"`
}

// handleSubmit is POST /api/requests (docs/api.md, "User endpoints").
//
// The chain has already run rate limiting (bucket apply) and the login
// check; the body is read only now, so a malformed body from a caller
// who is over quota or not logged in gets 429 or 401, never 400 (docs/api.md "Rate limiting").
//
// Rate limiting runs before the idempotency check, so a duplicate
// submission over quota gets 429 rather than DUPLICATE_SUBMIT. Accepted:
// the client retries after Retry-After and then gets the
// replay; checking idempotency first would read, hash and look up the
// body of every refused request — the work rate limiting exists to avoid.
//
// Steps: decode → validate against the configuration in force → (with a
// key) IdempotencyBegin on the caller's key: a completed duplicate is
// replayed with the original status and data, code DUPLICATE_SUBMIT and
// the Idempotent-Replayed header; the same key with another body is 422;
// a duplicate of a request still being processed is 409
// IDEMPOTENCY_IN_FLIGHT until the first request's lease ends, after which
// the retry takes the key over → access switch (TARGET_NOT_OPEN) →
// OperationSubmit (operation with its first action scheduled, binding,
// first step history row, in one transaction) → store the 202 for
// replays → 202 ACCEPTED {operationId}.
//
// Only the 202 is stored for replay. Every refusal after the key was
// taken (target closed, binding refused, storage failure) releases the
// key, so the client's retry with the same key is decided afresh instead
// of replaying a refusal that may no longer hold.
//
// A submission without a key gets a random server-side operationId (no
// timestamp, so nothing about it is guessable) and no idempotency record:
// there is nothing a retry could match it by.
func (s *Server) handleSubmit() http.Handler {
	b := s.deps.Business
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		subject := res.Identity.Account
		raw, err := readBody(w, r)
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		body, problems, err := decodeSubmit(raw, r.Header.Get(headerIdempotencyKey))
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		if b.Config == nil || b.Requests == nil {
			writeError(w, r, s.deps.Logger, domain.Internal("submit: no configuration or request store wired", nil))
			return
		}
		snap := b.Config.Current()
		sub, err := validateSubmit(body, problems, snap)
		if err != nil {
			writeError(w, r, s.deps.Logger, err)
			return
		}
		key := sub.OperationID
		if key == "" {
			sub.OperationID = s.newOperationID()
		} else {
			opID, replayed, err := s.beginIdempotent(r.Context(), w, key, subject, sub, snap)
			if err != nil {
				writeError(w, r, s.deps.Logger, err)
				return
			}
			if replayed {
				return
			}
			sub.OperationID = opID
		}
		data, err := s.submit(r.Context(), subject, sub, snap)
		var dup *ownDuplicate
		switch {
		case errors.As(err, &dup):
			// The operation is already stored for this very request: the
			// key's first request was slow, not dead, and stored it after
			// this one took the key over. One request; this is its replay.
			data = acceptedData{OperationID: sub.OperationID}
			if key != "" {
				s.completeKey(r.Context(), subject, key, sub.OperationID, data)
			}
			s.replay(w, http.StatusAccepted, data)
			return
		case err != nil:
			if key != "" {
				s.releaseKey(subject, key, sub.OperationID)
			}
			writeError(w, r, s.deps.Logger, err)
			return
		}
		if key != "" {
			s.completeKey(r.Context(), subject, key, sub.OperationID, data)
		}
		s.startWork(r.Context(), sub.OperationID)
		respond(w, s.deps.Logger, domain.CodeAccepted, data)
	})
}

// operationIDFor is the operationId a submission under the caller's key
// creates: the key itself, unless the key is already the operationId of
// another caller's request — then a fresh random one, because operationIds
// are unique across callers while keys are scoped per caller (docs/api.md,
// "Idempotency"). The caller's own earlier request under that id keeps the
// key: the idempotency record, or the operation's unique key, answers it.
//
// The trade-off: a client that sent key k and is answered with another
// operationId can infer that k names someone's request — it cannot read
// that request (GET answers 404 exactly as for an unknown id), and the
// status, code and message are those of an unused key. Making every
// keyed operationId server-generated would close even that, at the price
// of clients no longer being able to poll by the id they chose.
func (s *Server) operationIDFor(ctx context.Context, key, subject string) (string, error) {
	op, err := s.deps.Business.Requests.OperationGet(ctx, key)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return key, nil
	case err != nil:
		return "", domain.Internal("submit: look up operationId", err)
	case op.Subject == subject:
		return key, nil
	}
	return s.newOperationID(), nil
}

// beginIdempotent takes the caller's key for this request, or answers for
// it: a replay (replayed true, response written) or an error to write.
// When it returns (opID, false, nil) the request owns the key and must
// create its operation as opID, then complete or release the key.
func (s *Server) beginIdempotent(ctx context.Context, w http.ResponseWriter, key, subject string, sub submission, snap *config.Snapshot) (opID string, replayed bool, err error) {
	candidate, err := s.operationIDFor(ctx, key, subject)
	if err != nil {
		return "", false, err
	}
	idem := snap.Idempotency()
	got, err := s.deps.Business.Requests.IdempotencyBegin(ctx, store.IdempotencyBeginParams{
		Key: key, Subject: subject, RequestHash: requestHash(subject, sub),
		OperationID: candidate, TTL: idem.TTL, Lease: idem.InFlightLease,
	})
	if err != nil {
		return "", false, domain.Internal("idempotency begin", err)
	}
	switch got.Outcome {
	case store.IdempotencyFresh:
		if got.TakenOver {
			s.deps.Logger.Warn("idempotency: took over a key whose request died inside its lease",
				"key", key, "operationId", got.OperationID)
		}
		return got.OperationID, false, nil
	case store.IdempotencyDuplicate:
		if got.Recovered {
			// The first request stored its operation and died before its
			// response: answer and store the 202 it would have stored.
			data := acceptedData{OperationID: got.OperationID}
			s.completeKey(ctx, subject, key, got.OperationID, data)
			s.replay(w, http.StatusAccepted, data)
			return "", true, nil
		}
		status := got.ResponseStatus
		if status == 0 {
			status = http.StatusAccepted
		}
		data := json.RawMessage(got.ResponseBody)
		if !json.Valid(data) {
			data = json.RawMessage(`{"operationId":` + mustJSON(got.OperationID) + `}`)
		}
		s.replay(w, status, data)
		return "", true, nil
	case store.IdempotencyInFlight:
		return "", false, domain.Errorf(domain.CodeIdempotencyInFlight,
			"A request with this operationId is still being processed; poll its status or retry shortly.",
			"key %q in flight for operation %s", key, got.OperationID)
	case store.IdempotencyKeyReused:
		return "", false, domain.Errorf(domain.CodeIdempotencyReused,
			"This operationId was already used for a different request.", "key %q reused with another body", key)
	case store.IdempotencyRetryLater:
		return "", false, domain.Errorf(domain.CodeRetryLater,
			"A concurrent request with this operationId just finished; please retry.", "key %q: winner gone on re-read", key)
	}
	return "", false, domain.Internal(fmt.Sprintf("idempotency begin: unknown outcome %v", got.Outcome), nil)
}

// replay writes a duplicate's answer: the original status and data, code
// DUPLICATE_SUBMIT, header Idempotent-Replayed.
func (s *Server) replay(w http.ResponseWriter, status int, data any) {
	w.Header().Set(headerReplayed, "true")
	writeJSON(w, s.deps.Logger, status, Envelope{Code: domain.CodeDuplicateSubmit,
		Message: "This request was already submitted.", Data: data})
}

// ownDuplicate is submit's answer when the operationId already holds this
// caller's request with this body: the request exists, answer as a
// replay.
type ownDuplicate struct{ err error }

func (d *ownDuplicate) Error() string {
	return "operation already stored for this request: " + d.err.Error()
}
func (d *ownDuplicate) Unwrap() error { return d.err }

// submit checks the access switch and stores the request; the answer is
// the 202's data.
func (s *Server) submit(ctx context.Context, subject string, sub submission, snap *config.Snapshot) (acceptedData, error) {
	now := s.now()
	if open, why := sub.target.Open(now); !open {
		return acceptedData{}, domain.Refusef(domain.CodeTargetNotOpen, notOpenReason(sub.target.AccessMode),
			"This target is not open for requests right now ("+why+").", "target %s: %s", sub.target.Key, why)
	}
	// The first state and the first action come from the workflow's entry
	// row for the switch in force; the action is scheduled in the same
	// transaction (due at once), so the request is durable work from the
	// moment it exists and the engine's pool picks it up: the
	// 202 never waits for the approval system or GitLab.
	entry := flow.Entry(snap.Workflow().ApproveFirst)
	// A re-application while the access is in effect renews it once its
	// renewal window is open (the store decides by the database clock).
	e := snap.Expiry()
	renew := domain.RenewWindow{Percent: e.RenewWindowPercent, Min: e.RenewWindowMin}
	_, err := s.deps.Business.Requests.OperationSubmit(ctx, store.OperationSubmitParams{
		Operation: store.OperationCreateParams{
			OperationID: sub.OperationID,
			Subject:     subject,
			TargetKey:   sub.target.Key,
			ProjectID:   projectID(snap),
			Flow:        entry.Flow,
			Step:        int(entry.Step),
			Reason:      sub.Reason,
			Days:        sub.days,
			ExpiresAt:   now.Add(time.Duration(sub.days) * 24 * time.Hour).UTC(),
			RequestHash: requestHash(subject, sub),
			Actor:       subject,
			NextAction:  entry.Action,
		},
		BindingStatus: entry.Binding,
		Renew:         &renew,
		SubmittedAt:   now,
		MaxDays:       sub.target.MaxDays,
	})
	var refused *store.BindingRefusedError
	switch {
	case err == nil:
		return acceptedData{OperationID: sub.OperationID}, nil
	case errors.As(err, &refused):
		var renewFrom *time.Time
		if refused.Code() == domain.CodeAlreadyInEffect {
			// One more read, only on this refusal: the window is a share
			// of the grant's duration, which its operation holds.
			if grant, gerr := s.deps.Business.Requests.OperationGet(ctx, refused.Current.OperationID); gerr == nil {
				renewFrom = s.renewFrom(grant, refused.Current.ExpiresAt)
			} else {
				s.deps.Logger.Warn("submit: the grant in effect could not be read; answering without renewFrom",
					"operationId", refused.Current.OperationID, "err", gerr)
			}
		}
		if refused.Current.ExpiredAwaitingRemoval() {
			s.revokeExpired(ctx, refused.Current, subject)
		}
		return acceptedData{}, refusal(refused, renewFrom, now, err)
	case errors.Is(err, domain.ErrDuplicate):
		return acceptedData{}, s.duplicateOperation(ctx, subject, sub, err)
	}
	return acceptedData{}, domain.Internal("submit operation", err)
}

// duplicateOperation answers a submission whose operationId is already
// stored (dupErr):
//   - this caller's request with this body: the same request, stored by
//     an earlier attempt under the key (a slow first attempt racing the
//     retry that took its lapsed key over, or a record that expired) —
//     *ownDuplicate, answered as a replay;
//   - this caller's other request: the key was used before (422);
//   - another caller's request: a concurrent submission took the id
//     between operationIDFor and the insert; the key is released and the
//     client's retry gets an id of its own (503 RETRY_LATER). Answering
//     422 here would tell the caller that someone else used the key.
func (s *Server) duplicateOperation(ctx context.Context, subject string, sub submission, dupErr error) error {
	op, err := s.deps.Business.Requests.OperationGet(ctx, sub.OperationID)
	switch {
	case err != nil:
		return domain.Internal("submit: re-read the stored operation", errors.Join(dupErr, err))
	case op.Subject == subject && op.RequestHash == requestHash(subject, sub):
		return &ownDuplicate{err: dupErr}
	case op.Subject == subject:
		return domain.Errorf(domain.CodeIdempotencyReused,
			"This operationId was already used for a different request.", "operation %s exists: %w", sub.OperationID, dupErr)
	}
	return domain.Errorf(domain.CodeRetryLater,
		"A concurrent request took this operationId; please retry.", "operation %s belongs to another caller: %w", sub.OperationID, dupErr)
}

// startWork offers the new request's first action to the worker pool.
// Whatever happens the answer stays 202: the action is durable in the
// operation row, a refusal is persisted as a failure by the engine, and
// any other error leaves the action to the engine's poller (logged).
func (s *Server) startWork(ctx context.Context, operationID string) {
	wk := s.deps.Business.Work
	if wk == nil {
		return
	}
	if _, err := wk.Submit(context.WithoutCancel(ctx), operationID); err != nil {
		s.deps.Logger.Warn("workflow did not take the new request at once; state persisted, the poller or an operator follows up",
			"operationId", operationID, "err", err)
	}
}

// revokeExpired starts the removal of an expired grant that a
// re-application found before the expiry scan did, so the person can ask
// again as soon as it is removed rather than after the next scan. It
// creates the same revocation the scan would (exactly once whoever races
// it); a failure is only logged: the scan creates it anyway.
func (s *Server) revokeExpired(ctx context.Context, b store.Binding, actor string) {
	rv := s.deps.Business.Revoker
	if rv == nil {
		return
	}
	if _, err := rv.Revoke(context.WithoutCancel(ctx), b.OperationID, domain.RevokeExpired,
		"expired; found by a re-application before the expiry scan", actor); err != nil {
		s.deps.Logger.Warn("submit: the expired grant's revocation was not created now; the expiry scan creates it",
			"operationId", b.OperationID, "err", err)
	}
}

// notOpenReason is the reason of a submission to a target that is not
// open, by its access mode: a test-window target is outside its window
// (a window that does not parse counts as outside, Target.Open), any
// other is closed.
func notOpenReason(mode domain.AccessMode) domain.Reason {
	if mode == domain.AccessTestWindow {
		return domain.ReasonOutsideWindow
	}
	return domain.ReasonTargetClosed
}

// refusedData is a 409's data: the caller's own request that holds the
// binding (a binding is one per caller and target, so it is never someone
// else's), so the web app links to it; expiresAt when the access is in
// effect.
type refusedData struct {
	OperationID string     `json:"operationId"`
	ExpiresAt   *time.Time `json:"expiresAt,omitempty"`
	// RenewFrom is when re-applying renews the access in effect
	// (ALREADY_IN_EFFECT only; absent without an expiry).
	RenewFrom *time.Time `json:"renewFrom,omitempty"`
	// Reason is in_effect for ALREADY_IN_EFFECT; for
	// REQUEST_IN_PROGRESS, in_progress or expired_being_removed.
	Reason domain.Reason `json:"reason"`
}

// refusal turns a binding's refusal into the API's 409; renewFrom is the
// access's renewal time for ALREADY_IN_EFFECT (nil: unknown or none), now
// the request's time for the message.
func refusal(refused *store.BindingRefusedError, renewFrom *time.Time, now time.Time, err error) error {
	b := refused.Current
	data := refusedData{OperationID: b.OperationID}
	if !b.ExpiresAt.IsZero() {
		at := b.ExpiresAt.UTC()
		data.ExpiresAt = &at
	}
	data.Reason = refused.Reason()
	if refused.Code() == domain.CodeAlreadyInEffect {
		msg := "You already have this access."
		if !b.ExpiresAt.IsZero() {
			msg = "You already have this access until " + b.ExpiresAt.UTC().Format(time.RFC3339) + "."
		}
		if renewFrom != nil {
			data.RenewFrom = renewFrom
			if renewFrom.After(now) {
				msg += " You can renew it from " + renewFrom.UTC().Format(time.RFC3339) + "."
			}
		}
		de := domain.Errorf(domain.CodeAlreadyInEffect, msg, "%w", err)
		de.Data = data
		return de
	}
	msg := "A request for this target is already in progress (or awaiting recovery by the maintainers)."
	if data.Reason == domain.ReasonExpiredBeingRemoved {
		msg = "Your access expired at " + b.ExpiresAt.UTC().Format(time.RFC3339) +
			" and is being removed; you can ask again once it is removed."
	}
	de := domain.Errorf(domain.CodeRequestInProgress, msg, "%w", err)
	data.ExpiresAt = nil
	de.Data = data
	return de
}

// completeKey stores the 202 for replays. A failure is logged, not
// answered: the request was accepted, and the record stays IN_FLIGHT until
// its lease ends, so a retry meanwhile gets 409 IDEMPOTENCY_IN_FLIGHT and
// then the replay (the takeover finds the stored operation): nothing lost.
func (s *Server) completeKey(ctx context.Context, subject, key, operationID string, data acceptedData) {
	body, _ := json.Marshal(data)
	err := s.deps.Business.Requests.IdempotencyComplete(context.WithoutCancel(ctx), store.IdempotencyCompleteParams{
		Subject: subject, Key: key, OperationID: operationID, Status: http.StatusAccepted, Body: body,
	})
	if err != nil {
		s.deps.Logger.Error("idempotency: response not stored; duplicates get IN_FLIGHT until the key's lease ends",
			"key", key, "operationId", operationID, "err", err)
	}
}

// releaseKey frees the caller's key after a refusal so a retry proceeds
// afresh. It runs even when the client has gone (its own short deadline),
// because a key left IN_FLIGHT would answer 409 until its lease ends.
func (s *Server) releaseKey(subject, key, operationID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.deps.Business.Requests.IdempotencyRelease(ctx, subject, key, operationID); err != nil {
		s.deps.Logger.Error("idempotency: key not released; retries get IN_FLIGHT until its lease ends",
			"key", key, "operationId", operationID, "err", err)
	}
}

// projectID is the GitLab project requests go to: the first numeric entry
// of gitlab.projects, 0 when there is none (logged by the workflow when it
// needs one).
func projectID(snap *config.Snapshot) int64 {
	ps, _ := snap.List(config.KeyGitLabProjects)
	for _, p := range ps {
		var id int64
		if _, err := fmt.Sscan(p, &id); err == nil && id > 0 {
			return id
		}
	}
	return 0
}

func (s *Server) now() time.Time {
	if s.deps.Business.Now != nil {
		return s.deps.Business.Now()
	}
	return time.Now()
}

// newOperationID is a server-side operationId: a random (v4) UUID.
func (s *Server) newOperationID() string {
	if s.deps.Business.NewID != nil {
		return s.deps.Business.NewID()
	}
	return uuid.NewString()
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
