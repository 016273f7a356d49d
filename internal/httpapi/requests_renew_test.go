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
		r.want(t, 409, "ALREADY_IN_EFFECT")
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
