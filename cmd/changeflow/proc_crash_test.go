package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// crashLease is workflow.leaseDuration in the crash tests. A step's
// context ends at 90% of the lease after its claim, so the killed process
// must still be inside the step — in the held call — when the test has
// seen the remote write and kills it. With a 3 s lease that was not true
// on a loaded machine: a step whose calls before the held write took most
// of the 2.7 s (regenerate makes several) reached its deadline first, and
// the test found nothing in flight. So the lease is long enough that no
// load reaches the deadline, and the tests do not wait for it: kill
// (crashWorld.kill9) expires the dead instance's leases in the database
// right after the SIGKILL — the state the wait would reach — and the next
// instance resumes the step exactly as after a real expiry.
const crashLease = "60s"

// crashWorld is one crash test's world: a simulator process, a MariaDB
// database, and a serve configuration file; serve instances are started
// one after another on the same port (the simulator's callback URL).
type crashWorld struct {
	t    *testing.T
	dir  string
	st   *store.Store
	sim  *simProc
	file string
	port int
	n    int
}

func newCrashWorld(t *testing.T, extra string) *crashWorld {
	t.Helper()
	dsn, st := mariaDB(t)
	w := &crashWorld{t: t, dir: t.TempDir(), st: st, port: freePort(t)}
	w.sim = startSim(t, w.dir, []string{fmt.Sprintf("http://127.0.0.1:%d", w.port)})
	// Decisions by hand; a quick deployment; GitLab's asynchronous checks
	// shortened (their order and states are unchanged).
	w.sim.must(t, http.MethodPost, "/approval/_control/policy", map[string]any{"mode": "manual"}, nil)
	w.sim.must(t, http.MethodPost, "/deploy/_control/faults", map[string]any{"delayMs": 20}, nil)
	w.sim.must(t, http.MethodPut, "/gitlab/_control/settings",
		map[string]any{"mergeability_delay": "50ms", "pipeline_start_delay": "10ms", "pipeline_duration": "100ms"}, nil)
	w.file = filepath.Join(w.dir, "changeflow.yaml")
	writeConfig(t, w.file, procConfig(dsn, w.sim.base, `workflow:
  approveFirst: true
  leaseDuration: `+crashLease+`
reconcile:
  interval: 200ms
  minAge: 1s
  maxAge: 1h
targets:
  solo: {accessMode: OPEN, batching: false, maxDays: 30}
  grouped: {accessMode: OPEN, batching: true, maxDays: 30}
`+extra))
	return w
}

// next starts the next serve instance (inst-1, inst-2, …) on the world's
// port; env adds CHANGEFLOW_ variables for this instance only.
func (w *crashWorld) next(env ...string) *serveProc {
	w.t.Helper()
	w.n++
	return startServeProc(w.t, w.dir, w.file, fmt.Sprintf("inst-%d", w.n), w.port, env...)
}

func (w *crashWorld) op(id string) store.Operation {
	w.t.Helper()
	o, err := w.st.OperationGet(w.t.Context(), id)
	if err != nil {
		w.t.Fatalf("operation %s: %v", id, err)
	}
	return o
}

func (w *crashWorld) binding(id string) domain.BindingStatus {
	w.t.Helper()
	b, err := w.st.BindingGetByOperation(w.t.Context(), id)
	if err != nil {
		w.t.Fatalf("binding of %s: %v", id, err)
	}
	return b.Status
}

// untilBinding waits until every operation's binding is status. It fails
// at once on a failure state with nothing left to run (no action due, no
// lease): a batch's driver passes through CREATE_FAILED on its way to the
// settlement that re-admits it, so a failure state alone is not final.
func (w *crashWorld) untilBinding(status domain.BindingStatus, ids ...string) {
	w.t.Helper()
	for _, id := range ids {
		waitFor(w.t, 60*time.Second, id+" "+string(status), func() bool {
			b := w.binding(id)
			switch b {
			case status:
				return true
			case domain.BindingCreateFailed, domain.BindingHandleFailed, domain.BindingRejected:
				// "Stopped" is judged on one read of both rows: reading the
				// binding and then the operation once saw a settlement
				// re-admit the request in between (binding still
				// CREATE_FAILED, operation already CREATE_ADMITTED with
				// nothing due) and called a moving request stopped.
				if n := countSQL(w.t, w.st, "SELECT COUNT(*) FROM binding b JOIN operation o ON o.operation_id = b.operation_id"+
					" WHERE o.operation_id = ? AND b.status = ? AND o.due_at IS NULL AND o.lease_owner IS NULL", id, string(b)); n == 1 {
					o := w.op(id)
					w.t.Fatalf("%s stopped: %s / %s (next action %q, last error %q), want %s",
						id, domain.StepStatus(o.Step), b, o.NextAction, o.LastError, status)
				}
			}
			return false
		})
	}
}

