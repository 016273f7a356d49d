package main

import (
	"context"
	"fmt"
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
	const user = "alice"
	op := ""
	for attempt := 1; op == ""; attempt++ {
		if attempt > killWindowAttempts {
			t.Fatalf("in %d attempts the kill never landed between the key and the request's insert", killWindowAttempts)
		}
		op = killBetweenKeyAndInsert(t, w, user, fmt.Sprintf("op-key-died-%d", attempt))
	}
	ctx := context.WithoutCancel(t.Context())

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

// killWindowAttempts bounds killBetweenKeyAndInsert's tries. The window
// is the instance's lock wait (innodb_lock_wait_timeout, 10 s): on a
// loaded machine the test can see it too late, and then the instance has
// already answered 503 and released the key — a setup that missed, not a
// finding, so it is set up again with a fresh key.
const killWindowAttempts = 3

// killBetweenKeyAndInsert starts an instance and kills it -9 after it took
// user's key op (IN_FLIGHT, committed) and while its insert of the
// operation waits on a row the test's own uncommitted transaction holds
// under op; the test then rolls back, leaving what a crash there leaves.
// It returns op, or "" when the kill missed the window (the instance
// answered first, or released the key before it died).
func killBetweenKeyAndInsert(t *testing.T, w *crashWorld, user, op string) string {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	tx, err := w.st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status) VALUES (?, ?, 'solo', 1, 'APPROVE_FIRST', 10001)",
		op, user); err != nil {
		t.Fatal(err)
	}
	a := w.next()
	answered := make(chan string, 1)
	go func() { // answered by nobody unless the window is missed: a dies inside it
		code, body := a.submitOnce(user, op, "solo")
		answered <- fmt.Sprintf("%d %s", code, body)
	}()
	// Only this database's waits count: other tests share the server.
	const waiting = `SELECT COUNT(*) FROM information_schema.INNODB_TRX x
		JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id
		WHERE x.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()`
	inFlight := func() bool {
		return countSQL(t, w.st, "SELECT COUNT(*) FROM idempotency_record WHERE subject = ? AND idem_key = ? AND state = 'IN_FLIGHT'", user, op) == 1
	}
	deadline := time.Now().Add(30 * time.Second)
	for !(inFlight() && countSQL(t, w.st, waiting) >= 1) {
		select {
		case got := <-answered:
			t.Logf("%s: the instance answered (%s) before the kill: setting up again", op, got)
			a.kill9(t)
			return ""
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after 30s waiting for the key taken and the request's insert waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.kill9(t)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM operation WHERE operation_id = ?", op); n != 0 {
		t.Fatalf("%d operations stored: the kill was not between the two writes", n)
	}
	if !inFlight() {
		// The lock wait ran out between the check and the kill, and the
		// instance released the key: no crash state to recover from.
		t.Logf("%s: the key was released before the kill landed: setting up again", op)
		return ""
	}
	return op
}
