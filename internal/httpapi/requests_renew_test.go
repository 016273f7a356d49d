package httpapi

import (
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// seedGrant stores a grant of days days in effect until until, as the
// deploy callback leaves it (CALLED_BACK, VALIDATED), without the
// workflow.
func seedGrant(t *testing.T, st *store.Store, id, subject string, days int, until time.Time) {
	t.Helper()
	if _, err := st.OperationSubmit(t.Context(), store.OperationSubmitParams{
		Operation: store.OperationCreateParams{OperationID: id, Subject: subject, TargetKey: tOpen, Flow: "APPROVE_FIRST",
			Step: int(domain.StepCalledBack), Reason: "seeded", Days: days, ExpiresAt: until},
		BindingStatus: domain.BindingValidated,
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRenewFromIsShown: a grant in effect says from when it may be
// renewed — in its status read and in the 409 a re-application outside
// the window gets — as the window the configuration in force makes.
func TestRenewFromIsShown(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		until := time.Now().Add(20 * 24 * time.Hour).UTC().Truncate(time.Second)
		seedGrant(t, st, "renew-from-grant", "adam", 30, until)
		// The default window: the last quarter of 30 days.
		want := until.Add(-30 * 24 * time.Hour / 4).Format(time.RFC3339)

		r := w.do(req{method: "GET", path: "/api/requests/renew-from-grant", user: "adam"})
		r.want(t, 200, "OK")
		if r.data["renewFrom"] != want || r.data["status"] != string(domain.BindingValidated) {
			t.Fatalf("status read %v, want renewFrom %s", r.env.Data, want)
		}

		r = w.do(req{method: "POST", path: "/api/requests", user: "adam", body: submitBodyFor(tOpen, "more", "")})
		r.wantRefused(t, 409, "ALREADY_IN_EFFECT", domain.ReasonInEffect)
		if r.data["renewFrom"] != want || !strings.Contains(r.env.Message, "renew it from "+want) {
			t.Fatalf("409 %q %v, want renewFrom %s in data and message", r.env.Message, r.env.Data, want)
		}

		// The window is read per request: a minimum longer than the grant's
		// last quarter moves renewFrom.
		w.load(map[string]any{"expiry.renewWindowMin": "10d"})
		defer w.load(nil)
		r = w.do(req{method: "GET", path: "/api/requests/renew-from-grant", user: "adam"})
		if want := until.Add(-10 * 24 * time.Hour).Format(time.RFC3339); r.data["renewFrom"] != want {
			t.Fatalf("renewFrom %v with a 10-day minimum, want %s", r.data["renewFrom"], want)
		}

		// A request not in effect has none.
		r = w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tOpen, "new", ""),
			header: map[string]string{"Idempotency-Key": "renew-from-new"}})
		r.want(t, 202, "ACCEPTED")
		r = w.do(req{method: "GET", path: "/api/requests/renew-from-new", user: "alice"})
		if _, ok := r.data["renewFrom"]; ok {
			t.Fatalf("a request in flight shows renewFrom: %v", r.env.Data)
		}
	})
}

// TestReapplyAfterExpiryKeepsTheRemovalPromised is the hole that was
// open: a grant whose expiry passed before the expiry scan ran could be
// re-applied for, the new request took the row over, and if it was then
// rejected nothing ever removed the old entry from the file. Now the
// re-application is refused as in progress, nothing of it is stored, and
// the old grant's revocation is created on the spot (the scan's own).
func TestReapplyAfterExpiryKeepsTheRemovalPromised(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withRevoker())
		ctx := t.Context()
		seedGrant(t, st, "lapsed-grant", "bob", 30, time.Now().Add(-time.Hour).UTC().Truncate(time.Second))

		r := w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor(tOpen, "again", ""),
			header: map[string]string{"Idempotency-Key": "lapsed-again"}})
		r.wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonExpiredBeingRemoved)
		if !strings.Contains(r.env.Message, "expired") || r.data["operationId"] != "lapsed-grant" {
			t.Fatalf("409 %q %v: want the expired grant named", r.env.Message, r.env.Data)
		}
		if _, err := st.OperationGet(ctx, "lapsed-again"); err == nil {
			t.Fatal("the refused re-application stored an operation")
		}
		b, err := st.BindingGet(ctx, "bob", tOpen)
		if err != nil {
			t.Fatal(err)
		}
		rev := domain.RevocationID("lapsed-grant")
		if b.Status != domain.BindingRevoking || b.OperationID != rev {
			t.Fatalf("binding %s owned by %s, want REVOKING by %s", b.Status, b.OperationID, rev)
		}
		op, err := st.OperationGet(ctx, rev)
		if err != nil || op.RevokeReason != domain.RevokeExpired || op.GrantOperationID != "lapsed-grant" {
			t.Fatalf("revocation %+v, %v", op, err)
		}
		// Asking again meanwhile is still in progress, and creates nothing
		// twice: the removal owns the row now, so this is the plain
		// in-progress refusal.
		w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor(tOpen, "again", "")}).
			wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonInProgress)
		if n := countRows(t, st, "SELECT COUNT(*) FROM operation WHERE grant_operation_id = ?", "lapsed-grant"); n != 1 {
			t.Fatalf("%d revocations of the grant, want 1", n)
		}
	})
}