// inFlight asserts that s holds a live lease on a row whose next action is
// action: the step is running in s, between its remote write (which the
// test just saw) and its own write. A lease owner is the instance id and
// a per-claim token ("inst-1#…").
func (w *crashWorld) inFlight(s *serveProc, action string) {
	w.t.Helper()
	n := countSQL(w.t, w.st, "SELECT COUNT(*) FROM operation WHERE next_action = ? AND (lease_owner = ? OR lease_owner LIKE ?) AND lease_expires_at > "+
		w.st.Dialect().Now(), action, s.id, s.id+"#%")
	if n != 1 {
		var rows []string
		r, err := w.st.DB().QueryContext(w.t.Context(), "SELECT operation_id, step_status, COALESCE(next_action, ''), COALESCE(lease_owner, ''), "+
			"COALESCE(CAST(lease_expires_at AS CHAR), ''), CAST("+w.st.Dialect().Now()+" AS CHAR) FROM operation")
		if err == nil {
			for r.Next() {
				var a, b, c, d, e, f string
				_ = r.Scan(&a, &b, &c, &d, &e, &f)
				rows = append(rows, strings.Join([]string{a, b, c, d, e, f}, " "))
			}
			r.Close()
		}
		w.t.Fatalf("want %s in flight on %s (one leased row), found %d: %v", action, s.id, n, rows)
	}
}

// kill9 SIGKILLs instance s, then expires every lease it held — the
// expiry and the due time, which a claim sets to the expiry — what waiting
// out crashLease would do, without the wait (see crashLease).
func (w *crashWorld) kill9(s *serveProc) {
	w.t.Helper()
	s.kill9(w.t)
	w.expireLeases(s)
}

// expireLeases ends every lease instance s (dead) held, as of the
// database clock.
func (w *crashWorld) expireLeases(s *serveProc) {
	w.t.Helper()
	past, arg := w.st.Dialect().NowMinus(time.Second)
	if _, err := w.st.DB().ExecContext(context.WithoutCancel(w.t.Context()),
		"UPDATE operation SET lease_expires_at = "+past+", due_at = "+past+" WHERE lease_owner = ? OR lease_owner LIKE ?",
		arg, arg, s.id, s.id+"#%"); err != nil {
		w.t.Fatalf("expire the leases of %s: %v", s.id, err)
	}
}

// killPoint is where a crash test kills an instance: inside a step, after
// the step's remote write took effect and before its own write.
type killPoint struct {
	// method and path name the GitLab call that is applied and whose
	// answer is then held for a minute (simProc.holdGitLab), armed before
	// the instance starts. Empty when start arms the hold itself: a poll,
	// whose read may only be held once the step is the one that runs.
	method, path string
	// env adds CHANGEFLOW_ variables for the new instance (w.next).
	env []string
	// start, when set, runs once the instance is up: what makes the step
	// run (a submission, a manual scan), or the wait for it.
	start func(s *serveProc)
	// what names the remote write; applied reports that it took effect.
	what    string
	applied func() bool
	// action is the step the instance must be inside when it is killed: a
	// live lease of it on a row whose next action is action (inFlight).
	// Empty only where no operation lease is held — a batch round's MR
	// creation —, for which held checks what the round has written.
	action string
	held   func(s *serveProc)
}

// killInside is every crash test's kill-and-resume block: it holds the
// answer of p's GitLab call, starts the next instance, waits until the
// call's write took effect, checks the instance is inside the step, kills
// it -9 (its leases expired at once, see kill9) and clears GitLab's
// faults, so the instance the test starts next resumes the step. It
// returns the killed instance.
func (w *crashWorld) killInside(p killPoint) *serveProc {
	t, sim := w.t, w.sim
	t.Helper()
	if p.path != "" {
		sim.holdGitLab(t, p.method, p.path)
	}
	s := w.next(p.env...)
	if p.start != nil {
		p.start(s)
	}
	waitFor(t, 30*time.Second, p.what, p.applied)
	if p.action != "" {
		w.inFlight(s, p.action)
	}
	if p.held != nil {
		p.held(s)
	}
	w.kill9(s)
	sim.clearGitLabFaults(t)
	return s
}

