package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// The end of access through the HTTP API of a real `changeflow serve`
// process, on SQLite and on MariaDB (docs/api.md, "give access back",
// "withdraw" and the ops revoke): the workflow tests call the same
// operations in-process; these go through the routes, the identity, the
// authorization and the audit as a person and an operator do. And kill -9
// inside a withdrawal's upstream half, with the crash harness (MariaDB).

// procDatabase returns the DSN of a fresh, migrated database of driver
// for a serve process, and a store on it for the test's own reads.
// SQLite is a file both processes open (the serve process writes, the
// test reads and seeds before the process starts).
func procDatabase(t *testing.T, driver string) (string, *store.Store) {
	t.Helper()
	if driver == store.DriverMySQL {
		return mariaDB(t)
	}
	dsn := storetest.NewMigratedDatabase(t, driver)
	st := storetest.OpenDSN(t, driver, dsn)
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return dsn, st
}

// apiAnswer is the envelope of a changeflow answer.
type apiAnswer struct {
	Status  int
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

// call sends method path as user (the auth proxy's header, trusted from
// loopback) with body JSON-encoded unless nil, and decodes the envelope.
func (s *serveProc) call(t *testing.T, method, path, user string, body any) apiAnswer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Auth-Request-User", user)
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, path, s.id, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a apiAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
	}
	a.Status = resp.StatusCode
	return a
}

// want fails unless the answer is status with code.
func (a apiAnswer) want(t *testing.T, what string, status int, code string) apiAnswer {
	t.Helper()
	if a.Status != status || a.Code != code {
		t.Fatalf("%s: %d %s %q %v, want %d %s", what, a.Status, a.Code, a.Message, a.Data, status, code)
	}
	return a
}

// TestServeGiveBackRevokeAndWithdrawThroughTheAPI, on SQLite and MariaDB,
// through one real `changeflow serve` process and the simulators: alice
// gives her access back (POST /api/requests/{id}/revoke; asked again, the
// same revocation) and the operator olivia revokes bob's with a reason
// (POST /ops/requests/{id}/revoke, audited; without a reason 400): both
// removed from the file on main and REVOKED, no approval asked; a live
// grant stays. Then POST /api/requests/{id}/withdraw in each of the three
// waiting places — waiting for approval (withdrawn in the approval
// simulator too), waiting in the batch set (out of it), its single-request
// MR open (the MR closed) — ends CLOSED, and a withdrawal that finds its
// MR merged by hand is answered 409 ALREADY_IN_EFFECT and the request
// follows its merge to VALIDATED ("merged wins"). Each revocation and
// withdrawal is counted once on /metrics (and no lag observed for access
// ended before its expiry); no MR is left open; the files on main are
// exact.
func TestServeGiveBackRevokeAndWithdrawThroughTheAPI(t *testing.T) {
	t.Parallel()
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			lifecycleThroughTheAPI(t, driver)
		})
	}
}

