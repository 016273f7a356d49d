package httpapi

import (
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// mineOn is the caller's "mine" on target in GET /api/targets, nil when
// the item has none.
func mineOn(t *testing.T, w *bizWorld, user, target string) map[string]any {
	t.Helper()
	r := w.do(req{method: "GET", path: "/api/targets", user: user})
	r.want(t, 200, "OK")
	for _, it := range r.data["items"].([]any) {
		if m := it.(map[string]any); m["key"] == target {
			mine, _ := m["mine"].(map[string]any)
			return mine
		}
	}
	t.Fatalf("no target %s in %v", target, r.env.Data)
	return nil
}

// TestTargetsShowWhatTheCallerHolds: each target says what the caller
// holds on it — the access in effect and its end, from when it can be
// renewed, a renewal or removal under way, a request still on its way —
// naming the request to act on, with the same renewFrom as that request's
// own status read; nobody else's, and nothing once the access is gone.
func TestTargetsShowWhatTheCallerHolds(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withRevoker())
		ctx := t.Context()
		rfc := func(at time.Time) string { return at.UTC().Format(time.RFC3339) }

		until := time.Now().Add(20 * 24 * time.Hour).UTC().Truncate(time.Second)
		seedGrant(t, st, "mine-held", "alice", 30, until)

		t.Run("in effect: its request, its end, and from when it can be renewed as on its page", func(t *testing.T) {
			mine := mineOn(t, w, "alice", tOpen)
			page := w.do(req{method: "GET", path: "/api/requests/mine-held", user: "alice"})
			page.want(t, 200, "OK")
			if mine["status"] != "VALIDATED" || mine["operationId"] != "mine-held" || mine["expiresAt"] != rfc(until) ||
				mine["renewFrom"] == nil || mine["renewFrom"] != page.data["renewFrom"] || mine["expired"] != nil {
				t.Fatalf("mine %v; the request's read %v", mine, page.data)
			}
			if mineOn(t, w, "alice", tReplay) != nil || mineOn(t, w, "bob", tOpen) != nil {
				t.Fatal("mine on a target never asked for, or on someone else's")
			}
		})

		t.Run("a request on its way: that request, no end yet", func(t *testing.T) {
			w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(tReplay, "on its way", ""),
				header: map[string]string{"Idempotency-Key": "mine-pending"}}).want(t, 202, "ACCEPTED")
			mine := mineOn(t, w, "alice", tReplay)
			page := w.do(req{method: "GET", path: "/api/requests/mine-pending", user: "alice"})
			if mine["operationId"] != "mine-pending" || mine["status"] != page.data["status"] || mine["expiresAt"] != nil || mine["renewFrom"] != nil {
				t.Fatalf("mine %v; the request's read %v", mine, page.data)
			}
		})

		t.Run("given back: the grant and its removal until the removal is deployed, then nothing", func(t *testing.T) {
			w.do(req{method: "POST", path: "/api/requests/mine-held/revoke", user: "alice"}).want(t, 202, "ACCEPTED")
			mine := mineOn(t, w, "alice", tOpen)
			if mine["status"] != "REVOKING" || mine["operationId"] != "mine-held" || mine["revocationId"] != domain.RevocationID("mine-held") ||
				mine["expiresAt"] != rfc(until) || mine["renewFrom"] != nil {
				t.Fatalf("mine while being removed %v", mine)
			}
			// The removal deployed (as its deploy callback leaves it): the
			// row is re-appliable, and the target offers a new request.
			if _, err := st.DB().ExecContext(ctx, "UPDATE binding SET status = 'REVOKED', version = version + 1 WHERE operation_id = ?",
				domain.RevocationID("mine-held")); err != nil {
				t.Fatal(err)
			}
			if mine := mineOn(t, w, "alice", tOpen); mine != nil {
				t.Fatalf("mine once removed %v", mine)
			}
		})

		t.Run("renewing: the grant that still carries the access, its end unchanged, and the renewal", func(t *testing.T) {
			soon := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
			seedGrant(t, st, "mine-renewed", "adam", 30, soon)
			w.do(req{method: "POST", path: "/api/requests", user: "adam", body: submitBodyFor(tOpen, "still needed", ""),
				header: map[string]string{"Idempotency-Key": "mine-renewal"}}).want(t, 202, "ACCEPTED")
			mine := mineOn(t, w, "adam", tOpen)
			if mine["status"] != "RENEWING" || mine["operationId"] != "mine-renewed" || mine["renewalId"] != "mine-renewal" ||
				mine["expiresAt"] != rfc(soon) || mine["renewFrom"] != nil {
				t.Fatalf("mine while renewing %v", mine)
			}
		})

		t.Run("past its end: expired, its removal due, nothing to renew", func(t *testing.T) {
			gone := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
			seedGrant(t, st, "mine-lapsed", "bob", 30, gone)
			mine := mineOn(t, w, "bob", tOpen)
			if mine["status"] != "VALIDATED" || mine["operationId"] != "mine-lapsed" || mine["expired"] != true ||
				mine["expiresAt"] != rfc(gone) || mine["renewFrom"] != nil {
				t.Fatalf("mine past its end %v", mine)
			}
		})
	})
}