// killInsideDeployCallback kills s (running, deployments paused) inside
// the handling of MR iid's deploy callback: it holds opID's row lock,
// resumes the deployments, waits until the callback is recorded (the
// inbox), checks that the flip — which waits for the lock — has not
// happened (opID's binding is still before), kills s -9 and releases the
// lock. The next instance finds the recorded callback by
// reconciliation's exact match.
func (w *crashWorld) killInsideDeployCallback(s *serveProc, opID string, iid int64, before domain.BindingStatus) {
	t := w.t
	t.Helper()
	lock := w.lockOperation(opID)
	w.sim.must(t, http.MethodPost, "/deploy/_control/resume", nil, nil)
	waitFor(t, 30*time.Second, "the deploy callback recorded", func() bool {
		return countSQL(t, w.st, "SELECT COUNT(*) FROM deploy_callback WHERE project_id = 1 AND mr_iid = ?", iid) == 1
	})
	if got := w.binding(opID); got != before {
		t.Fatalf("binding %s while the flip is blocked, want %s", got, before)
	}
	s.kill9(t)
	lock.release()
	w.expireLeases(s) // after the release: the row lock held the update
}

// holdPipelines makes the next check pipeline GitLab starts run until
// passPipeline: a step that polls it keeps polling.
func (w *crashWorld) holdPipelines() {
	w.t.Helper()
	w.sim.must(w.t, http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil)
}

// passPipeline lets MR iid's running check pipeline pass.
func (w *crashWorld) passPipeline(iid int64) {
	w.t.Helper()
	w.sim.must(w.t, http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"mr_iid": iid, "outcome": "pass"}, nil)
}

// insidePoll is the kill point inside a poll of MR iid's check pipeline
// (action: poll_pipeline or batch_poll_pipeline), whose pipeline
// holdPipelines kept running: once the instance has the poll scheduled,
// the next read of the MR is held, and the instance is killed while that
// read's answer is held. The poll only reads, so "its remote write took
// effect" is "GitLab answered its read": the armed hold is used up.
func (w *crashWorld) insidePoll(action string) killPoint {
	t, sim := w.t, w.sim
	return killPoint{
		start: func(*serveProc) {
			waitFor(t, 60*time.Second, action+" scheduled", func() bool {
				return countSQL(t, w.st, "SELECT COUNT(*) FROM operation WHERE next_action = ?", action) == 1
			})
			sim.holdGitLab(t, http.MethodGet, "/projects/*/merge_requests/*")
		},
		what:    "the poll's read of the MR answered and held",
		applied: func() bool { return sim.gitLabFaultsArmed(t) == 0 },
		action:  action,
	}
}

// insideCreateMR is the kill point inside create_mr of the world's first
// MR: the MR opened, its answer held.
func (w *crashWorld) insideCreateMR() killPoint {
	return killPoint{
		method: http.MethodPost, path: "/projects/*/merge_requests",
		what:    "the MR",
		applied: func() bool { return len(w.sim.mrs(w.t)) == 1 },
		action:  flow.ActionCreateMR,
	}
}

// insideRoundMR is the kill point inside a batch round's MR creation of
// the world's first MR: the batch claimed and committed, the MR opened,
// its answer held — a RUNNING batch with no MR recorded. A round holds
// no operation lease, so the batch row is what is checked.
func (w *crashWorld) insideRoundMR() killPoint {
	t := w.t
	return killPoint{
		method: http.MethodPost, path: "/projects/*/merge_requests",
		what:    "the batch MR",
		applied: func() bool { return len(w.sim.mrs(t)) == 1 },
		held: func(*serveProc) {
			if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch WHERE status = 1 AND (mr_iid IS NULL OR mr_iid = 0)"); n != 1 {
				t.Fatalf("want the claimed batch without its MR recorded, found %d", n)
			}
		},
	}
}

