package httpapi

import (
	"fmt"
	"strings"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
)

// TestWithdrawRefusesARevocation: the owner's own removal of an access
// (a give-back, `<id>~revoke`) is not the requester's to withdraw at any
// step it passes: withdrawn at the MR place it would leave the entry on
// the default branch, and at its first steps the table has no move to
// CLOSE_REQUESTER_WITHDRAWN at all. Each is refused in words with its
// reason, audited, and nothing of the revocation changes in the database.
func TestWithdrawRefusesARevocation(t *testing.T) {
	places := []struct {
		subject string
		step    domain.StepStatus
		binding domain.BindingStatus
		// waiting puts the revocation in its project's batch waiting set.
		waiting bool
	}{
		{"quinn", domain.StepRevokeStarted, domain.BindingRevoking, false},
		{"rosa", domain.StepCreateAdmitted, domain.BindingRevoking, true},
		{"sven", domain.StepCreateStarted, domain.BindingRevoking, false},
		{"tara", domain.StepCreatePipelineRunning, domain.BindingRevoking, false},
		{"ugo", domain.StepCreateSucceeded, domain.BindingRevoking, false},
		{"vera", domain.StepCreatePipelineFailed, domain.BindingRevokeFailed, false},
	}
	people := make([]string, 0, len(places))
	for _, p := range places {
		people = append(people, p.subject)
	}
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withRevoker(), withWithdraw(), withPeople(people...))
		ctx := t.Context()
		for _, p := range places {
			t.Run(p.step.String(), func(t *testing.T) {
				grant := "wdr-" + p.subject
				validatedFixture(t, st, grant, p.subject)
				rv := WorkflowRevoker{Revoker: lifecycle.Revoker{Env: flow.Env{Config: w.cfg.Current}, Store: st}}
				if res, err := rv.Revoke(ctx, grant, domain.RevokeGivenBack, "given back by its owner", p.subject); err != nil || !res.Created {
					t.Fatalf("give back: %+v %v", res, err)
				}
				rev := domain.RevocationID(grant)
				if _, err := st.DB().ExecContext(ctx, "UPDATE operation SET step_status = ?, version = version + 1 WHERE operation_id = ?",
					int(p.step), rev); err != nil {
					t.Fatal(err)
				}
				if _, err := st.DB().ExecContext(ctx, "UPDATE binding SET status = ?, version = version + 1 WHERE operation_id = ?",
					string(p.binding), rev); err != nil {
					t.Fatal(err)
				}
				if p.waiting {
					// A revocation on a batching target is in the set from
					// its creation; on another, put it there.
					var n int
					if err := st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", rev).Scan(&n); err != nil {
						t.Fatal(err)
					}
					if n == 0 {
						if _, err := st.DB().ExecContext(ctx, "INSERT INTO merge_batch_request (operation_id, project_id) VALUES (?, ?)", rev, 1); err != nil {
							t.Fatal(err)
						}
					}
				}
				before := revocationRows(t, st, rev)

				r := w.do(req{method: "POST", path: "/api/requests/" + rev + "/withdraw", user: p.subject})
				r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonIsRevocation)
				if !strings.Contains(r.env.Message, "removal of access") {
					t.Fatalf("message: %q", r.env.Message)
				}
				if after := revocationRows(t, st, rev); after != before {
					t.Fatalf("a refused withdrawal changed the revocation:\nbefore %s\n after %s", before, after)
				}
				if recs := auditOf(t, st, rev); len(recs) != 1 || recs[0].Actor != p.subject || recs[0].Outcome != "REQUEST_IN_PROGRESS" {
					t.Fatalf("audit: %+v", recs)
				}
			})
		}
	})
}

// revocationRows is what a withdrawal could write of revocation id, in
// one line: its operation row, the binding it holds, its step and
// binding history and its batch waiting-set row.
func revocationRows(t *testing.T, st *store.Store, id string) string {
	t.Helper()
	var (
		step, attempts, dueNull int
		version, bVersion       int64
		action, lease, bStatus  string
		bOwner                  string
		steps, history, waiting int
	)
	db := st.DB()
	ctx := t.Context()
	if err := db.QueryRowContext(ctx,
		"SELECT step_status, version, COALESCE(next_action, ''), CASE WHEN due_at IS NULL THEN 1 ELSE 0 END, COALESCE(lease_owner, ''), attempts FROM operation WHERE operation_id = ?",
		id).Scan(&step, &version, &action, &dueNull, &lease, &attempts); err != nil {
		t.Fatalf("operation %s: %v", id, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT status, version, operation_id FROM binding WHERE operation_id = ?", id).
		Scan(&bStatus, &bVersion, &bOwner); err != nil {
		t.Fatalf("binding of %s: %v", id, err)
	}
	for q, n := range map[string]*int{
		"SELECT COUNT(*) FROM operation_step WHERE operation_id = ?":      &steps,
		"SELECT COUNT(*) FROM binding_history WHERE operation_id = ?":     &history,
		"SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?": &waiting,
	} {
		if err := db.QueryRowContext(ctx, q, id).Scan(n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return fmt.Sprintf("operation{step %d, version %d, action %q, due unset %d, lease %q, attempts %d} binding{%s, version %d, owner %s} steps %d, history %d, waiting %d",
		step, version, action, dueNull, lease, attempts, bStatus, bVersion, bOwner, steps, history, waiting)
}
