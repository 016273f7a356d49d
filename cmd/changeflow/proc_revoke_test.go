package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// The revocation path through real `changeflow serve` processes
// (docs/flows/lifecycle.md, "Revocation (access ends)" and "Crash safety of the
// business steps"): the expiry scan run by three processes at once, and
// kill -9 inside each step of a removal.

// seededGrant is a grant in effect the test writes directly: its entry in
// the binding file on main and its rows as the workflow leaves a grant
// whose deployment confirmed it (CALLED_BACK, VALIDATED). Granting each
// through the workflow first would make the tests about granting; the
// revocation reads nothing else of a grant.
type seededGrant struct {
	op, user, target string
}

// seedGrants writes grants: one commit on main per binding file (as a
// maintainer) with every grant's entry, then each grant's operation and
// binding, expiring a day from now. Nothing is scheduled for them.
func seedGrants(t *testing.T, st *store.Store, sim *simProc, grants []seededGrant) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	expires := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)
	files := map[string]bindingfile.File{}
	var targets []string
	for _, g := range grants {
		if _, seen := files[g.target]; !seen {
			f, err := bindingfile.Parse([]byte(sim.fileOnMain(t, g.target)))
			if err != nil {
				t.Fatal(err)
			}
			files[g.target] = f
			targets = append(targets, g.target)
		}
		files[g.target] = files[g.target].With(bindingfile.Entry{Subject: g.user, ExpiresAt: expires, OperationID: g.op})
	}
	for _, target := range targets {
		action := "update"
		if sim.fileOnMain(t, target) == "" {
			action = "create"
		}
		sim.must(t, http.MethodPost, "/gitlab/api/v4/projects/1/repository/commits", map[string]any{
			"branch": "main", "commit_message": "grants in effect (test fixture)",
			"actions": []map[string]any{{"action": action, "file_path": "bindings/" + target + ".yaml", "content": string(files[target].Marshal())}},
		}, nil)
	}
	for _, g := range grants {
		if _, err := st.OperationSubmit(ctx, store.OperationSubmitParams{
			Operation: store.OperationCreateParams{
				OperationID: g.op, Subject: g.user, TargetKey: g.target, ProjectID: 1, Flow: "APPROVE_FIRST",
				Step: int(domain.StepCreateApprovalSubmitting), Reason: "process test", Days: 1, ExpiresAt: expires, Actor: g.user,
			},
			BindingStatus: domain.BindingApprovalSending,
		}); err != nil {
			t.Fatalf("seed %s: %v", g.op, err)
		}
	}
	ids := grantIDs(grants)
	in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	for _, q := range []string{
		fmt.Sprintf("UPDATE operation SET step_status = %d, version = version + 1 WHERE operation_id IN (%s)", domain.StepCalledBack, in),
		"UPDATE binding SET status = 'VALIDATED', version = version + 1 WHERE operation_id IN (" + in + ")",
	} {
		if _, err := st.DB().ExecContext(ctx, q, anyOf(ids)...); err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
}

// expireGrants moves the grants' expiry an hour into the past (database
// clock): their time has come, for every scan at once.
func expireGrants(t *testing.T, st *store.Store, grants []seededGrant) {
	t.Helper()
	ids := grantIDs(grants)
	past, arg := st.Dialect().NowMinus(time.Hour)
	in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	res, err := st.DB().ExecContext(context.WithoutCancel(t.Context()),
		"UPDATE binding SET expires_at = "+past+" WHERE status = 'VALIDATED' AND operation_id IN ("+in+")",
		append([]any{arg}, anyOf(ids)...)...)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); int(n) != len(ids) {
		t.Fatalf("expired %d of %d grants", n, len(ids))
	}
}

func grantIDs(grants []seededGrant) []string {
	ids := make([]string, len(grants))
	for i, g := range grants {
		ids[i] = g.op
	}
	return ids
}

