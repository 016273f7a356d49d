package httpapi

import (
	"testing"

	"changeflow/internal/notify"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// withPreferences wires the preference routes over the world's store.
func withPreferences() worldOpt {
	return func(w *bizWorld, d *Deps) { d.Business.Preferences = w.st }
}

// answered is w.do(r) checked by want.
func answered(t *testing.T, w *bizWorld, r req, status int, code string) resp {
	t.Helper()
	out := w.do(r)
	out.want(t, status, code)
	return out
}

// prefsOf is the enabled/locked pair of every kind in an answer.
func prefsOf(t *testing.T, data map[string]any) map[notify.Kind][2]bool {
	t.Helper()
	out := map[notify.Kind][2]bool{}
	list, _ := data["preferences"].([]any)
	for _, p := range list {
		m := p.(map[string]any)
		out[notify.Kind(m["kind"].(string))] = [2]bool{m["enabled"].(bool), m["locked"].(bool)}
	}
	if len(out) != len(notify.PersonalKinds) {
		t.Fatalf("%d kinds answered, want %d: %v", len(out), len(notify.PersonalKinds), data)
	}
	return out
}

// TestNotificationPreferences: a person reads and saves their own
// choices; a safety kind stays on unless the operator allows turning it
// off; every bad entry is named and nothing is saved; nobody reads
// another's; each save is audited.
func TestNotificationPreferences(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withPreferences())
		const path = "/api/notifications/preferences"
		got := answered(t, w, req{method: "GET", path: path, user: "alice"}, 200, "OK")
		for k, v := range prefsOf(t, got.data) {
			if !v[0] || v[1] != k.Safety() {
				t.Errorf("%s starts enabled %v locked %v", k, v[0], v[1])
			}
		}

		saved := answered(t, w, req{method: "PUT", path: path, user: "alice", body: `{"request.submitted": false, "request.approved": false}`}, 200, "OK")
		if p := prefsOf(t, saved.data); p[notify.KindRequestSubmitted][0] || p[notify.KindRequestApproved][0] || !p[notify.KindRequestInEffect][0] {
			t.Fatalf("after saving: %v", p)
		}
		again := answered(t, w, req{method: "PUT", path: path, user: "alice", body: `{"request.approved": true}`}, 200, "OK")
		if p := prefsOf(t, again.data); p[notify.KindRequestSubmitted][0] || !p[notify.KindRequestApproved][0] {
			t.Fatalf("a second save keeps what it does not name: %v", p)
		}

		// Bad entries: each named, nothing saved (request.in_effect stays on).
		bad := answered(t, w, req{method: "PUT", path: path, user: "alice",
			body: `{"request.in_effect": false, "access.expiring": false, "batch.blocked": false, "request.rejected": "no"}`}, 400, "INVALID_ARGUMENT")
		named := map[string]bool{}
		for _, f := range bad.data["fields"].([]any) {
			named[f.(map[string]any)["field"].(string)] = true
		}
		for _, f := range []string{"access.expiring", "batch.blocked", "request.rejected"} {
			if !named[f] {
				t.Errorf("the refusal does not name %s: %s", f, bad.raw)
			}
		}
		answered(t, w, req{method: "PUT", path: path, user: "alice", body: `{}`}, 400, "INVALID_ARGUMENT")
		answered(t, w, req{method: "PUT", path: path, user: "alice", body: `[1]`}, 400, "INVALID_ARGUMENT")
		if p := prefsOf(t, answered(t, w, req{method: "GET", path: path, user: "alice"}, 200, "OK").data); !p[notify.KindRequestInEffect][0] {
			t.Fatal("a refused save changed something")
		}

		// Another person's choices are their own.
		if p := prefsOf(t, answered(t, w, req{method: "GET", path: path, user: "bob"}, 200, "OK").data); !p[notify.KindRequestSubmitted][0] {
			t.Fatal("bob sees alice's choice")
		}
		answered(t, w, req{method: "GET", path: path}, 401, "UNAUTHENTICATED")

		// The operator allows turning safety messages off.
		w.load(map[string]any{"notify.allowSafetyOptOut": true})
		off := answered(t, w, req{method: "PUT", path: path, user: "alice", body: `{"access.expiring": false}`}, 200, "OK")
		if p := prefsOf(t, off.data); p[notify.KindAccessExpiring] != [2]bool{false, false} {
			t.Fatalf("expiring with opting out allowed: %v", p[notify.KindAccessExpiring])
		}

		var audits int
		if err := st.DB().QueryRowContext(t.Context(),
			"SELECT COUNT(*) FROM audit_log WHERE action = ? AND actor = 'alice'", preferencesAuditAction).Scan(&audits); err != nil {
			t.Fatal(err)
		}
		if audits != 6 {
			t.Fatalf("%d audited saves, want 6 (refusals too)", audits)
		}
	})
}