// insideApprove is the kill point inside approve or batch_approve
// (action) of MR iid: the first bot's approval applied, its answer held.
func (w *crashWorld) insideApprove(iid int64, action string) killPoint {
	return killPoint{
		method: http.MethodPost, path: "/projects/*/merge_requests/*/approve",
		what:    "the first bot approval",
		applied: func() bool { return len(w.sim.approvedBy(w.t, iid)) == 1 },
		action:  action,
	}
}

// insideMerge is the kill point inside merge or batch_merge (action) of
// the world's one MR: merged, the answer held.
func (w *crashWorld) insideMerge(action string) killPoint {
	return killPoint{
		method: http.MethodPut, path: "/projects/*/merge_requests/*/merge",
		what:    "the merge",
		applied: func() bool { return w.sim.mrs(w.t)[0].State == "merged" },
		action:  action,
	}
}

// insideSettlementClose is the kill point inside batch_settle of a batch
// whose pipeline failed, the world's first MR: the MR closed, the answer
// of the close held.
func (w *crashWorld) insideSettlementClose() killPoint {
	return killPoint{
		method: http.MethodPut, path: "/projects/*/merge_requests/*",
		what: "the failed batch's MR closed",
		applied: func() bool {
			mrs := w.sim.mrs(w.t)
			return len(mrs) == 1 && mrs[0].State == "closed"
		},
		action: flow.ActionBatchSettle,
	}
}

// rowLock is a test transaction holding an operation's row lock: every
// workflow write to the request (a callback's application, a flip) waits
// for it.
type rowLock struct {
	t  *testing.T
	tx *sql.Tx
}

func (w *crashWorld) lockOperation(operationID string) *rowLock {
	w.t.Helper()
	tx, err := w.st.DB().BeginTx(w.t.Context(), nil)
	if err != nil {
		w.t.Fatal(err)
	}
	l := &rowLock{t: w.t, tx: tx}
	w.t.Cleanup(func() { _ = tx.Rollback() })
	var locked string
	if err := tx.QueryRowContext(w.t.Context(), "SELECT operation_id FROM operation WHERE operation_id = ? FOR UPDATE", operationID).Scan(&locked); err != nil {
		w.t.Fatal(err)
	}
	return l
}

func (l *rowLock) release() {
	l.t.Helper()
	if err := l.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		l.t.Fatal(err)
	}
}

// flips counts the step-history rows that moved operationID's binding to
// VALIDATED: the one flip.
func (w *crashWorld) flips(operationID string) int {
	w.t.Helper()
	steps, err := w.st.OperationStepList(w.t.Context(), operationID)
	if err != nil {
		w.t.Fatal(err)
	}
	n := 0
	for _, s := range steps {
		if s.ToBinding == domain.BindingValidated {
			n++
		}
	}
	return n
}

// untilMetric waits until s counts want validated requests (the metric
// follows the flip's commit), then asserts it is exactly want.
func untilMetric(t *testing.T, s *serveProc, want int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%s to count %d validated", s.id, want), func() bool { return s.validatedMetric(t) >= want })
	if got := s.validatedMetric(t); got != want {
		t.Fatalf("%s counts %d validated requests, want exactly %d", s.id, got, want)
	}
}