func lifecycleThroughTheAPI(t *testing.T, driver string) {
	dsn, st := procDatabase(t, driver)
	dir := t.TempDir()
	port := freePort(t)
	sim := startSim(t, dir, []string{fmt.Sprintf("http://127.0.0.1:%d", port)})
	sim.must(t, http.MethodPost, "/approval/_control/policy", map[string]any{"mode": "manual"}, nil)
	sim.must(t, http.MethodPost, "/deploy/_control/faults", map[string]any{"delayMs": 20}, nil)
	sim.must(t, http.MethodPut, "/gitlab/_control/settings",
		map[string]any{"mergeability_delay": "50ms", "pipeline_start_delay": "10ms", "pipeline_duration": "100ms"}, nil)
	grants := []seededGrant{{op: "g-give", user: "alice", target: "solo"}, {op: "g-ops", user: "bob", target: "solo"}, {op: "g-live", user: "carol", target: "solo"}}
	seedGrants(t, st, sim, grants)

	// No batch round in the test's time: a request admitted to the batch
	// set stays there until it is withdrawn.
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, procConfigOn(driver, dsn, sim.base, `workflow:
  approveFirst: true
expiry:
  interval: 1h
batch:
  interval: 1h
  gatherWindow: 1h
reconcile:
  interval: 200ms
  minAge: 1s
targets:
  solo: {accessMode: OPEN, batching: false, maxDays: 30}
  grouped: {accessMode: OPEN, batching: true, maxDays: 30}
`))
	s := startServeProc(t, dir, file, "inst-1", port)

	// Give back, and an operator's revocation.
	r := s.call(t, http.MethodPost, "/api/requests/g-give/revoke", "alice", nil).want(t, "give back", http.StatusAccepted, "ACCEPTED")
	if r.Data["revocationId"] != domain.RevocationID("g-give") || r.Data["created"] != true {
		t.Fatalf("give back: %v", r.Data)
	}
	r = s.call(t, http.MethodPost, "/api/requests/g-give/revoke", "alice", nil).want(t, "give back again", http.StatusOK, "OK")
	if r.Data["revocationId"] != domain.RevocationID("g-give") || r.Data["created"] != false {
		t.Fatalf("give back again: %v", r.Data)
	}
	s.call(t, http.MethodPost, "/api/requests/g-ops/revoke", "alice", nil).want(t, "give back another's", http.StatusNotFound, "NOT_FOUND")
	s.call(t, http.MethodPost, "/ops/requests/g-ops/revoke", "olivia", map[string]any{}).want(t, "ops revoke without a reason", http.StatusBadRequest, "INVALID_ARGUMENT")
	r = s.call(t, http.MethodPost, "/ops/requests/g-ops/revoke", "olivia", map[string]any{"reason": "left the team"}).
		want(t, "ops revoke", http.StatusAccepted, "ACCEPTED")
	if r.Data["revocationId"] != domain.RevocationID("g-ops") {
		t.Fatalf("ops revoke: %v", r.Data)
	}
	untilRevoked(t, st, 60*time.Second, []string{"g-give", "g-ops"})
	for _, c := range []struct {
		grant, owner string
		reason       domain.RevokeReason
	}{{"g-give", "alice", domain.RevokeGivenBack}, {"g-ops", "bob", domain.RevokeOperator}} {
		o, err := st.OperationGet(t.Context(), domain.RevocationID(c.grant))
		if err != nil {
			t.Fatal(err)
		}
		if o.RevokeReason != c.reason || o.GrantOperationID != c.grant {
			t.Fatalf("revocation of %s: reason %s, grant %s", c.grant, o.RevokeReason, o.GrantOperationID)
		}
		if n := len(sim.approvals(t, o.OperationID)); n != 0 {
			t.Fatalf("%d approval forms for %s: losing access asks no approval", n, o.OperationID)
		}
		if n := sim.commitsOnMain(t, o.OperationID); n != 1 {
			t.Fatalf("%d removal commits for %s on main, want 1", n, o.OperationID)
		}
		if got := s.requestStatus(t, c.owner, c.grant); got != "REVOKED" {
			t.Fatalf("%s's grant %s reads %s, want REVOKED", c.owner, c.grant, got)
		}
	}
	audit, err := st.AuditListByResource(t.Context(), "g-ops", 10)
	if err != nil {
		t.Fatal(err)
	}
	audited := 0
	for _, a := range audit {
		if a.Actor == "olivia" && a.Action == "ops-request-revoke" && a.Outcome == "ACCEPTED" {
			audited++
		}
	}
	if audited != 1 {
		t.Fatalf("the operator's revocation is audited %d times, want once: %+v", audited, audit)
	}

	// Withdraw while waiting for approval: CLOSED, and withdrawn in the
	// approval system, which then refuses to decide it.
	s.submit(t, "dave", "op-wa", "solo")
	waitForBinding(t, st, "op-wa", domain.BindingApprovalSent)
	r = s.call(t, http.MethodPost, "/api/requests/op-wa/withdraw", "dave", nil).want(t, "withdraw waiting for approval", http.StatusOK, "OK")
	if r.Data["status"] != "CLOSED" {
		t.Fatalf("withdrawn while waiting for approval: %v", r.Data)
	}
	waitFor(t, 30*time.Second, "op-wa's approval withdrawn upstream", func() bool {
		return sim.approvals(t, "op-wa")[0]["status"] == "WITHDRAWN"
	})
	if code := sim.do(t, http.MethodPost, fmt.Sprintf("/approval/_control/approvals/%v/approve", sim.approvals(t, "op-wa")[0]["approvalId"]), nil, nil); code != http.StatusConflict {
		t.Fatalf("deciding a withdrawn approval = %d, want 409", code)
	}

	// Withdraw from the batch set: approved, waiting for a round.
	s.submit(t, "erin", "op-ws", "grouped")
	waitForBinding(t, st, "op-ws", domain.BindingApprovalSent)
	sim.approve(t, "op-ws")
	waitFor(t, 30*time.Second, "op-ws admitted", func() bool {
		o, err := st.OperationGet(t.Context(), "op-ws")
		return err == nil && domain.StepStatus(o.Step) == domain.StepCreateAdmitted
	})
	r = s.call(t, http.MethodPost, "/api/requests/op-ws/withdraw", "erin", nil).want(t, "withdraw from the batch set", http.StatusOK, "OK")
	if r.Data["status"] != "CLOSED" {
		t.Fatalf("withdrawn from the batch set: %v", r.Data)
	}
	if n, err := st.BatchWaitingCount(t.Context(), 1); err != nil || n != 0 {
		t.Fatalf("%d requests still in the batch set (%v), want 0", n, err)
	}

	// Withdraw while the single-request MR is open (its pipeline kept
	// running): the MR is closed, the request CLOSED.
	sim.must(t, http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 2}, nil)
	s.submit(t, "frank", "op-wm", "solo")
	waitForBinding(t, st, "op-wm", domain.BindingApprovalSent)
	sim.approve(t, "op-wm")
	wmIID := untilPipelineRunning(t, st, "op-wm")
	r = s.call(t, http.MethodPost, "/api/requests/op-wm/withdraw", "frank", nil).want(t, "withdraw with its MR open", http.StatusOK, "OK")
	if r.Data["status"] != "CLOSED" {
		t.Fatalf("withdrawn with its MR open: %v", r.Data)
	}
	if state := mrState(t, sim, wmIID); state != "closed" {
		t.Fatalf("op-wm's MR is %s, want closed", state)
	}

	// Merged wins: the MR was merged by hand before the withdrawal reached
	// it; the request takes effect.
	s.submit(t, "gina", "op-wmg", "solo")
	waitForBinding(t, st, "op-wmg", domain.BindingApprovalSent)
	sim.approve(t, "op-wmg")
	wmgIID := untilPipelineRunning(t, st, "op-wmg")
	sim.must(t, http.MethodPost, fmt.Sprintf("/gitlab/_control/projects/1/merge_requests/%d/merge", wmgIID), map[string]any{}, nil)
	r = s.call(t, http.MethodPost, "/api/requests/op-wmg/withdraw", "gina", nil).want(t, "withdraw after a merge by hand", http.StatusConflict, "ALREADY_IN_EFFECT")
	if !strings.Contains(r.Message, "/revoke") {
		t.Fatalf("the refusal does not say how to give the access back: %q", r.Message)
	}
	waitForBinding(t, st, "op-wmg", domain.BindingValidated)

	// Counted once each; no MR left open; the files exact.
	for m, want := range map[string]int{"changeflow_revocations_total": 2, "changeflow_requests_withdrawn_total": 3} {
		waitFor(t, 30*time.Second, fmt.Sprintf("%s %d", m, want), func() bool {
			n := s.metricSum(t, m)
			if n > want {
				t.Fatalf("%s counts %d, want exactly %d", m, n, want)
			}
			return n == want
		})
	}
	untilMetric(t, s, 1)
	// Given back and revoked before their expiry: no lag to observe
	// (docs/api.md); read well after both flips.
	if n := s.metricSum(t, "changeflow_revocation_lag_seconds_count"); n != 0 {
		t.Fatalf("the revocation lag observed %d removals before their expiry, want 0", n)
	}
	for _, mr := range sim.mrs(t) {
		if mr.State == "opened" {
			t.Fatalf("MR !%d (%s) is left open", mr.IID, mr.SourceBranch)
		}
	}
	sim.filesExact(t, st, []string{"solo", "grouped"}, []string{"g-give", "g-ops", "g-live", "op-wa", "op-ws", "op-wm", "op-wmg"})
	solo := sim.fileOnMain(t, "solo")
	for op, want := range map[string]bool{"g-give": false, "g-ops": false, "g-live": true, "op-wm": false, "op-wmg": true} {
		if strings.Contains(solo, `"`+op+`"`) != want {
			t.Fatalf("the file on main names %s: %v, want %v:\n%s", op, !want, want, solo)
		}
	}
}

