package httpapi

import (
	"fmt"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestReviewRoutesOnARepositoryEntry: an entry changeflow did not write
// (a repo period of bob, an owner of the target) is an item of the
// campaign, source repo. Bob may not decide it (his own access); alice
// revokes it through the route, which starts its removal at once; the
// report shows who decided, when, the removal, not yet in effect.
func TestReviewRoutesOnARepositoryEntry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withRevoker(), withReviews())
		validatedFixture(t, st, "g-alice", "alice")
		at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		if err := st.AccessRepoApply(t.Context(), tReplay, "bindings/"+tReplay+".yaml", store.RepoCursor{}, store.RepoCursor{SHA: "sha-hand", At: at},
			[]store.RepoAccessWrite{{Subject: "bob", OperationID: "hand-bob", Opens: true, SHA: "sha-hand", At: at}}); err != nil {
			t.Fatal(err)
		}
		r := w.do(req{method: "POST", path: "/ops/reviews", user: "olivia",
			body: `{"targetKey":"` + tReplay + `","dueAt":"` + reviewDue() + `","defaultDecision":"revoke"}`})
		r.want(t, 200, "OK")
		if r.data["items"] != float64(2) {
			t.Fatalf("campaign %v", r.data)
		}
		id := int64(r.data["id"].(float64))
		items, err := st.ReviewItems(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		var bob store.ReviewItem
		for _, it := range items {
			if it.Subject == "bob" {
				bob = it
			}
		}
		path := fmt.Sprintf("/api/reviews/%d/items/%d", id, bob.ID)
		w.do(req{method: "POST", path: path, user: "bob", body: `{"decision":"keep"}`}).wantRefused(t, 403, "REVIEW_NOT_ALLOWED", domain.ReasonOwnAccess)
		d := w.do(req{method: "POST", path: path, user: "alice", body: `{"decision":"revoke","comment":"unknown entry"}`})
		d.want(t, 200, "OK")
		if d.data["source"] != "repo" || d.data["revocationId"] != domain.RepoRemovalID(bob.ID) || d.data["grantOperationId"] != nil {
			t.Fatalf("decided %v", d.data)
		}

		rep := w.do(req{method: "GET", path: fmt.Sprintf("/ops/reviews/%d", id), user: "olivia"})
		rep.want(t, 200, "OK")
		var entry map[string]any
		for _, e := range rep.data["entries"].([]any) {
			if e.(map[string]any)["subject"] == "bob" {
				entry = e.(map[string]any)
			}
		}
		if entry["source"] != "repo" || entry["decision"] != "revoke" || entry["decidedBy"] != "alice" || entry["decidedAt"] == nil ||
			entry["revocationId"] != domain.RepoRemovalID(bob.ID) || entry["removalInEffect"] != false {
			t.Fatalf("report entry %v", entry)
		}
		op, err := st.OperationGet(t.Context(), domain.RepoRemovalID(bob.ID))
		if err != nil || op.Kind != domain.OperationRevoke || op.GrantOperationID != "hand-bob" || op.ReviewItemID != bob.ID {
			t.Fatalf("removal %+v %v", op, err)
		}
	})
}