// TestServeKill9AtEachStepOfASingleRequest runs one approve-first request
// of a non-batching target through real `changeflow serve` processes on
// MariaDB and a `changeflow sim` process, and kill -9s the serve process
// inside every step in turn, each time after the step's remote write took
// effect and before its own write: submit_approval (the form created, the
// answer held), create_mr (the MR opened, the answer held), approve (the
// first bot's approval applied, the answer held), merge (merged, the answer
// held) and the deploy callback's handling (recorded, the flip blocked on a
// row lock the test holds). Each time the next instance resumes once the
// lease expired — or, for the callback, reconciliation's exact match finds
// the recorded callback — and the request ends VALIDATED with one MR, one
// commit, one approval per bot, one approval form, one flip and one count
// on the surviving instance's success metric.
func TestServeKill9AtEachStepOfASingleRequest(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "")
	sim := w.sim
	const op, user = "op-solo", "alice"

	// 1. submit_approval: the form is created, its answer held.
	sim.must(t, http.MethodPost, "/approval/_control/faults",
		map[string]any{"holdResponseNext": map[string]any{"count": 1, "delayMs": 60000}}, nil)
	a := w.next()
	a.submit(t, user, op, "solo")
	waitFor(t, 20*time.Second, "the approval form", func() bool { return len(sim.approvals(t, op)) == 1 })
	w.inFlight(a, flow.ActionSubmitApproval)
	w.kill9(a)
	sim.must(t, http.MethodDelete, "/approval/_control/faults", nil, nil)

	// 2. The approval callback: recorded (the inbox), then its application
	// waits for the operation's row lock, which the test holds; killed
	// there. The sender's redelivery is a DUPLICATE of the recorded one.
	b := w.next()
	w.untilBinding(domain.BindingApprovalSent, op) // the resumed submit_approval found the form
	lock := w.lockOperation(op)
	sim.approve(t, op)
	waitFor(t, 20*time.Second, "the approval callback recorded", func() bool {
		return countSQL(t, w.st, "SELECT COUNT(*) FROM approval_callback WHERE operation_id = ?", op) == 1
	})
	if got := w.binding(op); got != domain.BindingApprovalSent {
		t.Fatalf("binding %s while the callback's application is blocked, want APPROVAL_SENT", got)
	}
	b.kill9(t)
	lock.release()
	w.expireLeases(b) // after the release: the row lock held the update

	// 3. create_mr: the next instance applies the recorded decision from
	// the inbox; the MR is opened, its answer held.
	w.killInside(w.insideCreateMR())
	iid := sim.mrs(t)[0].IID

	// 4. approve: the first bot's approval applied, its answer held.
	w.killInside(w.insideApprove(iid, flow.ActionApprove))

	// 5. merge: merged, the answer held. Deployments queue meanwhile so
	// the deploy callback comes in step 6.
	sim.must(t, http.MethodPost, "/deploy/_control/pause", nil, nil)
	w.killInside(w.insideMerge(flow.ActionMerge))

	// 6. The deploy callback: recorded (the inbox), then the flip waits for
	// the operation's row lock, which the test holds; killed there.
	f := w.next()
	w.untilBinding(domain.BindingMerged, op)
	w.killInsideDeployCallback(f, op, iid, domain.BindingMerged)

	// 7. The last instance finishes: VALIDATED, everything once.
	g := w.next()
	w.untilBinding(domain.BindingValidated, op)
	if got := g.requestStatus(t, user, op); got != "VALIDATED" {
		t.Fatalf("the API says %s, want VALIDATED", got)
	}
	untilMetric(t, g, 1)
	w.doneOnce(op, iid)
}

// doneOnce checks that a single-request MR's request went through
// everything exactly once across the killed instances: one flip to
// VALIDATED, one MR (merged), one commit for it on main, each bot's
// approval once, one approval form, and its entry once in the binding
// file on main.
func (w *crashWorld) doneOnce(op string, iid int64) {
	t, sim := w.t, w.sim
	t.Helper()
	if n := w.flips(op); n != 1 {
		t.Fatalf("%d flips to VALIDATED in the step history, want 1", n)
	}
	if mrs := sim.mrs(t); len(mrs) != 1 || mrs[0].State != "merged" {
		t.Fatalf("MRs %+v, want one, merged", mrs)
	}
	if n := sim.commitsOnMain(t, op); n != 1 {
		t.Fatalf("%d commits for %s on main, want 1", n, op)
	}
	if got := sim.approvedBy(t, iid); !sameSet(got, []string{"approver-1", "approver-2"}) {
		t.Fatalf("approved by %v, want each bot once", got)
	}
	if n := len(sim.approvals(t, op)); n != 1 {
		t.Fatalf("%d approval forms, want 1", n)
	}
	if n := strings.Count(sim.fileOnMain(t, "solo"), op); n != 1 {
		t.Fatalf("the binding file on main names %s %d times, want 1", op, n)
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, []string{op})
}

