package httpapi

import (
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestOldGrantAfterItsAccessWasRemovedAndAskedForAgain: given back,
// removed (REVOKED), then asked for again — the new request takes the
// binding row, so neither the grant nor its revocation owns it. The old
// grant's page must say its access was removed, not what its own history
// ends with (VALIDATED: it read "In effect" although its entry was gone).
func TestOldGrantAfterItsAccessWasRemovedAndAskedForAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOpsActions(), withRevoker())
		ctx := t.Context()
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := st.DB().ExecContext(ctx, q, args...); err != nil {
				t.Fatal(err)
			}
		}
		validatedFixture(t, st, "g-alice", "alice")
		// The grant's history ends in effect, as a deployed grant's does.
		exec("INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES (?, ?, ?, 'MERGED', 'VALIDATED')",
			"g-alice", int(domain.StepHandleMerged), int(domain.StepCalledBack))
		w.do(req{method: "POST", path: "/api/requests/g-alice/revoke", user: "alice"}).want(t, 202, "ACCEPTED")
		rev := domain.RevocationID("g-alice")
		// The removal deployed: the revocation's history and the row say
		// REVOKED.
		exec("INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES (?, ?, ?, 'REVOKING', 'REVOKED')",
			rev, int(domain.StepHandleMerged), int(domain.StepCalledBack))
		exec("UPDATE binding SET status = 'REVOKED', version = version + 1 WHERE operation_id = ?", rev)
		if g := w.do(req{method: "GET", path: "/api/requests/g-alice", user: "alice"}); g.data["status"] != "REVOKED" {
			t.Fatalf("while the revocation owns the row: %v", g.data)
		}

		again := w.do(req{method: "POST", path: "/api/requests", user: "alice", body: `{"targetKey":"` + tReplay + `","reason":"again","days":1}`})
		again.want(t, 202, "ACCEPTED")
		b, err := st.BindingGet(ctx, "alice", tReplay)
		if err != nil || b.OperationID != again.data["operationId"] {
			t.Fatalf("the new request owns the row: %+v %v", b, err)
		}
		g := w.do(req{method: "GET", path: "/api/requests/g-alice", user: "alice"})
		g.want(t, 200, "OK")
		if g.data["status"] != "REVOKED" || g.data["revocationId"] != rev {
			t.Fatalf("the old grant after the row was taken: status %v revocationId %v", g.data["status"], g.data["revocationId"])
		}
		if g.data["renewFrom"] != nil {
			t.Fatalf("nothing to renew on a removed access: %v", g.data["renewFrom"])
		}
	})
}
