package storetest

import (
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// AdmitWaiting submits one approve-first request per id — the id as its
// own subject and requester, on target of project 1, at CREATE_ADMITTED /
// MR_CREATING, for a day, expiring in 2031 — and admits it to project
// 1's batch waiting set, in the order of ids: the members a batch round
// claims. A claim takes them only once the database clock is past their
// admission (UntilAdmittedBeforeNow); waiting for that is the caller's,
// so a benchmark can leave it out of what it times.
func AdmitWaiting(t testing.TB, s *store.Store, target, reason string, ids ...string) {
	t.Helper()
	ctx := testContext(t)
	for _, id := range ids {
		_, err := s.OperationSubmit(ctx, store.OperationSubmitParams{
			Operation: store.OperationCreateParams{
				OperationID: id, Subject: id, TargetKey: target, ProjectID: 1, Flow: domain.FlowApproveFirst,
				Step: int(domain.StepCreateAdmitted), Reason: reason, Days: 1,
				ExpiresAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), Actor: id,
			},
			BindingStatus: domain.BindingMRCreating,
		})
		if err != nil {
			t.Fatalf("storetest: submit %s: %v", id, err)
		}
		if _, err := s.BatchAdmit(ctx, id, 1); err != nil {
			t.Fatalf("storetest: admit %s: %v", id, err)
		}
	}
}