// TestServeKill9AtEachStepOfABatch: three approved requests of a batching
// target, and a `changeflow serve` process killed -9 inside the round's MR
// creation (the MR opened, the answer held: the batch is claimed but has
// no MR recorded), inside batch_approve (the first bot's approval applied)
// and inside batch_merge (merged). The next instance's round finishes
// building the dead round's batch once batch.resumeAfter passed, adopting
// its MR; the batch steps resume once their lease expired. Every member
// ends VALIDATED in the one SUCCEEDED batch, with one MR, one commit
// holding every member, one approval per bot, one approval form per
// member and one count each on the surviving instance's success metric.
func TestServeKill9AtEachStepOfABatch(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "batch:\n  interval: 200ms\n  maxRequests: 10\n  resumeAfter: 1s\n")
	sim := w.sim
	ops := []string{"op-b1", "op-b2", "op-b3"}
	users := []string{"alice", "bob", "carol"}

	// 0. An instance without rounds gathers every approved member in the
	// waiting set, so the killed round claims all.
	w.gatherAdmitted("grouped", ops, users)

	// 1. The round's MR creation: claimed, committed, the MR opened and its
	// answer held.
	w.killInside(w.insideRoundMR())
	iid := sim.mrs(t)[0].IID

	// 2. batch_approve: the first bot's approval applied, answer held.
	w.killInside(w.insideApprove(iid, flow.ActionBatchApprove))

	// 3. batch_merge: merged, answer held.
	w.killInside(w.insideMerge(flow.ActionBatchMerge))

	// 4. The last instance finishes.
	d := w.next()
	w.untilBinding(domain.BindingValidated, ops...)
	untilMetric(t, d, len(ops))
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch"); n != 1 {
		t.Fatalf("%d batches, want the one the dead round claimed", n)
	}
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch WHERE status = 2 AND mr_iid = ?", iid); n != 1 {
		t.Fatalf("the batch of MR !%d did not succeed", iid)
	}
	if mrs := sim.mrs(t); len(mrs) != 1 {
		t.Fatalf("%d MRs, want 1: %+v", len(mrs), mrs)
	}
	if got := sim.approvedBy(t, iid); !sameSet(got, []string{"approver-1", "approver-2"}) {
		t.Fatalf("approved by %v, want each bot once", got)
	}
	file := sim.fileOnMain(t, "grouped")
	for i, op := range ops {
		if got := d.requestStatus(t, users[i], op); got != "VALIDATED" {
			t.Fatalf("the API says %s for %s, want VALIDATED", got, op)
		}
		if n := w.flips(op); n != 1 {
			t.Fatalf("%s: %d flips to VALIDATED, want 1", op, n)
		}
		if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch_history WHERE operation_id = ?", op); n != 1 {
			t.Fatalf("%s is in %d batches' history, want 1", op, n)
		}
		if n := sim.commitsOnMain(t, op); n != 1 {
			t.Fatalf("%d commits for %s on main, want 1", n, op)
		}
		if n := len(sim.approvals(t, op)); n != 1 {
			t.Fatalf("%s: %d approval forms, want 1", op, n)
		}
		if n := strings.Count(file, op); n != 1 {
			t.Fatalf("the binding file on main names %s %d times, want 1", op, n)
		}
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, ops)
}

