package httpapi

import (
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// renewThroughTheSubmit re-applies for subject's grant on tOpen through
// the HTTP submit under idempotency key id (the renewal's operationId).
func renewThroughTheSubmit(t *testing.T, w *bizWorld, st *store.Store, id, subject, grant string) {
	t.Helper()
	w.do(req{method: "POST", path: "/api/requests", user: subject, body: submitBodyFor(tOpen, "still needed", ""),
		header: map[string]string{"Idempotency-Key": id}}).want(t, 202, "ACCEPTED")
	op, err := st.OperationGet(t.Context(), id)
	if err != nil || op.Kind != domain.OperationRenew || op.GrantOperationID != grant {
		t.Fatalf("renewal %+v, %v", op, err)
	}
}

// TestRenewalWithdrawAndGiveBackAnswers: the endpoints' answers while a
// renewal runs (docs/api.md). The owner withdraws the renewal (200, its
// page CLOSED, the grant's read VALIDATED with its own expiry); gives the
// access back while a second renewal waits for its approval (202, the
// renewal RENEW_REVOKED, the access REVOKING); and is told to withdraw
// first when the renewal's MR is under way (409 REQUEST_IN_PROGRESS,
// nothing written) — an operator too.
func TestRenewalWithdrawAndGiveBackAnswers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOpsActions(), withRevoker(), withWithdraw())
		ctx := t.Context()
		until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
		seedGrant(t, st, "lim-g1", "olivia", 30, until)

		renewThroughTheSubmit(t, w, st, "lim-r1", "olivia", "lim-g1")
		r := w.do(req{method: "POST", path: "/api/requests/lim-r1/withdraw", user: "olivia"})
		r.want(t, 200, "OK")
		step, _ := r.data["step"].(map[string]any)
		if r.data["status"] != string(domain.BindingClosed) || step["name"] != domain.StepCloseRequesterWithdrawn.String() || r.data["renews"] != "lim-g1" {
			t.Fatalf("withdrawn renewal %v", r.env.Data)
		}
		g := w.do(req{method: "GET", path: "/api/requests/lim-g1", user: "olivia"})
		g.want(t, 200, "OK")
		if g.data["status"] != string(domain.BindingValidated) || g.data["expiresAt"] != until.Format(time.RFC3339) || g.data["renewal"] != nil {
			t.Fatalf("the grant after the withdrawal %v: want VALIDATED until %s, no renewal", g.env.Data, until.Format(time.RFC3339))
		}

		renewThroughTheSubmit(t, w, st, "lim-r2", "olivia", "lim-g1")
		r = w.do(req{method: "POST", path: "/api/requests/lim-g1/revoke", user: "olivia"})
		r.want(t, 202, "ACCEPTED")
		if r.data["revocationId"] != domain.RevocationID("lim-g1") || r.data["bindingStatus"] != string(domain.BindingRevoking) {
			t.Fatalf("give back %v", r.env.Data)
		}
		r = w.do(req{method: "GET", path: "/api/requests/lim-r2", user: "olivia"})
		r.want(t, 200, "OK")
		step, _ = r.data["step"].(map[string]any)
		if r.data["status"] != string(domain.BindingClosed) || step["name"] != domain.StepRenewRevoked.String() {
			t.Fatalf("the renewal cut off by the give-back %v", r.env.Data)
		}
		o, err := st.OperationGet(ctx, "lim-r2")
		if err != nil || o.NextAction != "withdraw" {
			t.Fatalf("the renewal's approval is withdrawn by its action: %+v %v", o, err)
		}

		// A renewal whose own MR is being checked: past the point of a
		// give-back; the answer says to withdraw it first.
		seedGrant(t, st, "lim-g2", "alice", 30, until)
		renewThroughTheSubmit(t, w, st, "lim-r3", "alice", "lim-g2")
		if _, err := st.DB().ExecContext(ctx, "UPDATE operation SET step_status = ?, mr_iid = 7, next_action = 'poll_pipeline' WHERE operation_id = ?",
			int(domain.StepCreatePipelineRunning), "lim-r3"); err != nil {
			t.Fatal(err)
		}
		r = w.do(req{method: "POST", path: "/api/requests/lim-g2/revoke", user: "alice"})
		r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonRenewalHasChange)
		if !strings.Contains(r.env.Message, "withdraw the renewal first (POST /api/requests/lim-r3/withdraw)") {
			t.Fatalf("message %q", r.env.Message)
		}
		w.do(req{method: "POST", path: "/ops/requests/lim-g2/revoke", user: "olivia", body: `{"reason":"left the team"}`}).
			wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonRenewalHasChange)
		if _, err := st.OperationGet(ctx, domain.RevocationID("lim-g2")); err == nil {
			t.Fatal("a refused give-back wrote a revocation")
		}
		b, err := st.BindingGet(ctx, "alice", tOpen)
		if err != nil || b.Status != domain.BindingRenewing || b.OperationID != "lim-r3" {
			t.Fatalf("binding %+v %v: unchanged", b, err)
		}
	})
}
