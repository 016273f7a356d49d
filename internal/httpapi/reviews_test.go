package httpapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/review"
)

// withReviews wires the review routes over the world's store, with tReplay
// owned by bob and alice, and the removals through the world's revoker
// (withRevoker first).
func withReviews() worldOpt {
	return func(w *bizWorld, d *Deps) {
		w.overlay["targets"].(map[string]any)[tReplay].(map[string]any)["owners"] = []any{"bob", "Alice"}
		d.Business.Reviews = w.st
		d.Business.ReviewRemovals = &review.Reviews{Store: w.st, Revoker: d.Business.Revoker, Config: w.cfg.Current}
	}
}

// reviewDue is a due date in the future for both clocks a campaign meets:
// the route's (the world's fixed clock) and the store's (the database's,
// which decides whether it is due).
func reviewDue() string {
	now := time.Now()
	if worldNow.After(now) {
		now = worldNow
	}
	return now.Add(7 * 24 * time.Hour).UTC().Format(time.RFC3339)
}

func TestReviewRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withPeople("carol", "dave"), withRevoker(), withReviews())
		for _, p := range []string{"alice", "carol", "dave"} {
			validatedFixture(t, st, "g-"+p, p)
		}
		due := reviewDue()
		open := func(body string) resp {
			return w.do(req{method: "POST", path: "/ops/reviews", user: "olivia", body: body})
		}

		t.Run("opening: operators only, every bad field named", func(t *testing.T) {
			w.do(req{method: "POST", path: "/ops/reviews", user: "bob", body: `{}`}).want(t, 403, "ACCESS_DENIED")
			r := open(`{"targetKey":"nope","dueAt":"2000-01-01T00:00:00Z","defaultDecision":"maybe"}`)
			r.want(t, 400, "INVALID_ARGUMENT")
			for _, f := range []string{"targetKey", "dueAt", "defaultDecision"} {
				if !strings.Contains(r.raw, `"field":"`+f+`"`) {
					t.Fatalf("%s not named: %s", f, r.raw)
				}
			}
			open(`{"targetKey":"`+tReplay+`","dueAt":"tomorrow","defaultDecision":"revoke"}`).want(t, 400, "INVALID_ARGUMENT")
			open(`{"targetKey":"`+tReplay+`","defaultDecision":"revoke"}`).want(t, 400, "INVALID_ARGUMENT")
		})

		var id int64
		t.Run("open, then a second is 409", func(t *testing.T) {
			r := open(`{"targetKey":"` + tReplay + `","dueAt":"` + due + `","defaultDecision":"revoke"}`)
			r.want(t, 200, "OK")
			if r.data["items"] != float64(3) || r.data["status"] != "open" || r.data["openedBy"] != "olivia" || r.data["keepByDefault"] != false {
				t.Fatalf("campaign %v", r.data)
			}
			id = int64(r.data["id"].(float64))
			open(`{"targetKey":"`+tReplay+`","dueAt":"`+due+`","defaultDecision":"keep"}`).wantRefused(t, 409, "REVIEW_CONFLICT", domain.ReasonReviewOpen)
		})

		subjects := func(user string) []string {
			r := w.do(req{method: "GET", path: "/api/reviews", user: user})
			r.want(t, 200, "OK")
			var out []string
			for _, it := range r.data["items"].([]any) {
				out = append(out, it.(map[string]any)["subject"].(string))
			}
			return out
		}
		itemOf := map[string]int64{}
		items, err := st.ReviewItems(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			itemOf[it.Subject] = it.ID
		}
		decide := func(user, subject, body string) resp {
			return w.do(req{method: "POST", path: fmt.Sprintf("/api/reviews/%d/items/%d", id, itemOf[subject]), user: user, body: body})
		}

		t.Run("who sees what: owners never their own, operators all, others nothing", func(t *testing.T) {
			if got := strings.Join(subjects("bob"), ","); got != "alice,carol,dave" {
				t.Fatalf("bob: %s", got)
			}
			if got := strings.Join(subjects("alice"), ","); got != "carol,dave" {
				t.Fatalf("alice: %s", got)
			}
			if got := strings.Join(subjects("olivia"), ","); got != "alice,carol,dave" {
				t.Fatalf("olivia: %s", got)
			}
			if got := subjects("dave"); len(got) != 0 {
				t.Fatalf("dave: %v", got)
			}
			w.do(req{method: "GET", path: "/api/reviews"}).want(t, 401, "UNAUTHENTICATED")
		})

		t.Run("deciding: never one's own, owners and operators only, once", func(t *testing.T) {
			decide("alice", "alice", `{"decision":"keep"}`).wantRefused(t, 403, "REVIEW_NOT_ALLOWED", domain.ReasonOwnAccess)
			decide("dave", "carol", `{"decision":"keep"}`).wantRefused(t, 403, "REVIEW_NOT_ALLOWED", domain.ReasonNotReviewer)
			decide("bob", "alice", `{"decision":"remove"}`).want(t, 400, "INVALID_ARGUMENT")
			decide("bob", "alice", `{"decision":"keep","comment":"two\nlines"}`).want(t, 400, "INVALID_ARGUMENT")
			w.do(req{method: "POST", path: fmt.Sprintf("/api/reviews/%d/items/999999", id), user: "bob", body: `{"decision":"keep"}`}).want(t, 404, "NOT_FOUND")

			r := decide("bob", "alice", `{"decision":"keep","comment":"on call this quarter"}`)
			r.want(t, 200, "OK")
			if r.data["decision"] != "keep" || r.data["decidedBy"] != "bob" || r.data["comment"] != "on call this quarter" {
				t.Fatalf("kept %v", r.data)
			}
			decide("olivia", "alice", `{"decision":"revoke"}`).wantRefused(t, 409, "REVIEW_CONFLICT", domain.ReasonAlreadyDecided)

			r = decide("olivia", "carol", `{"decision":"revoke","comment":"left the team"}`)
			r.want(t, 200, "OK")
			if r.data["revocationId"] != domain.RevocationID("g-carol") {
				t.Fatalf("revoked %v", r.data)
			}
			op, err := st.OperationGet(t.Context(), domain.RevocationID("g-carol"))
			if err != nil || op.RevokeReason != domain.RevokeOperator {
				t.Fatalf("removal %+v %v", op, err)
			}
			if got := strings.Join(subjects("bob"), ","); got != "dave" {
				t.Fatalf("bob after: %s", got)
			}
		})

		t.Run("the report, as JSON and CSV", func(t *testing.T) {
			w.do(req{method: "GET", path: fmt.Sprintf("/ops/reviews/%d", id), user: "bob"}).want(t, 403, "ACCESS_DENIED")
			r := w.do(req{method: "GET", path: fmt.Sprintf("/ops/reviews/%d", id), user: "olivia"})
			r.want(t, 200, "OK")
			entries := r.data["entries"].([]any)
			if len(entries) != 3 || r.data["decided"] != float64(2) {
				t.Fatalf("report %v", r.data)
			}
			carol := entries[1].(map[string]any)
			if carol["subject"] != "carol" || carol["decision"] != "revoke" || carol["decidedBy"] != "olivia" ||
				carol["removalInEffect"] != false || carol["source"] != "changeflow" {
				t.Fatalf("carol %v", carol)
			}
			c := w.do(req{method: "GET", path: fmt.Sprintf("/ops/reviews/%d?format=csv", id), user: "olivia"})
			if c.status != 200 || !strings.HasPrefix(c.header.Get("Content-Type"), "text/csv") {
				t.Fatalf("csv %d %s", c.status, c.header)
			}
			lines := strings.Split(strings.TrimSpace(c.raw), "\n")
			if len(lines) != 4 || !strings.HasPrefix(lines[0], "reviewId,targetKey") || !strings.Contains(lines[2], "left the team") {
				t.Fatalf("csv %q", c.raw)
			}
			w.do(req{method: "GET", path: fmt.Sprintf("/ops/reviews/%d?format=xml", id), user: "olivia"}).want(t, 400, "INVALID_ARGUMENT")
			w.do(req{method: "GET", path: "/ops/reviews/999999", user: "olivia"}).want(t, 404, "NOT_FOUND")
			l := w.do(req{method: "GET", path: "/ops/reviews", user: "olivia"})
			l.want(t, 200, "OK")
			if n := len(l.data["reviews"].([]any)); n != 1 {
				t.Fatalf("list %v", l.data)
			}
		})

		t.Run("decisions are audited", func(t *testing.T) {
			recs, err := st.AuditListByResource(t.Context(), fmt.Sprintf("review:%d/%d", id, itemOf["carol"]), 10)
			// The refusal is recorded as well as the decision.
			if err != nil || len(recs) != 2 {
				t.Fatalf("audit %+v %v", recs, err)
			}
			got := map[string]string{}
			for _, r := range recs {
				if r.Action != reviewAuditAction {
					t.Fatalf("audit %+v", r)
				}
				got[r.Actor] = r.Outcome
			}
			if got["olivia"] != "OK" || got["dave"] != "REVIEW_NOT_ALLOWED" {
				t.Fatalf("audit %v", got)
			}
		})
	})
}

func TestReviewCSVCellsAreInert(t *testing.T) {
	for in, want := range map[string]string{"=HYPERLINK(1)": "'=HYPERLINK(1)", "+1": "'+1", "-x": "'-x", "@a": "'@a", "alice": "alice", "": ""} {
		if got := csvCell(in); got != want {
			t.Fatalf("%q → %q", in, got)
		}
	}
}
