package httpapi

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/lifecycle"
	"changeflow/internal/workflow/withdraw"
)

// stubWithdrawer answers every withdrawal with ans.
type stubWithdrawer struct{ ans withdraw.Answer }

func (s stubWithdrawer) Withdraw(context.Context, string, string) (withdraw.Answer, error) {
	return s.ans, nil
}

// refusalOf is err's code, message and data.reason.
func refusalOf(t *testing.T, err error) (domain.Code, string, domain.Reason) {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) {
		t.Fatalf("not a domain error: %v", err)
	}
	switch d := de.Data.(type) {
	case domain.RefusalData:
		return de.Code, de.Message, d.Reason
	case refusedData:
		return de.Code, de.Message, d.Reason
	case movedOnData:
		return de.Code, de.Message, d.Reason
	}
	t.Fatalf("%s %q: data %#v carries no reason", de.Code, de.Message, de.Data)
	return "", "", ""
}

// TestRefusalReasons: each refusal whose code covers several cases says
// which in data.reason, beside a message that stays what it was; the
// cases the HTTP tests do not reach are decided here without a database.
func TestRefusalReasons(t *testing.T) {
	under := func(r domain.Reason) error {
		return &lifecycle.RenewalUnderWayError{Grant: "g", Renewal: "r", View: domain.BindingMRCreated, Advice: "do this", Reason: r}
	}
	withdrawnOf := func(kind domain.OperationKind, ans withdraw.Answer) error {
		s := &Server{deps: Deps{Business: Business{Withdraw: stubWithdrawer{ans}}}}
		_, _, err := s.withdraw(t.Context(), store.Operation{OperationID: "w1", Kind: kind}, "alice")
		return err
	}
	withdrawn := func(ans withdraw.Answer) error { return withdrawnOf(domain.OperationGrant, ans) }
	closed := func(ans withdraw.Answer) error {
		_, _, _, err := (&Server{}).closeAnswer(t.Context(), "c1", ans)
		return err
	}
	refused := func(view domain.BindingStatus, step domain.StepStatus) withdraw.Answer {
		return withdraw.Answer{Result: store.WithdrawResult{Outcome: store.WithdrawRefused, View: view,
			Binding: store.Binding{OperationID: "c1", Status: view}},
			Operation: store.Operation{OperationID: "c1", Step: int(step), Kind: domain.OperationGrant},
			Binding:   store.Binding{OperationID: "c1", Status: view}}
	}
	for _, c := range []struct {
		name    string
		err     error
		code    domain.Code
		message string
		reason  domain.Reason
	}{
		{"give back: the renewal has its own change", revokeError("g", under(domain.ReasonRenewalHasChange)), domain.CodeRequestInProgress,
			"This access is being renewed by r, which can no longer be withdrawn: do this.", domain.ReasonRenewalHasChange},
		{"give back: the renewal is being merged", revokeError("g", under(domain.ReasonRenewalMerging)), domain.CodeRequestInProgress,
			"This access is being renewed by r, which can no longer be withdrawn: do this.", domain.ReasonRenewalMerging},
		{"give back: the renewal stopped", revokeError("g", under(domain.ReasonRenewalStopped)), domain.CodeRequestInProgress,
			"This access is being renewed by r, which can no longer be withdrawn: do this.", domain.ReasonRenewalStopped},
		{"give back: expired while the renewal closes", revokeError("g", under(domain.ReasonRenewalExpired)), domain.CodeRequestInProgress,
			"This access is being renewed by r, which can no longer be withdrawn: do this.", domain.ReasonRenewalExpired},
		{"give back: not in effect", revokeError("g", lifecycle.ErrNotInEffect), domain.CodeNotInEffect,
			"This request's access is not in effect, so there is nothing to give back: it is still being granted, " +
				"was rejected or closed, or stopped on a failure. Withdraw a request that is still waiting, or ask an operator.", domain.ReasonNotInEffect},
		{"withdraw: the merge won", withdrawn(withdraw.Answer{Merged: true}), domain.CodeAlreadyInEffect,
			"The change was merged before it could be withdrawn and takes effect. To end the access, give it back (POST /api/requests/w1/revoke).", domain.ReasonMergedFirst},
		{"withdraw: claimed by a batch", withdrawn(withdraw.Answer{Result: store.WithdrawResult{Outcome: store.WithdrawClaimed, BatchID: 4}}), domain.CodeRequestInProgress,
			"The request was already taken into batch 4, whose merge request is under way; it can no longer be withdrawn. Once it takes effect you can give the access back.", domain.ReasonClaimedByBatch},
		{"withdraw: a revocation, whatever the answer", withdrawnOf(domain.OperationRevoke, withdraw.Answer{Result: store.WithdrawResult{Outcome: store.WithdrawApplied}}),
			domain.CodeRequestInProgress,
			"This is a removal of access, which cannot be withdrawn: it goes on until the access is removed (should it stop on a failure, an operator retries it). Once it is done you can ask for the access again.",
			domain.ReasonIsRevocation},
		{"withdraw: merging", refusedWithdrawal("w1", domain.BindingMerging, ""), domain.CodeRequestInProgress,
			"The request is being merged and can no longer be withdrawn. Once it takes effect you can give the access back.", domain.ReasonMerging},
		{"withdraw: in effect", refusedWithdrawal("w1", domain.BindingValidated, "Give it back."), domain.CodeAlreadyInEffect,
			"The request has already taken effect. Give it back.", domain.ReasonInEffect},
		{"withdraw: merged", refusedWithdrawal("w1", domain.BindingMerged, "Give it back."), domain.CodeAlreadyInEffect,
			"The request has already taken effect. Give it back.", domain.ReasonInEffect},
		{"withdraw: stopped on a failure", refusedWithdrawal("w1", domain.BindingHandleFailed, ""), domain.CodeRequestInProgress,
			"The request stopped on a failure and waits for an operator, who can retry or cancel it; it cannot be withdrawn meanwhile.", domain.ReasonStoppedOnFailure},
		{"withdraw: the close of its MR stopped", withdrawn(withdraw.Answer{Stopped: true,
			Operation: store.Operation{OperationID: "w1", Step: int(domain.StepCloseFailed)}, Binding: store.Binding{OperationID: "w1", Status: domain.BindingMRCreated}}),
			domain.CodeRequestInProgress,
			"The withdrawal is recorded, but closing the request's merge request failed; an operator retries it. Nothing more to do on your side.", domain.ReasonCloseFailed},
		{"close: the merge won", closed(withdraw.Answer{Merged: true}), domain.CodeAlreadyInEffect,
			"The merge request was merged before it could be closed: the request follows its merge and takes effect. To end the access, revoke it (POST /ops/requests/c1/revoke).", domain.ReasonMergedFirst},
		{"close: claimed by a batch", closed(withdraw.Answer{Result: store.WithdrawResult{Outcome: store.WithdrawClaimed}}), domain.CodeRequestInProgress,
			"The request is in a batch, whose merge request is under way: a member is closed only once its batch is blocked or has ended. Settle the batch instead.", domain.ReasonClaimedByBatch},
		{"close: stopped while merging", closed(refused(domain.BindingMerging, domain.StepHandleMergeFailed)), domain.CodeRequestInProgress,
			"The request stopped while it was being merged (it is at " + domain.StepHandleMergeFailed.String() + "): closing it could race the merge. Retrigger it instead.", domain.ReasonStoppedWhileMerging},
		{"close: the close of its MR stopped", closed(withdraw.Answer{Stopped: true,
			Operation: store.Operation{OperationID: "c1", Step: int(domain.StepCloseFailed)}, Binding: store.Binding{OperationID: "c1", Status: domain.BindingMRCreated}}),
			domain.CodeRequestInProgress,
			"The close is recorded, but closing the request's merge request failed; retrigger it once GitLab answers again.", domain.ReasonCloseFailed},
		{"submit: not open, closed", domain.Refusef(domain.CodeTargetNotOpen, notOpenReason(domain.AccessClosed), "m", "d"), domain.CodeTargetNotOpen, "m", domain.ReasonTargetClosed},
		{"review: campaign closed", reviewStoreError("decide", store.ErrReviewClosed), domain.CodeReviewConflict,
			"This review campaign has reached its due date: its undecided items take the campaign's default, and no decision is taken any more.", domain.ReasonReviewClosed},
		{"review: decided already", reviewStoreError("decide", store.ErrReviewDecided), domain.CodeReviewConflict,
			"This item was decided already; a decision is taken once.", domain.ReasonAlreadyDecided},
		{"submit: not open, outside the window", domain.Refusef(domain.CodeTargetNotOpen, notOpenReason(domain.AccessTestWindow), "m", "d"), domain.CodeTargetNotOpen, "m", domain.ReasonOutsideWindow},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, msg, reason := refusalOf(t, c.err)
			if code != c.code || msg != c.message || reason != c.reason {
				t.Fatalf("got %s %q reason %q\nwant %s %q reason %q", code, msg, reason, c.code, c.message, c.reason)
			}
		})
	}
}

// TestRefusalReasonsDocumented: docs/api.md's "Refusal reasons" explains
// every reason the code sends (the OpenAPI enum is held to the code by
// TestOpenAPIEnumsMatchTheCode).
func TestRefusalReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Refusal reasons")
	if !ok {
		t.Fatal(`docs/api.md has no "Refusal reasons" section`)
	}
	section, _, _ = strings.Cut(section, "\n### ")
	for _, r := range domain.Reasons() {
		if !strings.Contains(section, "| `"+string(r)+"` |") {
			t.Errorf("docs/api.md, \"Refusal reasons\", does not explain %s", r)
		}
	}
}
