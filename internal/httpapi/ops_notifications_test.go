package httpapi

import (
	"testing"
	"time"

	"changeflow/internal/notify"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func withNotifications() worldOpt {
	return func(w *bizWorld, d *Deps) { d.Business.Notifications = w.st }
}

// deadLetter writes an event and makes it a dead letter, as the deliverer
// does after notify.maxAttempts, returning its id.
func deadLetter(t *testing.T, st *store.Store, order string) string {
	t.Helper()
	ctx := t.Context()
	if err := st.OutboxAdd(ctx, store.OutboxNew{Kind: notify.KindRequestInEffect, OrderKey: order,
		Data: store.OutboxData{Request: "GRANT", Data: notify.Data{OperationID: order, Subject: "alice", TargetKey: "billing"}}}); err != nil {
		t.Fatal(err)
	}
	evs, err := st.OutboxClaim(ctx, "test", time.Minute, 100)
	if err != nil || len(evs) == 0 {
		t.Fatalf("claim: %v %v", evs, err)
	}
	for _, e := range evs {
		if e.OrderKey == order {
			if ok, err := st.OutboxFinish(ctx, e.Row, "test", false, true, 0, "webhook:audit: 500 Internal Server Error"); err != nil || !ok {
				t.Fatalf("dead letter: %v %v", ok, err)
			}
			return e.EventID
		}
	}
	t.Fatalf("no event of %s claimed", order)
	return ""
}

// TestOpsNotifications: an operator sees the outbox's depth, its dead
// letters in words with what failed, and the channels a 410 turned off;
// a replay makes a dead letter due again (once: a second is 404); a
// channel is turned back on; people without ops.* are refused; every
// write is audited.
func TestOpsNotifications(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withNotifications())
		ctx := t.Context()
		id := deadLetter(t, st, "ops-n-1")
		if err := st.OutboxDisableChannel(ctx, "webhook:audit", "410 Gone"); err != nil {
			t.Fatal(err)
		}

		got := answered(t, w, req{method: "GET", path: "/ops/notifications", user: "olivia"}, 200, "OK")
		if got.data["dead"].(float64) != 1 {
			t.Fatalf("dead %v", got.data)
		}
		dl := got.data["deadLetters"].([]any)[0].(map[string]any)
		if dl["eventId"] != id || dl["summary"] != "Access of alice to billing is in effect." || dl["lastError"] != "webhook:audit: 500 Internal Server Error" {
			t.Fatalf("dead letter %v", dl)
		}
		ch := got.data["disabledChannels"].([]any)[0].(map[string]any)
		if ch["channel"] != "webhook:audit" || ch["reason"] != "410 Gone" {
			t.Fatalf("disabled %v", ch)
		}
		answered(t, w, req{method: "GET", path: "/ops/notifications?limit=0", user: "olivia"}, 400, "INVALID_ARGUMENT")
		answered(t, w, req{method: "GET", path: "/ops/notifications", user: "alice"}, 403, "ACCESS_DENIED")

		answered(t, w, req{method: "POST", path: "/ops/notifications/" + id + "/replay", user: "alice"}, 403, "ACCESS_DENIED")
		answered(t, w, req{method: "POST", path: "/ops/notifications/" + id + "/replay", user: "olivia"}, 200, "OK")
		answered(t, w, req{method: "POST", path: "/ops/notifications/" + id + "/replay", user: "olivia"}, 404, "NOT_FOUND")
		stats, err := st.OutboxStats(ctx)
		if err != nil || stats.Dead != 0 || stats.Pending != 1 {
			t.Fatalf("after the replay: %+v %v", stats, err)
		}
		answered(t, w, req{method: "POST", path: "/ops/notifications/channels/webhook:audit/enable", user: "olivia"}, 200, "OK")
		answered(t, w, req{method: "POST", path: "/ops/notifications/channels/webhook:audit/enable", user: "olivia"}, 404, "NOT_FOUND")
		off, err := st.OutboxDisabledChannels(ctx)
		if err != nil || len(off) != 0 {
			t.Fatalf("still off: %v %v", off, err)
		}
		recs, err := st.AuditListByResource(ctx, id, 10)
		if err != nil || len(recs) != 2 || recs[0].Actor != "olivia" || recs[0].Outcome != "OK" || recs[1].Outcome != "NOT_FOUND" {
			t.Fatalf("both replays are audited, with their outcomes: %+v %v", recs, err)
		}
	})
}