// waitForBinding waits until operationID's binding is status.
func waitForBinding(t *testing.T, st *store.Store, operationID string, status domain.BindingStatus) {
	t.Helper()
	waitFor(t, 60*time.Second, operationID+" "+string(status), func() bool {
		b, err := st.BindingGetByOperation(t.Context(), operationID)
		return err == nil && b.Status == status
	})
}

// untilPipelineRunning waits until operationID's MR is open and its check
// pipeline being polled, and returns the MR's iid.
func untilPipelineRunning(t *testing.T, st *store.Store, operationID string) int64 {
	t.Helper()
	var iid int64
	waitFor(t, 60*time.Second, operationID+" polling its pipeline", func() bool {
		o, err := st.OperationGet(t.Context(), operationID)
		iid = o.MRIID
		return err == nil && o.MRIID != 0 && domain.StepStatus(o.Step) == domain.StepCreatePipelineRunning
	})
	return iid
}

// mrState is MR iid's state in the GitLab simulator.
func mrState(t *testing.T, sim *simProc, iid int64) string {
	t.Helper()
	for _, mr := range sim.mrs(t) {
		if mr.IID == iid {
			return mr.State
		}
	}
	t.Fatalf("no MR !%d", iid)
	return ""
}

// TestServeKill9InsideTheWithdrawalOfAnOpenMR: a request of a target
// without batching has its MR open (the check pipeline kept running) when
// its owner withdraws it; the guarded write moves the step and claims the
// withdraw action for the instance answering the call, which closes the
// MR — and is killed -9 right after GitLab closed it (the answer held),
// before it wrote CLOSED. The next instance, once the lease expired,
// re-runs withdraw: it reads the MR (closed, nothing to close) and ends
// the request CLOSED, flipped and counted once; the one MR stays closed
// and nothing reaches main.
func TestServeKill9InsideTheWithdrawalOfAnOpenMR(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "")
	sim := w.sim
	const op, user = "op-wd", "dave"
	w.holdPipelines()

	w.killInside(killPoint{
		start: func(a *serveProc) {
			a.submit(t, user, op, "solo")
			w.untilBinding(domain.BindingApprovalSent, op)
			sim.approve(t, op)
			untilPipelineRunning(t, w.st, op)
			// Armed only now, so the close is the one call it can hold.
			sim.holdGitLab(t, http.MethodPut, "/projects/*/merge_requests/*")
			// The call blocks on the held close and dies with the
			// instance: its answer is not the test's concern.
			go func() {
				req, _ := http.NewRequest(http.MethodPost, a.base+"/api/requests/"+op+"/withdraw", nil)
				req.Header.Set("X-Auth-Request-User", user)
				if resp, err := procClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
		},
		what: "the MR closed",
		applied: func() bool {
			mrs := sim.mrs(t)
			return len(mrs) == 1 && mrs[0].State == "closed"
		},
		action: flow.ActionWithdraw,
	})
	if got := w.binding(op); got == domain.BindingClosed {
		t.Fatalf("binding %s before the withdraw action wrote it: the kill came too late", got)
	}

	b := w.next()
	w.untilBinding(domain.BindingClosed, op)
	waitFor(t, 30*time.Second, "the withdrawal counted", func() bool { return b.metricSum(t, "changeflow_requests_withdrawn_total") >= 1 })
	if n := b.metricSum(t, "changeflow_requests_withdrawn_total"); n != 1 {
		t.Fatalf("%s counts %d withdrawals, want 1", b.id, n)
	}
	o := w.op(op)
	if domain.StepStatus(o.Step) != domain.StepCloseRequesterWithdrawn || o.NextAction != "" {
		t.Fatalf("%s at %s, next action %q: want CLOSE_REQUESTER_WITHDRAWN with nothing left to do", op, domain.StepStatus(o.Step), o.NextAction)
	}
	steps, err := w.st.OperationStepList(t.Context(), op)
	if err != nil {
		t.Fatal(err)
	}
	closed := 0
	for _, s := range steps {
		if s.ToBinding == domain.BindingClosed {
			closed++
		}
	}
	if closed != 1 {
		t.Fatalf("%d moves to CLOSED in the history, want 1", closed)
	}
	if got := b.requestStatus(t, user, op); got != "CLOSED" {
		t.Fatalf("the API says %s, want CLOSED", got)
	}
	if mrs := sim.mrs(t); len(mrs) != 1 || mrs[0].State != "closed" {
		t.Fatalf("MRs %+v, want one, closed", mrs)
	}
	if n := sim.commitsOnMain(t, op); n != 0 {
		t.Fatalf("%d commits for %s on main, want none", n, op)
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, []string{op})
}