// TestRenewalThroughTheSubmit: inside the window the normal submit
// renews the grant in effect. The grant's status read is unchanged — in
// effect, the same expiry — and names the renewal in flight; the
// renewal's own read shows its progress and the grant it renews.
func TestRenewalThroughTheSubmit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		ctx := t.Context()
		until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
		seedGrant(t, st, "to-renew", "olivia", 30, until)

		r := w.do(req{method: "POST", path: "/api/requests", user: "olivia", body: submitBodyFor(tOpen, "still needed", ""),
			header: map[string]string{"Idempotency-Key": "the-renewal"}})
		r.want(t, 202, "ACCEPTED")
		op, err := st.OperationGet(ctx, "the-renewal")
		if err != nil || op.Kind != domain.OperationRenew || op.GrantOperationID != "to-renew" {
			t.Fatalf("renewal %+v, %v", op, err)
		}
		b, err := st.BindingGet(ctx, "olivia", tOpen)
		if err != nil || b.Status != domain.BindingRenewing || b.OperationID != "the-renewal" || !b.ExpiresAt.Equal(until) {
			t.Fatalf("binding %+v, %v: want RENEWING by the renewal, expiry unchanged", b, err)
		}

		r = w.do(req{method: "GET", path: "/api/requests/to-renew", user: "olivia"})
		r.want(t, 200, "OK")
		ren, _ := r.data["renewal"].(map[string]any)
		if r.data["status"] != string(domain.BindingValidated) || r.data["expiresAt"] != until.Format(time.RFC3339) ||
			ren["operationId"] != "the-renewal" || ren["status"] != string(domain.BindingApprovalSending) {
			t.Fatalf("grant's read %v: want VALIDATED until %s with the renewal in flight", r.env.Data, until.Format(time.RFC3339))
		}
		if _, ok := r.data["renewFrom"]; ok {
			t.Fatalf("a grant being renewed shows renewFrom: %v", r.env.Data)
		}
		r = w.do(req{method: "GET", path: "/api/requests/the-renewal", user: "olivia"})
		r.want(t, 200, "OK")
		if r.data["status"] != string(domain.BindingApprovalSending) || r.data["renews"] != "to-renew" {
			t.Fatalf("renewal's read %v", r.env.Data)
		}
		// A second one meanwhile is in progress.
		w.do(req{method: "POST", path: "/api/requests", user: "olivia", body: submitBodyFor(tOpen, "again", "")}).
			wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonInProgress)
	})
}

// TestRenewalExtendsTheCurrentExpiry: a renewal's expiry counts its days
// from the grant's current end (still ahead), not from the renewal, and
// never beyond the submission plus the target's maximum (30 days); the
// grant's own read keeps its expiry until the renewal is in effect.
func TestRenewalExtendsTheCurrentExpiry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		ctx := t.Context()
		until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
		for _, c := range []struct {
			subject, days string
			want          time.Time
		}{
			{"olivia", `,"days":5`, until.Add(5 * 24 * time.Hour)},
			{"adam", `,"days":30`, worldNow.Add(30 * 24 * time.Hour)},
		} {
			seedGrant(t, st, "grant-"+c.subject, c.subject, 30, until)
			id := "renewal-" + c.subject
			w.do(req{method: "POST", path: "/api/requests", user: c.subject, body: submitBodyFor(tOpen, "still needed", c.days),
				header: map[string]string{"Idempotency-Key": id}}).want(t, 202, "ACCEPTED")
			op, err := st.OperationGet(ctx, id)
			if err != nil || op.Kind != domain.OperationRenew || !op.ExpiresAt.Equal(c.want) {
				t.Fatalf("%s's renewal %+v, %v: want RENEW until %s", c.subject, op, err, c.want)
			}
			r := w.do(req{method: "GET", path: "/api/requests/" + id, user: c.subject})
			r.want(t, 200, "OK")
			if r.data["expiresAt"] != c.want.Format(time.RFC3339) {
				t.Fatalf("%s's renewal read %v: want expiresAt %s", c.subject, r.env.Data, c.want.Format(time.RFC3339))
			}
			b, err := st.BindingGet(ctx, c.subject, tOpen)
			if err != nil || !b.ExpiresAt.Equal(until) {
				t.Fatalf("%s's binding %+v, %v: want the grant's expiry %s until the renewal is in effect", c.subject, b, err, until)
			}
			// The binding's history records the expiry the renewal brings.
			hist, err := st.BindingHistoryList(ctx, c.subject, tOpen)
			if err != nil || len(hist) == 0 {
				t.Fatalf("%s's binding history %v, %v", c.subject, hist, err)
			}
			if last := hist[len(hist)-1]; last.OperationID != id || !last.ExpiresAt.Equal(c.want) {
				t.Fatalf("%s's last history row %+v: want %s until %s", c.subject, last, id, c.want)
			}
		}
	})
}