func anyOf(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// expiryScan is POST /ops/expiry/scan as olivia (ops.write) on s; it
// returns how many revocations the call created.
func (s *serveProc) expiryScan() (int, error) {
	req, _ := http.NewRequest(http.MethodPost, s.base+"/ops/expiry/scan", nil)
	req.Header.Set("X-Auth-Request-User", "olivia")
	resp, err := procClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Message string `json:"message"`
		Data    struct {
			Revoked int `json:"revoked"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil || resp.StatusCode != http.StatusOK || env.Message == "" {
		return 0, fmt.Errorf("expiry scan on %s: %d %s (%v)", s.id, resp.StatusCode, raw, err)
	}
	return env.Data.Revoked, nil
}

// metricSum sums every series of metric name on s's /metrics.
func (s *serveProc) metricSum(t *testing.T, name string) int {
	t.Helper()
	return s.metricSumWhere(t, func(l string) bool { return strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") })
}

// trailersOnMain counts, per operationId, the non-merge commits on main
// whose message carries its Changeflow-Operation trailer (the simulator's
// real Git repository, one git log).
func (s *simProc) trailersOnMain(t *testing.T) map[string]int {
	t.Helper()
	repos, _ := filepath.Glob(filepath.Join(s.dataDir, "world-*", "config", "bindings.git"))
	if len(repos) != 1 {
		t.Fatalf("want one config/bindings repository under %s, found %v", s.dataDir, repos)
	}
	out, err := osexec.Command("git", "--git-dir", repos[0], "log", "main", "--no-merges", "--format=%B%x00").Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	n := map[string]int{}
	for _, msg := range strings.Split(string(out), "\x00") {
		for _, line := range strings.Split(msg, "\n") {
			if id, ok := strings.CutPrefix(strings.TrimSpace(line), "Changeflow-Operation: "); ok {
				n[id]++
			}
		}
	}
	return n
}

// untilRevoked waits until every grant's binding is REVOKED (owned by its
// revocation), failing at once on a REVOKE_FAILED with nothing left to run.
func untilRevoked(t *testing.T, st *store.Store, timeout time.Duration, grants []string) {
	t.Helper()
	revs := make([]string, len(grants))
	for i, g := range grants {
		revs[i] = domain.RevocationID(g)
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(revs)), ",")
	waitFor(t, timeout, fmt.Sprintf("%d revocations REVOKED", len(revs)), func() bool {
		if n := countSQL(t, st, "SELECT COUNT(*) FROM binding b JOIN operation o ON o.operation_id = b.operation_id"+
			" WHERE b.status = 'REVOKE_FAILED' AND o.due_at IS NULL AND o.lease_owner IS NULL AND b.operation_id IN ("+in+")", anyOf(revs)...); n > 0 {
			t.Fatalf("%d revocations stopped in REVOKE_FAILED", n)
		}
		return countSQL(t, st, "SELECT COUNT(*) FROM binding WHERE status = 'REVOKED' AND operation_id IN ("+in+")", anyOf(revs)...) == len(revs)
	})
}

// revokedOnceEach checks, for every grant, that its revocation exists once
// with one REVOKE_STARTED row and one move to REVOKED in its history, that
// every instance together counted each revocation once and flipped it
// once (changeflow_revocations_total, the lag histogram's count), and
// that the binding files on main are exact.
func revokedOnceEach(t *testing.T, st *store.Store, sim *simProc, instances []*serveProc, targets []string, grants []string) {
	t.Helper()
	revs := make([]string, len(grants))
	for i, g := range grants {
		revs[i] = domain.RevocationID(g)
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(revs)), ",")
	if n := countSQL(t, st, "SELECT COUNT(*) FROM operation WHERE kind = 'REVOKE'"); n != len(revs) {
		t.Fatalf("%d revocations, want %d", n, len(revs))
	}
	if n := countSQL(t, st, "SELECT COUNT(DISTINCT grant_operation_id) FROM operation WHERE kind = 'REVOKE' AND operation_id IN ("+in+")", anyOf(revs)...); n != len(revs) {
		t.Fatalf("%d grants revoked, want %d", n, len(revs))
	}
	for _, q := range []struct{ what, sql string }{
		{"REVOKE_STARTED rows", fmt.Sprintf("SELECT operation_id, COUNT(*) FROM operation_step WHERE to_step = %d GROUP BY operation_id", domain.StepRevokeStarted)},
		{"moves to REVOKED", "SELECT operation_id, COUNT(*) FROM operation_step WHERE to_binding_status = 'REVOKED' GROUP BY operation_id"},
	} {
		got := map[string]int{}
		rows, err := st.DB().QueryContext(context.WithoutCancel(t.Context()), q.sql)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				t.Fatal(err)
			}
			got[id] = n
		}
		rows.Close()
		for _, r := range revs {
			if got[r] != 1 {
				t.Fatalf("%s: %d %s, want 1", r, got[r], q.what)
			}
		}
		if len(got) != len(revs) {
			t.Fatalf("%d operations with %s, want %d", len(got), q.what, len(revs))
		}
	}
	for _, m := range []string{"changeflow_revocations_total", "changeflow_revocation_lag_seconds_count"} {
		waitFor(t, 30*time.Second, m, func() bool {
			sum := 0
			for _, s := range instances {
				sum += s.metricSum(t, m)
			}
			if sum > len(revs) {
				t.Fatalf("the instances count %d on %s, want exactly %d", sum, m, len(revs))
			}
			return sum == len(revs)
		})
	}
	sim.filesExact(t, st, targets, grants)
	for _, target := range targets {
		f, err := bindingfile.Parse([]byte(sim.fileOnMain(t, target)))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range f.Entries {
			if slices.Contains(grants, e.OperationID) {
				t.Fatalf("%s's entry for %s is still on main", target, e.OperationID)
			}
		}
	}
}

// TestServeThreeInstancesRevokeEachExpiredGrantOnce: 88 grants in effect
// over four targets (two batching with 40 each, two without with 4 each)
// expire at once while three `changeflow serve` processes on one MariaDB
// scan every 200 ms in chunks of 7, and the manual scan is called on all
// three at the same moment. Every revocation is created exactly once (one
// operation, one REVOKE_STARTED row), goes out — the batching ones in
// rounds of batch.maxRequests, the others on their own MRs — and ends
// REVOKED, flipped once and counted once across the three instances'
// /metrics; every entry is gone from main and the files are exact; and no
// MR is left open: every batch's recorded MR is merged, and an MR a round
// opened after its batch had moved on (another instance resumed the batch
// and merged it meanwhile — seen once in CI, when such an MR,
// changeflow/batch-2, stayed open) was closed by that round
// (internal/workflow/round_stray.go).
func TestServeThreeInstancesRevokeEachExpiredGrantOnce(t *testing.T) {
	t.Parallel()
	dsn, st := mariaDB(t)
	dir := t.TempDir()
	ports := []int{freePort(t), freePort(t), freePort(t)}
	var urls []string
	for _, p := range ports {
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d", p))
	}
	sim := startSim(t, dir, urls)
	sim.must(t, http.MethodPost, "/deploy/_control/faults", map[string]any{"delayMs": 20}, nil)
	sim.must(t, http.MethodPut, "/gitlab/_control/settings",
		map[string]any{"mergeability_delay": "50ms", "pipeline_start_delay": "10ms", "pipeline_duration": "100ms"}, nil)

	targets := []string{"grouped-1", "grouped-2", "solo-1", "solo-2"}
	var grants []seededGrant
	for _, target := range targets {
		n := 40
		if strings.HasPrefix(target, "solo") {
			n = 4
		}
		for i := range n {
			grants = append(grants, seededGrant{op: fmt.Sprintf("g-%s-%02d", target, i), user: fmt.Sprintf("user-%02d", i), target: target})
		}
	}
	seedGrants(t, st, sim, grants)

	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, procConfig(dsn, sim.base, `expiry:
  interval: 200ms
  chunkSize: 7
batch:
  interval: 200ms
  maxRequests: 50
  resumeAfter: 1s
reconcile:
  interval: 1s
  minAge: 1s
targets:
  grouped-1: {accessMode: OPEN, batching: true, maxDays: 30}
  grouped-2: {accessMode: OPEN, batching: true, maxDays: 30}
  solo-1: {accessMode: OPEN, batching: false, maxDays: 30}
  solo-2: {accessMode: OPEN, batching: false, maxDays: 30}
`))
	var instances []*serveProc
	for i, port := range ports {
		instances = append(instances, startServeProc(t, dir, file, fmt.Sprintf("inst-%d", i+1), port))
	}
	start := time.Now()

	// The grants expire for every scan at once; the manual scan on all
	// three races the scheduled ones.
	expireGrants(t, st, grants)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	manual := make([]int, len(instances))
	for i, s := range instances {
		wg.Go(func() {
			<-gate
			n, err := s.expiryScan()
			if err != nil {
				t.Error(err)
			}
			manual[i] = n
		})
	}
	close(gate)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	ids := grantIDs(grants)
	untilRevoked(t, st, 2*time.Minute, ids)
	t.Logf("%d revocations REVOKED in %v (the manual scans created %v)", len(ids), time.Since(start).Round(time.Millisecond), manual)
	revokedOnceEach(t, st, sim, instances, targets, ids)

	// The batching targets' removals went out in rounds of at most
	// batch.maxRequests, each member in one succeeded batch; the others on
	// one MR each; one removal commit per revocation on main.
	for _, g := range grants {
		rev := domain.RevocationID(g.op)
		if strings.HasPrefix(g.target, "grouped") {
			if n := countSQL(t, st, "SELECT COUNT(*) FROM merge_batch_history h JOIN merge_batch b ON b.id = h.batch_id WHERE b.status = 2 AND h.operation_id = ?", rev); n != 1 {
				t.Fatalf("%s is in %d succeeded batches, want 1", rev, n)
			}
		}
	}
	if n := countSQL(t, st, "SELECT COUNT(*) FROM merge_batch b WHERE (SELECT COUNT(*) FROM merge_batch_history h WHERE h.batch_id = b.id) > 50"); n != 0 {
		t.Fatalf("%d batches larger than batch.maxRequests", n)
	}
	trailers := sim.trailersOnMain(t)
	for _, g := range grants {
		if n := trailers[domain.RevocationID(g.op)]; n != 1 {
			t.Fatalf("%d removal commits for %s on main, want 1", n, g.op)
		}
	}
	// No MR is left open once every batch has ended. A round that opened
	// an MR after its batch moved on closes it before it returns, and such
	// a round may still be on its way: wait for it (a liveness bound; a
	// leaked MR stays open and fails here).
	waitFor(t, 30*time.Second, "no MR open in GitLab", func() bool {
		var open []simMR
		sim.must(t, http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests?state=opened&per_page=100", nil, &open)
		for _, mr := range open {
			t.Logf("still open: MR !%d (%s)", mr.IID, mr.SourceBranch)
		}
		return len(open) == 0
	})
	recorded := map[string]int64{} // batch branch → the MR its batch records
	rows, err := st.DB().QueryContext(context.WithoutCancel(t.Context()), "SELECT id, mr_iid FROM merge_batch WHERE mr_iid IS NOT NULL")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, iid int64
		if err := rows.Scan(&id, &iid); err != nil {
			t.Fatal(err)
		}
		recorded[flow.BatchBranchName(id)] = iid
	}
	rows.Close()
	single := 0
	for _, mr := range sim.allMRs(t) {
		switch {
		case mr.State == "merged":
		case mr.State == "closed" && strings.HasPrefix(mr.SourceBranch, "changeflow/batch-") && recorded[mr.SourceBranch] != mr.IID:
			t.Logf("MR !%d (%s) was opened after its batch moved on, and closed", mr.IID, mr.SourceBranch)
			continue
		default:
			t.Fatalf("MR !%d (%s) is %s", mr.IID, mr.SourceBranch, mr.State)
		}
		if strings.HasPrefix(mr.SourceBranch, "changeflow/batch-") && recorded[mr.SourceBranch] != mr.IID {
			t.Fatalf("MR !%d (%s) merged, but its batch records MR !%d", mr.IID, mr.SourceBranch, recorded[mr.SourceBranch])
		}
		if strings.HasPrefix(mr.SourceBranch, "changeflow/op-") {
			single++
		}
	}
	if single != 8 {
		t.Fatalf("%d single-request removal MRs, want one per revocation of the targets without batching (8)", single)
	}
}

// untilStep waits until operation id is at step (its binding whatever it
// is), failing when the wait is over.
func (w *crashWorld) untilStep(id string, step domain.StepStatus) {
	w.t.Helper()
	waitFor(w.t, 60*time.Second, id+" at "+step.String(), func() bool {
		return domain.StepStatus(w.op(id).Step) == step
	})
}

// removalOnce checks what a removal that went through killed instances
// leaves: its revocation REVOKED, created once (one REVOKE_STARTED row),
// flipped once, one removal commit on main.
func (w *crashWorld) removalOnce(grant string) {
	t := w.t
	t.Helper()
	rev := domain.RevocationID(grant)
	if b := w.binding(rev); b != domain.BindingRevoked {
		t.Fatalf("%s is %s, want REVOKED", rev, b)
	}
	steps, err := w.st.OperationStepList(t.Context(), rev)
	if err != nil {
		t.Fatal(err)
	}
	started, flipped := 0, 0
	for _, s := range steps {
		if domain.StepStatus(s.ToStep) == domain.StepRevokeStarted {
			started++
		}
		if s.ToBinding == domain.BindingRevoked {
			flipped++
		}
	}
	if started != 1 || flipped != 1 {
		t.Fatalf("%s: %d REVOKE_STARTED rows and %d flips to REVOKED, want 1 and 1", rev, started, flipped)
	}
	if n := w.sim.commitsOnMain(t, rev); n != 1 {
		t.Fatalf("%d removal commits for %s on main, want 1", n, rev)
	}
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM operation WHERE kind = 'REVOKE' AND grant_operation_id = ?", grant); n != 1 {
		t.Fatalf("%d revocations of %s, want 1", n, grant)
	}
}

// untilLag waits until s counts want flips to REVOKED on its lag
// histogram, then asserts it is exactly want.
func untilLag(t *testing.T, s *serveProc, want int) {
	t.Helper()
	const m = "changeflow_revocation_lag_seconds_count"
	waitFor(t, 30*time.Second, fmt.Sprintf("%s to count %d removals", s.id, want), func() bool { return s.metricSum(t, m) >= want })
	if got := s.metricSum(t, m); got != want {
		t.Fatalf("%s counts %d removals, want exactly %d", s.id, got, want)
	}
}

// TestServeKill9AtEachStepOfARemoval: a grant of a target without
// batching expires; the manual expiry scan creates its revocation, and the
// `changeflow serve` process running the removal is killed -9 inside every
// step in turn, each time after the step's remote write took effect and
// before its own write: create_mr (the removal committed and its MR opened,
// the answer held), poll_pipeline (the pipeline kept running, a read of
// the MR answered and its answer held), approve (the first bot's
// approval applied, the answer held), merge (merged, the answer held) and
// the deploy callback's handling (recorded, the flip blocked on a row lock
// the test holds). The next instance finishes each: the removal ends
// REVOKED with one MR, merged, one removal commit on main, each bot's
// approval once, created once, flipped once and counted once on the
// surviving instance; the file is exact.
func TestServeKill9AtEachStepOfARemoval(t *testing.T) {
	t.Parallel()
	// No scheduled scan in the test's time: the manual scan creates the
	// revocation on the instance the test chose.
	w := newCrashWorld(t, "expiry:\n  interval: 1h\n")
	sim := w.sim
	const grant = "g-solo"
	rev := domain.RevocationID(grant)
	grants := []seededGrant{{op: grant, user: "alice", target: "solo"}, {op: "g-live", user: "bob", target: "solo"}}
	seedGrants(t, w.st, sim, grants)
	expireGrants(t, w.st, grants[:1])

	// The removal MR's check pipeline runs until step 2 lets it pass.
	w.holdPipelines()

	// 1. create_mr of the removal: committed, the MR opened, its answer held.
	create := w.insideCreateMR()
	create.what = "the removal's MR"
	create.start = func(a *serveProc) {
		if n, err := a.expiryScan(); err != nil || n != 1 {
			t.Fatalf("the scan created %d revocations (%v), want 1", n, err)
		}
	}
	w.killInside(create)
	iid := sim.mrs(t)[0].IID

	// 2. poll_pipeline: the next instance adopts the MR and polls its
	// pipeline (still running); killed while a read's answer is held.
	w.killInside(w.insidePoll(flow.ActionPollPipeline))
	w.passPipeline(iid)

	// 3. approve: the first bot's approval applied, its answer held.
	w.killInside(w.insideApprove(iid, flow.ActionApprove))

	// 4. merge: merged, the answer held; deployments queue meanwhile so
	// the deploy callback comes in step 5.
	sim.must(t, http.MethodPost, "/deploy/_control/pause", nil, nil)
	w.killInside(w.insideMerge(flow.ActionMerge))

	// 5. The deploy callback: recorded, then the flip waits for the
	// revocation's row lock, which the test holds; killed there.
	d := w.next()
	w.untilStep(rev, domain.StepHandleMerged)
	w.killInsideDeployCallback(d, rev, iid, domain.BindingRevoking)

	// 6. The last instance finishes: reconciliation's exact match finds
	// the recorded callback and flips once.
	e := w.next()
	untilRevoked(t, w.st, 60*time.Second, []string{grant})
	untilLag(t, e, 1)
	if n := e.metricSum(t, "changeflow_revocations_total"); n != 0 {
		t.Fatalf("%s counts %d revocations created; the dead first instance created the only one", e.id, n)
	}
	w.removalOnce(grant)
	if mrs := sim.mrs(t); len(mrs) != 1 || mrs[0].State != "merged" {
		t.Fatalf("MRs %+v, want one, merged", mrs)
	}
	if got := sim.approvedBy(t, iid); !sameSet(got, []string{"approver-1", "approver-2"}) {
		t.Fatalf("approved by %v, want each bot once", got)
	}
	if strings.Contains(sim.fileOnMain(t, "solo"), grant) || !strings.Contains(sim.fileOnMain(t, "solo"), "g-live") {
		t.Fatalf("the file on main:\n%s", sim.fileOnMain(t, "solo"))
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, grantIDs(grants))
}

// gatherRemovals admits, on an instance without rounds, the new grant
// requests ops (one user each, approved) and — by its manual expiry scan —
// the revocations of the expired grants revs, then stops that instance
// politely: the next instance's first round claims them all.
func (w *crashWorld) gatherRemovals(ops, users []string, revs []string) {
	w.t.Helper()
	a := w.next("CHANGEFLOW_BATCH_INTERVAL=1h", "CHANGEFLOW_BATCH_GATHERWINDOW=1h")
	for i, op := range ops {
		a.submit(w.t, users[i], op, "grouped")
	}
	if len(ops) > 0 {
		w.untilBinding(domain.BindingApprovalSent, ops...)
		for _, op := range ops {
			w.sim.approve(w.t, op)
		}
	}
	if n, err := a.expiryScan(); err != nil || n != len(revs) {
		w.t.Fatalf("the scan created %d revocations (%v), want %d", n, err, len(revs))
	}
	for _, id := range append(slices.Clone(ops), revs...) {
		waitFor(w.t, 30*time.Second, id+" admitted", func() bool {
			return domain.StepStatus(w.op(id).Step) == domain.StepCreateAdmitted
		})
	}
	a.stop()
}

// TestServeKill9AtEachStepOfABatchWithRemovals: a batch of one new grant
// and two removals of expired grants, and a `changeflow serve` process
// killed -9 inside the round's MR creation (claimed, committed — one
// commit adding one entry and removing two — the MR opened, its answer
// held: a RUNNING batch with no MR recorded), inside batch_poll_pipeline
// (the pipeline kept running, a read of the MR answered and its answer
// held), inside batch_approve (the first bot's approval applied, the
// answer held) and inside batch_merge (merged, the answer held). The next
// instance's round finishes building the dead round's batch, adopting its
// MR; the batch steps resume. The
// grant ends VALIDATED and both removals REVOKED in the one SUCCEEDED
// batch, with one MR, one commit carrying every member, each flipped and
// counted once on the surviving instance; the file is exact.
func TestServeKill9AtEachStepOfABatchWithRemovals(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "expiry:\n  interval: 1h\nbatch:\n  interval: 200ms\n  maxRequests: 10\n  resumeAfter: 1s\n")
	sim := w.sim
	grants := []seededGrant{{op: "g-b1", user: "dave", target: "grouped"}, {op: "g-b2", user: "erin", target: "grouped"}}
	seedGrants(t, w.st, sim, grants)
	expireGrants(t, w.st, grants)
	revs := []string{domain.RevocationID("g-b1"), domain.RevocationID("g-b2")}
	w.gatherRemovals([]string{"op-new"}, []string{"carol"}, revs)

	// The batch MR's check pipeline runs until step 2 lets it pass.
	w.holdPipelines()

	// 1. The round's MR creation: the MR opened, its answer held.
	w.killInside(w.insideRoundMR())
	iid := sim.mrs(t)[0].IID

	// 2. batch_poll_pipeline: the next instance's round finishes building
	// the dead round's batch, adopting its MR, and the driver polls the
	// pipeline (still running); killed while a read's answer is held.
	w.killInside(w.insidePoll(flow.ActionBatchPollPipeline))
	w.passPipeline(iid)

	// 3. batch_approve: the first bot's approval applied, its answer held.
	w.killInside(w.insideApprove(iid, flow.ActionBatchApprove))

	// 4. batch_merge: merged, the answer held.
	w.killInside(w.insideMerge(flow.ActionBatchMerge))

	// 5. The last instance finishes.
	d := w.next()
	w.untilBinding(domain.BindingValidated, "op-new")
	untilRevoked(t, w.st, 60*time.Second, grantIDs(grants))
	untilMetric(t, d, 1)
	untilLag(t, d, len(revs))
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch"); n != 1 {
		t.Fatalf("%d batches, want the one the dead round claimed", n)
	}
	if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch WHERE status = 2 AND mr_iid = ?", iid); n != 1 {
		t.Fatalf("the batch of MR !%d did not succeed", iid)
	}
	if mrs := sim.mrs(t); len(mrs) != 1 || mrs[0].State != "merged" {
		t.Fatalf("MRs %+v, want one, merged", mrs)
	}
	for _, id := range append([]string{"op-new"}, revs...) {
		if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch_history WHERE operation_id = ?", id); n != 1 {
			t.Fatalf("%s is in %d batches' history, want 1", id, n)
		}
	}
	if n := w.flips("op-new"); n != 1 {
		t.Fatalf("op-new: %d flips to VALIDATED, want 1", n)
	}
	if n := sim.commitsOnMain(t, "op-new"); n != 1 {
		t.Fatalf("%d commits for op-new on main, want 1", n)
	}
	for _, g := range grantIDs(grants) {
		w.removalOnce(g)
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, append(grantIDs(grants), "op-new"))
}

// TestServeKill9InsideBatchSettlementOfRemovals: a batch of two removals
// whose check pipeline fails; its driver runs batch_settle, which closes
// the MR, and the serve process is killed -9 right after GitLab closed it
// (the answer held). The next instance resumes the settlement: the batch
// FAILED (BATCH_PIPELINE_FAILED), the removals re-admitted, and the halved
// rounds remove them. Each ends REVOKED in exactly one SUCCEEDED batch,
// flipped and counted once, one removal commit each on main; the failed
// batch's MR is closed and its commit never reaches main.
func TestServeKill9InsideBatchSettlementOfRemovals(t *testing.T) {
	t.Parallel()
	w := newCrashWorld(t, "expiry:\n  interval: 1h\nbatch:\n  interval: 200ms\n  maxRequests: 10\n  resumeAfter: 1s\n")
	sim := w.sim
	grants := []seededGrant{{op: "g-s1", user: "dave", target: "grouped"}, {op: "g-s2", user: "erin", target: "grouped"}}
	seedGrants(t, w.st, sim, grants)
	expireGrants(t, w.st, grants)
	revs := []string{domain.RevocationID("g-s1"), domain.RevocationID("g-s2")}
	w.gatherRemovals(nil, nil, revs)

	sim.must(t, http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "fail", "count": 1}, nil)
	w.killInside(w.insideSettlementClose())
	failedIID := sim.mrs(t)[0].IID

	b := w.next()
	untilRevoked(t, w.st, 60*time.Second, grantIDs(grants))
	untilLag(t, b, len(revs))
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
	for _, rev := range revs {
		if n := countSQL(t, w.st, "SELECT COUNT(*) FROM merge_batch_history h JOIN merge_batch b ON b.id = h.batch_id WHERE b.status = 2 AND h.operation_id = ?", rev); n != 1 {
			t.Fatalf("%s is in %d succeeded batches, want 1", rev, n)
		}
	}
	for _, g := range grantIDs(grants) {
		w.removalOnce(g)
	}
	sim.filesExact(t, w.st, []string{"solo", "grouped"}, grantIDs(grants))
}
