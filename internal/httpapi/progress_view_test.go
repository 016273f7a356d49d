package httpapi

import (
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// barOf prints an answer's progress as "KEY:STATE …".
func barOf(t *testing.T, data map[string]any) string {
	t.Helper()
	list, ok := data["progress"].([]any)
	if !ok {
		t.Fatalf("no progress in %v", data)
	}
	parts := make([]string, 0, len(list))
	for _, x := range list {
		m := x.(map[string]any)
		parts = append(parts, m["key"].(string)+":"+m["state"].(string))
	}
	return strings.Join(parts, " ")
}

// TestStepBarFollowsTheRealHistory: the owner's status read and the
// console's view show the same step bar, from what the request went
// through — a legacy request whose checks failed never shows its
// approval done (it was never asked for), and a grant given back says
// its access is being removed, then removed, on both, with the console's
// status the removal's, never the VALIDATED its own history ends with.
func TestStepBarFollowsTheRealHistory(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOpsActions(), withRevoker(), withPeople("carol", "dave"))
		ctx := t.Context()
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := st.DB().ExecContext(ctx, q, args...); err != nil {
				t.Fatal(err)
			}
		}
		step := func(id string, from, to domain.StepStatus, fromB, toB domain.BindingStatus) {
			t.Helper()
			exec("INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES (?, ?, ?, ?, ?)",
				id, int(from), int(to), string(fromB), string(toB))
		}
		both := func(id, owner, want, wantOpsStatus string) {
			t.Helper()
			u := w.do(req{method: "GET", path: "/api/requests/" + id, user: owner})
			u.want(t, 200, "OK")
			if got := barOf(t, u.data); got != want {
				t.Fatalf("%s, owner's page:\n got  %s\n want %s", id, got, want)
			}
			o := w.do(req{method: "GET", path: "/ops/requests/" + id, user: "olivia"})
			o.want(t, 200, "OK")
			if got := barOf(t, o.data); got != want {
				t.Fatalf("%s, console:\n got  %s\n want %s", id, got, want)
			}
			if o.data["status"] != wantOpsStatus {
				t.Fatalf("%s, console status %v, want %s", id, o.data["status"], wantOpsStatus)
			}
		}
		legacy := func(id, owner string) {
			t.Helper()
			if _, err := st.OperationSubmit(ctx, store.OperationSubmitParams{
				Operation: store.OperationCreateParams{
					OperationID: id, Subject: owner, TargetKey: tReplay, ProjectID: 1, Flow: flow.FlowLegacy,
					Step: int(domain.StepCreateStarted), Reason: "r", Days: 1, ExpiresAt: time.Now().Add(24 * time.Hour), Actor: owner,
				},
				BindingStatus: domain.BindingMRCreating,
			}); err != nil {
				t.Fatal(err)
			}
		}

		t.Run("legacy: failed checks fail the checks, the approval is not reached", func(t *testing.T) {
			legacy("g-checks", "carol")
			step("g-checks", domain.StepCreateStarted, domain.StepCreateMRCreated, domain.BindingMRCreating, domain.BindingMRCreated)
			step("g-checks", domain.StepCreateMRCreated, domain.StepCreatePipelineFailed, domain.BindingMRCreated, domain.BindingCreateFailed)
			exec("UPDATE operation SET step_status = ?, version = version + 1 WHERE operation_id = 'g-checks'", int(domain.StepCreatePipelineFailed))
			exec("UPDATE binding SET status = 'CREATE_FAILED', version = version + 1 WHERE operation_id = 'g-checks'")
			both("g-checks", "carol", "PROPOSED:DONE CHECKS:FAILED APPROVAL:TODO MERGED:TODO DEPLOYED:TODO", "CREATE_FAILED")
		})

		t.Run("legacy: a generic failure stands where its history says, then cancelled", func(t *testing.T) {
			legacy("g-create", "dave")
			step("g-create", domain.StepCreateStarted, domain.StepCreateMRCreated, domain.BindingMRCreating, domain.BindingMRCreated)
			step("g-create", domain.StepCreateMRCreated, domain.StepCreateFailed, domain.BindingMRCreated, domain.BindingCreateFailed)
			exec("UPDATE operation SET step_status = ?, version = version + 1 WHERE operation_id = 'g-create'", int(domain.StepCreateFailed))
			exec("UPDATE binding SET status = 'CREATE_FAILED', version = version + 1 WHERE operation_id = 'g-create'")
			both("g-create", "dave", "PROPOSED:DONE CHECKS:FAILED APPROVAL:TODO MERGED:TODO DEPLOYED:TODO", "CREATE_FAILED")
			step("g-create", domain.StepCreateFailed, domain.StepCloseCancelled, domain.BindingCreateFailed, domain.BindingClosed)
			exec("UPDATE operation SET step_status = ?, version = version + 1 WHERE operation_id = 'g-create'", int(domain.StepCloseCancelled))
			exec("UPDATE binding SET status = 'CLOSED', version = version + 1 WHERE operation_id = 'g-create'")
			both("g-create", "dave", "PROPOSED:DONE CHECKS:FAILED APPROVAL:SKIPPED MERGED:SKIPPED DEPLOYED:SKIPPED", "CLOSED")
		})

		t.Run("a grant given back: being removed, then removed, on both", func(t *testing.T) {
			validatedFixture(t, st, "g-alice", "alice")
			exec("UPDATE operation SET step_status = ?, version = version + 1 WHERE operation_id = 'g-alice'", int(domain.StepCalledBack))
			step("g-alice", domain.StepHandleMerged, domain.StepCalledBack, domain.BindingMerged, domain.BindingValidated)
			both("g-alice", "alice", "APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE", "VALIDATED")
			w.do(req{method: "POST", path: "/api/requests/g-alice/revoke", user: "alice"}).want(t, 202, "ACCEPTED")
			both("g-alice", "alice", "APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE REMOVED:CURRENT", "REVOKING")
			rev := domain.RevocationID("g-alice")
			exec("UPDATE operation SET step_status = ?, version = version + 1 WHERE operation_id = ?", int(domain.StepRevokeCalledBack), rev)
			step(rev, domain.StepHandleMerged, domain.StepRevokeCalledBack, domain.BindingRevoking, domain.BindingRevoked)
			exec("UPDATE binding SET status = 'REVOKED', version = version + 1 WHERE operation_id = ?", rev)
			both("g-alice", "alice", "APPROVAL:DONE PROPOSED:DONE CHECKS:DONE MERGED:DONE DEPLOYED:DONE REMOVED:DONE", "REVOKED")
			both(rev, "alice", "PROPOSED:DONE CHECKS:DONE MERGED:DONE REMOVED:DONE", "REVOKED")
		})
	})
}
