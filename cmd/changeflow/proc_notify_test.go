package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// procHookSecret signs the process tests' webhooks (a secret of their
// own: serve outside --local refuses the simulators' published one).
const procHookSecret = "whsec_cHJvY2Vzcy10ZXN0LXdlYmhvb2stc2VjcmV0LTAxMjM0NQ=="

// hookEnv is the CHANGEFLOW_ setting that sends an instance's
// notifications to the simulator process's receiver name.
func hookEnv(sim *simProc, name string) string {
	raw, _ := json.Marshal([]map[string]string{{"name": name, "url": sim.base + "/hooks/" + name, "secret": procHookSecret}})
	return config.EnvName(config.KeyNotifyWebhooks) + "=" + string(raw)
}

// hookDelivery is one post the simulator's receiver got.
type hookDelivery struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Verified  bool   `json:"verified"`
	Duplicate bool   `json:"duplicate"`
	Status    int    `json:"status"`
}

func hookDeliveries(t *testing.T, sim *simProc, name string) []hookDelivery {
	t.Helper()
	var out struct {
		Items []hookDelivery `json:"items"`
	}
	sim.must(t, http.MethodGet, "/hooks/_control/deliveries?name="+name, nil, &out)
	return out.Items
}

// outboxEvents are the outbox's events, oldest first.
func outboxEvents(t *testing.T, st *store.Store) []store.OutboxEvent {
	t.Helper()
	var out []store.OutboxEvent
	rows, err := st.DB().QueryContext(t.Context(), "SELECT DISTINCT operation_id FROM outbox_event WHERE operation_id IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		evs, err := st.OutboxEventsOf(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
	}
	return out
}

// TestServeKill9BetweenDeliveringANotificationAndItsRecord: an instance
// posts a request's first event to a webhook, the receiver takes it and
// holds its answer, and the instance is killed -9 before it can record
// the delivery. The next instance, once the dead one's lease ran out,
// posts the same event again with the same id — the receiver sees it as
// a duplicate of what it had — and records it delivered: at least once,
// never under a new id.
func TestServeKill9BetweenDeliveringANotificationAndItsRecord(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "")
	sim := w.sim
	sim.must(t, http.MethodPut, "/hooks/_control/receivers/crash", map[string]any{"secret": procHookSecret}, nil)
	sim.must(t, http.MethodPut, "/hooks/_control/faults", map[string]any{"delayNext": map[string]any{"count": 1, "delayMs": 60000, "name": "crash"}}, nil)
	env := []string{hookEnv(sim, "crash"), config.EnvName(config.KeyNotifyInterval) + "=100ms"}

	a := w.next(env...)
	a.submit(t, "alice", "op-notify", "solo")
	// The post has arrived and is held: the fault was taken.
	waitFor(t, 20*time.Second, "the receiver to hold the first post", func() bool {
		var f struct {
			DelayNext struct {
				Count int `json:"count"`
			} `json:"delayNext"`
		}
		sim.must(t, http.MethodGet, "/hooks/_control/faults", nil, &f)
		return f.DelayNext.Count == 0
	})
	evs, err := w.st.OutboxEventsOf(t.Context(), "op-notify")
	if err != nil || len(evs) == 0 || evs[0].Kind != "request.submitted" || evs[0].Status != store.OutboxPending {
		t.Fatalf("the submission's event, not yet recorded: %+v %v", evs, err)
	}
	first := evs[0].EventID
	a.kill9(t)
	past, arg := w.st.Dialect().NowMinus(time.Second)
	if _, err := w.st.DB().ExecContext(context.WithoutCancel(t.Context()),
		"UPDATE outbox_event SET lease_until = "+past+" WHERE lease_owner = ?", arg, a.id); err != nil {
		t.Fatal(err)
	}

	w.next(env...)
	waitFor(t, 30*time.Second, "the event delivered by the next instance", func() bool {
		evs, err := w.st.OutboxEventsOf(t.Context(), "op-notify")
		return err == nil && len(evs) > 0 && evs[0].Status == store.OutboxDone
	})
	var got []hookDelivery
	for _, d := range hookDeliveries(t, sim, "crash") {
		if d.ID == first {
			got = append(got, d)
		}
	}
	if len(got) != 2 || !got[0].Verified || !got[1].Verified || got[0].Duplicate || !got[1].Duplicate {
		t.Fatalf("deliveries of %s: %+v, want the held one and one duplicate, both verified", first, got)
	}
	evs, _ = w.st.OutboxEventsOf(t.Context(), "op-notify")
	if evs[0].EventID != first || evs[0].Attempts != 2 {
		t.Fatalf("the event after the crash: %+v", evs[0])
	}
}