// TestServeKill9InsideTheWithdrawalOfAnApproval: a request waiting for
// its approval is withdrawn — CLOSED and counted at once by the guarded
// write, the approval's withdrawal upstream left to the withdraw action —
// and the instance running that action is killed -9 right after the
// approval system withdrew the form (its answer held). The next instance,
// once the lease expired, re-runs withdraw: the approval system answers
// the second call with the form as it is (withdrawn), and the action
// ends. One form, WITHDRAWN and no longer decidable; one move to CLOSED;
// the survivor counts no second withdrawal; nothing reaches main.
func TestServeKill9InsideTheWithdrawalOfAnApproval(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "")
	sim := w.sim
	const op, user = "op-wda", "erin"
	w.killInside(killPoint{
		start: func(a *serveProc) {
			a.submit(t, user, op, "solo")
			w.untilBinding(domain.BindingApprovalSent, op)
			sim.must(t, http.MethodPost, "/approval/_control/faults",
				map[string]any{"holdWithdrawsNext": map[string]any{"count": 1, "delayMs": 60000}}, nil)
			r := a.call(t, http.MethodPost, "/api/requests/"+op+"/withdraw", user, nil).want(t, "withdraw", http.StatusOK, "OK")
			if r.Data["status"] != "CLOSED" {
				t.Fatalf("withdrawn while waiting for approval: %v", r.Data)
			}
		},
		what:    "the approval withdrawn upstream",
		applied: func() bool { return sim.approvals(t, op)[0]["status"] == "WITHDRAWN" },
		action:  flow.ActionWithdraw,
		held: func(a *serveProc) {
			if n := a.metricSum(t, "changeflow_requests_withdrawn_total"); n != 1 {
				t.Fatalf("%s counts %d withdrawals at the guarded write, want 1", a.id, n)
			}
		},
	})
	sim.must(t, http.MethodDelete, "/approval/_control/faults", nil, nil)

	b := w.next()
	waitFor(t, 60*time.Second, "the withdraw action done", func() bool {
		return countSQL(t, w.st, "SELECT COUNT(*) FROM operation WHERE operation_id = ? AND next_action IS NULL AND lease_owner IS NULL", op) == 1
	})
	o := w.op(op)
	if domain.StepStatus(o.Step) != domain.StepCloseRequesterWithdrawn || w.binding(op) != domain.BindingClosed {
		t.Fatalf("%s at %s / %s, want CLOSE_REQUESTER_WITHDRAWN / CLOSED", op, domain.StepStatus(o.Step), w.binding(op))
	}
	steps, err := w.st.OperationStepList(t.Context(), op)
	if err != nil {
		t.Fatal(err)
	}
	closed := 0
	for _, s := range steps {
		if s.ToBinding == domain.BindingClosed {
			closed++
		}
	}
	if closed != 1 {
		t.Fatalf("%d moves to CLOSED in the history, want 1", closed)
	}
	forms := sim.approvals(t, op)
	if len(forms) != 1 || forms[0]["status"] != "WITHDRAWN" {
		t.Fatalf("approval forms %v, want one, WITHDRAWN", forms)
	}
	if code := sim.do(t, http.MethodPost, fmt.Sprintf("/approval/_control/approvals/%v/approve", forms[0]["approvalId"]), nil, nil); code != http.StatusConflict {
		t.Fatalf("deciding the withdrawn approval = %d, want 409", code)
	}
	if n := b.metricSum(t, "changeflow_requests_withdrawn_total"); n != 0 {
		t.Fatalf("%s counts %d withdrawals; the dead instance counted the only one", b.id, n)
	}
	if got := b.requestStatus(t, user, op); got != "CLOSED" {
		t.Fatalf("the API says %s, want CLOSED", got)
	}
	if n := len(sim.mrs(t)); n != 0 {
		t.Fatalf("%d MRs, want none", n)
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, []string{op})
}