// TestServeKill9AtEachStepOfALegacyRequest: the legacy flow (the MR
// first, the approval with ext.mrId while the MR waits) through real serve
// processes, killed -9 inside create_mr (the MR opened, the answer held),
// inside submit_approval (the form carrying the MR created, the answer
// held), inside the approval callback's application (recorded, blocked on
// the row lock) and inside approve (the first bot's approval applied).
// The inbox replay reads the flow from the database (the request has its
// MR: legacy → approve). The request ends VALIDATED with one MR, one
// commit, one form, one approval per bot, one flip and one metric count.
func TestServeKill9AtEachStepOfALegacyRequest(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "")
	sim := w.sim
	const op, user = "op-legacy", "bob"
	legacy := "CHANGEFLOW_WORKFLOW_APPROVEFIRST=false"

	// 1. create_mr: the MR opened, its answer held.
	first := w.insideCreateMR()
	first.env = []string{legacy}
	first.start = func(a *serveProc) { a.submit(t, user, op, "solo") }
	w.killInside(first)
	iid := sim.mrs(t)[0].IID

	// 2. submit_approval: the form (with ext.mrId) created, its answer held.
	sim.must(t, http.MethodPost, "/approval/_control/faults",
		map[string]any{"holdResponseNext": map[string]any{"count": 1, "delayMs": 60000}}, nil)
	b := w.next(legacy)
	waitFor(t, 30*time.Second, "the approval form", func() bool { return len(sim.approvals(t, op)) == 1 })
	if ext, _ := sim.approvals(t, op)[0]["ext"].(map[string]any); fmt.Sprint(ext["mrId"]) != fmt.Sprint(iid) {
		t.Fatalf("the legacy form's ext = %v, want mrId %d", ext, iid)
	}
	w.inFlight(b, flow.ActionSubmitApproval)
	w.kill9(b)
	sim.must(t, http.MethodDelete, "/approval/_control/faults", nil, nil)

	// 3. The approval callback: recorded, its application blocked; killed.
	c := w.next(legacy)
	w.untilBinding(domain.BindingApprovalSent, op)
	lock := w.lockOperation(op)
	sim.approve(t, op)
	waitFor(t, 20*time.Second, "the approval callback recorded", func() bool {
		return countSQL(t, w.st, "SELECT COUNT(*) FROM approval_callback WHERE operation_id = ?", op) == 1
	})
	c.kill9(t)
	lock.release()
	w.expireLeases(c) // after the release: the row lock held the update

	// 4. approve: the inbox replay (legacy: the MR is there) starts it; the
	// first bot's approval applied, its answer held.
	approve := w.insideApprove(iid, flow.ActionApprove)
	approve.env = []string{legacy}
	w.killInside(approve)

	// 5. The last instance finishes.
	e := w.next(legacy)
	w.untilBinding(domain.BindingValidated, op)
	untilMetric(t, e, 1)
	if got := e.requestStatus(t, user, op); got != "VALIDATED" {
		t.Fatalf("the API says %s, want VALIDATED", got)
	}
	w.doneOnce(op, iid)
}

// TestServeKill9InsideRegenerate: a legacy-flow request whose MR's rebase
// conflicts (a change on main rewrote its binding file) is regenerated on
// main's head; the serve process is killed -9 right after GitLab applied
// the forced commit (its answer held), so the commit exists but the step
// never recorded it. The next instance, once the lease expired, reads the
// branch first, finds its head already is this request's edit on main's
// head and commits nothing: the MR merges at exactly the dead instance's
// commit, with one regeneration in the history, one MR, one commit for
// the request on main and one count on the metric.
func TestServeKill9InsideRegenerate(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "")
	sim := w.sim
	const op, user = "op-regen", "alice"
	legacy := "CHANGEFLOW_WORKFLOW_APPROVEFIRST=false"

	a := w.next(legacy)
	a.submit(t, user, op, "solo")
	w.untilBinding(domain.BindingApprovalSent, op) // legacy: the MR exists while the approval waits
	iid := w.op(op).MRIID
	sim.must(t, http.MethodPost, fmt.Sprintf("/gitlab/_control/projects/1/merge_requests/%d/conflict", iid), map[string]any{}, nil)
	mainHead := sim.branchHead(t, "main")
	sim.holdGitLab(t, http.MethodPost, "/projects/*/repository/commits")
	sim.approve(t, op)
	branch := flow.BranchName(op)
	var regenerated string
	waitFor(t, 30*time.Second, "the forced commit on main's head", func() bool {
		head := sim.branchHead(t, branch)
		if head == "" {
			return false
		}
		if p := sim.parents(t, head); len(p) == 1 && p[0] == mainHead {
			regenerated = head
			return true
		}
		return false
	})
	w.inFlight(a, flow.ActionRegenerate)
	w.kill9(a)
	sim.clearGitLabFaults(t)

	b := w.next(legacy)
	w.untilBinding(domain.BindingValidated, op)
	untilMetric(t, b, 1)
	mrs := sim.mrs(t)
	if len(mrs) != 1 || mrs[0].State != "merged" {
		t.Fatalf("MRs %+v, want one, merged", mrs)
	}
	var mr struct {
		SHA string `json:"sha"`
	}
	sim.must(t, http.MethodGet, fmt.Sprintf("/gitlab/api/v4/projects/1/merge_requests/%d", iid), nil, &mr)
	if mr.SHA != regenerated {
		t.Fatalf("merged at %s, want the dead instance's regenerated commit %s", mr.SHA, regenerated)
	}
	steps, err := w.st.OperationStepList(t.Context(), op)
	if err != nil {
		t.Fatal(err)
	}
	regenerations := 0
	for _, s := range steps {
		if strings.HasPrefix(s.Note, "regenerated ") {
			regenerations++
		}
	}
	if regenerations != 1 {
		t.Fatalf("%d regenerations in the history, want 1", regenerations)
	}
	if n := w.flips(op); n != 1 {
		t.Fatalf("%d flips to VALIDATED, want 1", n)
	}
	if n := sim.commitsOnMain(t, op); n != 1 {
		t.Fatalf("%d commits for %s on main, want 1", n, op)
	}
	if got := sim.approvedBy(t, iid); !sameSet(got, []string{"approver-1", "approver-2"}) {
		t.Fatalf("approved by %v, want each bot once", got)
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, []string{op})
}

