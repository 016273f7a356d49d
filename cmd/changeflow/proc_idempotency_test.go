package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
)

// TestServeKill9BetweenTakingAKeyAndStoringTheRequest (issue 12 item 4):
// a `changeflow serve` process is killed -9 after it took the caller's
// idempotency key (IN_FLIGHT, committed) and before the request was
// stored. The client's retries on the next instance get 409
// IDEMPOTENCY_IN_FLIGHT while the dead request's lease runs, and the
// status is 404; once the lease is over the retry takes the key over and
// the request goes through exactly once — not after idempotency.ttl.
//
// The hold between the two writes is the database's: the test's own
// transaction inserts (uncommitted) an operation row under the key, so
// the instance's OperationSubmit waits on that row's unique key until
// the kill; the test then rolls back, leaving what a crash there leaves.
func TestServeKill9BetweenTakingAKeyAndStoringTheRequest(t *testing.T) {
	t.Parallel()
	// A lease nobody waits for: the test ends it in the database (the
	// state waiting it out reaches), so a loaded machine cannot let it
	// run out before the first retry.
	w := newCrashWorld(t, "idempotency:\n  inFlightLease: 1h\n")
	sim := w.sim
	const op, user = "op-key-died", "alice"
	ctx := context.WithoutCancel(t.Context())

	tx, err := w.st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if _, err := tx.ExecContext(ctx, "INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status) VALUES (?, ?, 'solo', 1, 'APPROVE_FIRST', 10001)",
		op, user); err != nil {
		t.Fatal(err)
	}

	a := w.next()
	go a.submitOnce(user, op, "solo") // answered by nobody: a dies inside it
	waitFor(t, 20*time.Second, "the key taken and the request's insert waiting", func() bool {
		return countSQL(t, w.st, "SELECT COUNT(*) FROM idempotency_record WHERE subject = ? AND idem_key = ? AND state = 'IN_FLIGHT'", user, op) == 1 &&
			countSQL(t, w.st, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'") >= 1
	})
	a.kill9(t)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM operation WHERE operation_id = ?", op); n != 0 {
		t.Fatalf("%d operations stored: the kill was not between the two writes", n)
	}

	b := w.next()
	if code, body := b.submitOnce(user, op, "solo"); code != http.StatusConflict || !strings.Contains(body, "IDEMPOTENCY_IN_FLIGHT") {
		t.Fatalf("retry inside the lease = %d %s, want 409 IDEMPOTENCY_IN_FLIGHT", code, body)
	}
	if got := b.requestStatus(t, user, op); got != "" {
		t.Fatalf("status %q before the takeover, want none (404)", got)
	}
	past, arg := w.st.Dialect().NowMinus(time.Second)
	if _, err := w.st.DB().ExecContext(ctx, "UPDATE idempotency_record SET lease_until = "+past+" WHERE subject = ? AND idem_key = ?", arg, user, op); err != nil {
		t.Fatal(err)
	}
	if code, body := b.submitOnce(user, op, "solo"); code != http.StatusAccepted || !strings.Contains(body, `"code":"ACCEPTED"`) || !strings.Contains(body, op) {
		t.Fatalf("retry after the lease = %d %s, want 202 ACCEPTED %s", code, body, op)
	}
	if code, body := b.submitOnce(user, op, "solo"); code != http.StatusAccepted || !strings.Contains(body, "DUPLICATE_SUBMIT") {
		t.Fatalf("the next retry = %d %s, want the replay", code, body)
	}

	waitFor(t, 20*time.Second, "the approval form", func() bool { return len(sim.approvals(t, op)) == 1 })
	sim.approve(t, op)
	w.untilBinding(domain.BindingValidated, op)
	if got := b.requestStatus(t, user, op); got != "VALIDATED" {
		t.Fatalf("the API says %s, want VALIDATED", got)
	}
	w.doneOnce(op, sim.mrs(t)[0].IID)
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM operation WHERE subject = ?", user); n != 1 {
		t.Fatalf("%d requests for %s, want the one", n, user)
	}
}