// TestServeThreeInstancesDeliverEachNotificationOnce: three instances
// on one MariaDB take eight requests to "in effect"; every event the
// outbox holds reaches the webhook exactly once (no duplicate, none
// missing, each verified); four of the accesses are then near their end,
// and each gets exactly one expiry reminder however many instances scan.
func TestServeThreeInstancesDeliverEachNotificationOnce(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "")
	sim := w.sim
	sim.must(t, http.MethodPut, "/hooks/_control/receivers/three", map[string]any{"secret": procHookSecret}, nil)
	env := []string{hookEnv(sim, "three"), config.EnvName(config.KeyNotifyInterval) + "=100ms",
		config.EnvName(config.KeyNotifyReminderScanInterval) + "=1s"}
	// One on the world's port (the simulators call it back), two beside it.
	insts := []*serveProc{w.next(env...),
		startServeProc(t, w.dir, w.file, "inst-b", freePort(t), env...),
		startServeProc(t, w.dir, w.file, "inst-c", freePort(t), env...)}

	var ops []string
	for i := range 8 {
		op := fmt.Sprintf("op-three-%d", i)
		insts[i%3].submit(t, fmt.Sprintf("user-%d", i), op, "solo")
		ops = append(ops, op)
	}
	for _, op := range ops {
		w.untilBinding(domain.BindingApprovalSent, op)
		sim.approve(t, op)
	}
	w.untilBinding(domain.BindingValidated, ops...)

	// Four accesses end within a day, in effect for a week (their files
	// keep the real expiry, put back once the reminders are out).
	real := map[string]time.Time{}
	for _, op := range ops[:4] {
		b, err := w.st.BindingGetByOperation(t.Context(), op)
		if err != nil {
			t.Fatal(err)
		}
		real[op] = b.ExpiresAt
		soon, arg := w.st.Dialect().NowAdd(10 * time.Hour)
		weekAgo, arg2 := w.st.Dialect().NowAdd(-7 * 24 * time.Hour)
		if _, err := w.st.DB().ExecContext(t.Context(), "UPDATE binding SET expires_at = "+soon+" WHERE operation_id = ?", arg, op); err != nil {
			t.Fatal(err)
		}
		if _, err := w.st.DB().ExecContext(t.Context(), "UPDATE access_interval SET from_at = "+weekAgo+" WHERE operation_id = ?", arg2, op); err != nil {
			t.Fatal(err)
		}
	}
	want := 8*3 + 4 // submitted, approved, in effect; one reminder each
	waitFor(t, 60*time.Second, "every event delivered", func() bool {
		evs := outboxEvents(t, w.st)
		if len(evs) != want {
			return false
		}
		for _, e := range evs {
			if e.Status != store.OutboxDone {
				return false
			}
		}
		return true
	})
	// A few more scans by every instance write no second reminder.
	time.Sleep(3 * time.Second)
	evs := outboxEvents(t, w.st)
	if len(evs) != want {
		t.Fatalf("%d events, want %d", len(evs), want)
	}
	seen := map[string]int{}
	for _, d := range hookDeliveries(t, sim, "three") {
		if !d.Verified || d.Duplicate || d.Status != http.StatusOK {
			t.Fatalf("delivery %+v", d)
		}
		seen[d.ID]++
	}
	reminders := map[string]int{}
	for _, e := range evs {
		if seen[e.EventID] != 1 {
			t.Fatalf("%s %s of %s delivered %d times", e.EventID, e.Kind, e.OperationID, seen[e.EventID])
		}
		if e.Kind == "access.expiring" {
			reminders[e.OperationID]++
		}
	}
	if len(seen) != want || len(reminders) != 4 {
		t.Fatalf("%d delivered, %d reminded: %v", len(seen), len(reminders), reminders)
	}
	for op, n := range reminders {
		if n != 1 {
			t.Fatalf("%s reminded %d times", op, n)
		}
	}
	for op, at := range real {
		if _, err := w.st.DB().ExecContext(t.Context(), "UPDATE binding SET expires_at = ? WHERE operation_id = ?", w.st.Dialect().Time(at), op); err != nil {
			t.Fatal(err)
		}
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, ops)
}