// gatherAdmitted submits ops (one user each) of target on an instance
// without rounds (batch.interval and batch.gatherWindow 1h), approves them and waits until every
// one waits in the batch waiting set, then stops that instance politely:
// the next instance's first round claims them all.
func (w *crashWorld) gatherAdmitted(target string, ops, users []string) {
	w.t.Helper()
	a := w.next("CHANGEFLOW_BATCH_INTERVAL=1h", "CHANGEFLOW_BATCH_GATHERWINDOW=1h")
	for i, op := range ops {
		a.submit(w.t, users[i], op, target)
	}
	w.untilBinding(domain.BindingApprovalSent, ops...)
	for _, op := range ops {
		w.sim.approve(w.t, op)
	}
	for _, op := range ops {
		waitFor(w.t, 30*time.Second, op+" admitted", func() bool {
			return domain.StepStatus(w.op(op).Step) == domain.StepCreateAdmitted
		})
	}
	a.stop()
}

// TestServeKill9InsideBatchSettlement: a batch's check pipeline fails, so
// its driver runs batch_settle, which closes the MR; the serve process is
// killed -9 right after GitLab closed it (the answer held). The next
// instance resumes the settlement once the lease expired: it reads the MR
// (closed), fails the batch (BATCH_PIPELINE_FAILED) and re-admits the
// members, whose next (halved) rounds validate them. Each member ends
// VALIDATED in exactly one SUCCEEDED batch, flipped and counted once; the
// failed batch's MR is closed once and its commit never reaches main.
func TestServeKill9InsideBatchSettlement(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "batch:\n  interval: 200ms\n  maxRequests: 10\n  resumeAfter: 1s\n")
	sim := w.sim
	ops := []string{"op-s1", "op-s2"}
	users := []string{"alice", "bob"}
	w.gatherAdmitted("grouped", ops, users)

	sim.must(t, http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
	w.killInside(w.insideSettlementClose())
	failedIID := sim.mrs(t)[0].IID

	b := w.next()
	w.untilBinding(domain.BindingValidated, ops...)
	untilMetric(t, b, len(ops))
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch WHERE status = 3 AND failure_code = 'BATCH_PIPELINE_FAILED' AND mr_iid = ?", failedIID); n != 1 {
		t.Fatalf("the batch of MR !%d is not FAILED with BATCH_PIPELINE_FAILED", failedIID)
	}
	succeeded := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch WHERE status = 2")
	if all := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch"); all != succeeded+1 {
		t.Fatalf("%d batches: want the failed one and %d succeeded", all, succeeded)
	}
	mrs := sim.mrs(t)
	if len(mrs) != succeeded+1 {
		t.Fatalf("%d MRs for %d batches", len(mrs), succeeded+1)
	}
	for _, mr := range mrs {
		want := "merged"
		if mr.IID == failedIID {
			want = "closed"
		}
		if mr.State != want {
			t.Fatalf("MR !%d is %s, want %s", mr.IID, mr.State, want)
		}
	}
	file := sim.fileOnMain(t, "grouped")
	for _, op := range ops {
		if n := w.flips(op); n != 1 {
			t.Fatalf("%s: %d flips to VALIDATED, want 1", op, n)
		}
		if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch_history h JOIN merge_batch b ON b.id = h.batch_id WHERE b.status = 2 AND h.operation_id = ?", op); n != 1 {
			t.Fatalf("%s is in %d succeeded batches, want 1", op, n)
		}
		if n := sim.commitsOnMain(t, op); n != 1 {
			t.Fatalf("%d commits for %s on main, want 1", n, op)
		}
		if n := strings.Count(file, op); n != 1 {
			t.Fatalf("the binding file on main names %s %d times, want 1", op, n)
		}
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, ops)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
