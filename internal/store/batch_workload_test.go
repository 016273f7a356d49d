package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// The concurrent workload shared by the race test (goroutines of one
// process) and the multi-process test (several OS processes on one MariaDB
// database): claim rounds, fresh and repeated admissions, settlements and
// timeout sweeps, all at once, each worker recording what the store
// answered. checkBatchInvariants then compares those answers with what the
// database holds.

// batchWorkloadProjects are the projects the workload spreads over: several
// slots, so per-project exclusion is exercised, not just one global slot.
func batchWorkloadProjects() []int64 { return []int64{1, 2, 3} }

// batchWorkloadDupOps is the pool of operationIds that many workers admit again
// and again, in every process (I4 under contention).
func batchWorkloadDupOps() []string {
	ops := make([]string, 24)
	for i := range ops {
		ops[i] = fmt.Sprintf("dup-%02d", i)
	}
	return ops
}

// batchDupProject is the one project an operationId of the pool belongs to.
func batchDupProject(i int) int64 {
	projects := batchWorkloadProjects()
	return projects[i%len(projects)]
}

// batchWorkloadMix says how many workers of each kind to run.
type batchWorkloadMix struct {
	Claimers, FreshAdmitters, DupAdmitters, Settlers, Sweepers int
}

// batchTally is what the workers saw. It is JSON so child processes can hand
// it to the parent.
type batchTally struct {
	mu sync.Mutex
	// Admitted counts, per operationId, the admissions that returned true.
	Admitted map[string]int
	// Readmitted counts, per operationId, the re-admissions of committed
	// FAILED settlements.
	Readmitted map[string]int
	// Claimed are the members each claimed batch was returned with.
	Claimed map[int64][]store.BatchMember
	// Writes counts, per batch, the state writes that reported success
	// (block, settle, sweep): the batch's version must be 1 + that.
	Writes map[int64]int
	// Ops counts every answer by kind ("claim/claimed", "admit/duplicate",
	// "settle/preempted" …), for the log.
	Ops map[string]int
	// Errors are unexpected errors; any fails the test.
	Errors []string
}

func newBatchTally() *batchTally {
	return &batchTally{
		Admitted:   map[string]int{},
		Readmitted: map[string]int{},
		Claimed:    map[int64][]store.BatchMember{},
		Writes:     map[int64]int{},
		Ops:        map[string]int{},
	}
}

func (t *batchTally) op(kind string) {
	t.mu.Lock()
	t.Ops[kind]++
	t.mu.Unlock()
}

func (t *batchTally) fail(format string, args ...any) {
	t.mu.Lock()
	t.Errors = append(t.Errors, fmt.Sprintf(format, args...))
	t.mu.Unlock()
}

func (t *batchTally) merge(o *batchTally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range o.Admitted {
		t.Admitted[k] += v
	}
	for k, v := range o.Readmitted {
		t.Readmitted[k] += v
	}
	for k, v := range o.Claimed {
		t.Claimed[k] = v
	}
	for k, v := range o.Writes {
		t.Writes[k] += v
	}
	for k, v := range o.Ops {
		t.Ops[k] += v
	}
	t.Errors = append(t.Errors, o.Errors...)
}

// summary renders Ops sorted, for t.Log and docs.
func (t *batchTally) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.Ops))
	for k := range t.Ops {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, t.Ops[k])
	}
	return strings.TrimSpace(b.String())
}

// runBatchWorkload runs mix against s until stop closes. prefix makes fresh
// operationIds unique per process. Database calls use ctx, which outlives
// stop: an operation in flight finishes and is recorded, so the batchTally
// never misses a write that committed.
func runBatchWorkload(ctx context.Context, s *store.Store, mix batchWorkloadMix, prefix string, stop <-chan struct{}, tl *batchTally) {
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	dups := batchWorkloadDupOps()
	projects := batchWorkloadProjects()
	anyProject := func() int64 { return projects[rand.IntN(len(projects))] }
	var wg sync.WaitGroup
	for range mix.Claimers {
		wg.Go(func() {
			for !stopped() {
				c, err := s.BatchClaim(ctx, store.BatchClaimParams{
					ProjectID: anyProject(), MaxRequests: 1 + rand.IntN(8), LockWait: time.Second,
				})
				if err != nil {
					tl.fail("claim: %v", err)
					continue
				}
				tl.op("claim/" + c.Outcome.String())
				if c.Outcome == store.ClaimClaimed {
					tl.mu.Lock()
					tl.Claimed[c.BatchID] = c.Members
					tl.mu.Unlock()
				}
			}
		})
	}
	admit := func(op string, project int64) {
		ok, err := s.BatchAdmit(ctx, op, project)
		switch {
		case errors.Is(err, domain.ErrBusy):
			tl.op("admit/busy")
		case err != nil:
			tl.fail("admit %s: %v", op, err)
		case ok:
			tl.mu.Lock()
			tl.Admitted[op]++
			tl.Ops["admit/admitted"]++
			tl.mu.Unlock()
		default:
			tl.op("admit/duplicate")
		}
	}
	var fresh atomic.Int64
	for range mix.FreshAdmitters {
		wg.Go(func() {
			for !stopped() {
				admit(fmt.Sprintf("%s-%d", prefix, fresh.Add(1)), anyProject())
			}
		})
	}
	for range mix.DupAdmitters {
		wg.Go(func() {
			for !stopped() {
				i := rand.IntN(len(dups))
				admit(dups[i], batchDupProject(i))
			}
		})
	}
	for range mix.Settlers {
		wg.Go(func() {
			for !stopped() {
				batchSettleOne(ctx, s, anyProject(), tl)
			}
		})
	}
	for range mix.Sweepers {
		wg.Go(func() {
			for !stopped() {
				settled, err := sweepTimedOut(ctx, s, 40*time.Millisecond)
				if err != nil {
					tl.fail("sweep: %v", err)
					continue
				}
				tl.mu.Lock()
				for _, id := range settled {
					tl.Writes[id]++
					tl.Ops["sweep/settled"]++
				}
				tl.Ops["sweep/rounds"]++
				tl.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// batchSettleOne reads a project's active batch and moves it on at random, as
// the running task, an operator or the sweep would — with the state and
// version it read, so concurrent paths race on the guarded write. A
// settlement is the product's (BatchApply): a FAILED one re-admits, in
// its own transaction, a random subset of the members it read before,
// as the workflow re-admits all but the culprits.
func batchSettleOne(ctx context.Context, s *store.Store, project int64, tl *batchTally) {
	b, err := s.BatchActive(ctx, project)
	if errors.Is(err, domain.ErrNotFound) {
		tl.op("settle/none")
		return
	}
	if err != nil {
		tl.fail("active batch: %v", err)
		return
	}
	p := store.BatchApplyParams{BatchID: b.ID, From: b.Status, Version: b.Version, FailureCode: "RACE", ProjectID: b.ProjectID}
	var kind string
	switch n := rand.IntN(3); {
	case b.Status == domain.BatchRunning && n == 0:
		kind = "block"
		_, err = s.BatchBlock(ctx, store.BatchBlockParams{ID: b.ID, Version: b.Version, Code: "RACE"})
	case n == 1:
		kind = "succeed"
		p.SettleTo = domain.BatchSucceeded
		_, err = s.BatchApply(ctx, p)
	default:
		kind = "fail"
		var members []store.BatchMember
		if members, err = s.BatchMembers(ctx, b.ID); err != nil {
			tl.fail("members of batch %d: %v", b.ID, err)
			return
		}
		for _, m := range members {
			if rand.IntN(2) == 0 {
				p.Readmit = append(p.Readmit, m.OperationID)
			}
		}
		p.SettleTo = domain.BatchFailed
		var released []store.BatchMember
		released, err = s.BatchApply(ctx, p)
		if err == nil && !slices.Equal(released, members) {
			tl.fail("fail batch %d: released %v, its members are %v", b.ID, released, members)
		}
	}
	switch {
	case errors.Is(err, domain.ErrPreempted):
		tl.op("settle/preempted")
	case errors.Is(err, domain.ErrBusy):
		tl.op("settle/busy")
	case err != nil:
		tl.fail("%s batch %d: %v", kind, b.ID, err)
	default:
		tl.mu.Lock()
		tl.Writes[b.ID]++
		tl.Ops["settle/"+kind]++
		for _, op := range p.Readmit {
			tl.Readmitted[op]++
			tl.Ops["settle/readmitted"]++
		}
		tl.mu.Unlock()
	}
}

// sampleBatchInvariants checks, at sampled moments until stop closes, what must
// hold at every instant: at most one active batch per project (I1, checked
// by status, not through the slot column it is enforced by) and no
// committed batch without members. Each check is one statement, so it sees
// one consistent snapshot. It returns the number of samples taken.
func sampleBatchInvariants(ctx context.Context, s *store.Store, stop <-chan struct{}, tl *batchTally) int {
	samples := 0
	for {
		select {
		case <-stop:
			return samples
		default:
		}
		var doubled, empty int
		err := s.DB().QueryRowContext(ctx,
			"SELECT (SELECT COUNT(*) FROM (SELECT project_id FROM merge_batch WHERE status IN (?, ?)"+
				" GROUP BY project_id HAVING COUNT(*) > 1) d),"+
				" (SELECT COUNT(*) FROM merge_batch b WHERE NOT EXISTS"+
				" (SELECT 1 FROM merge_batch_history h WHERE h.batch_id = b.id))",
			domain.BatchRunning, domain.BatchBlocked).Scan(&doubled, &empty)
		switch {
		case errors.Is(err, context.Canceled):
			return samples
		case err != nil:
			tl.fail("sample: %v", err)
		case doubled > 0:
			tl.fail("sample %d: %d projects with more than one active batch", samples, doubled)
		case empty > 0:
			tl.fail("sample %d: %d batches without members", samples, empty)
		}
		samples++
	}
}

// checkBatchInvariants compares the database after a workload with what
// the workers were told.
func checkBatchInvariants(t *testing.T, s *store.Store, tl *batchTally) {
	t.Helper()
	db := s.DB()
	require.Empty(t, tl.Errors, "unexpected errors")

	// I2: no request row in two batches, and no operation in two batches
	// unless all but one of them failed (a failed batch releases its
	// members for re-admission).
	require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM merge_batch_history WHERE request_id IS NULL"))
	require.Equal(t, 0, count(t, db,
		"SELECT COUNT(*) FROM (SELECT request_id FROM merge_batch_history GROUP BY request_id HAVING COUNT(*) > 1) d"),
		"a request row claimed twice")
	require.Equal(t, 0, count(t, db,
		"SELECT COUNT(*) FROM (SELECT h.operation_id FROM merge_batch_history h JOIN merge_batch b ON b.id = h.batch_id"+
			" WHERE b.status <> ? GROUP BY h.operation_id HAVING COUNT(*) > 1) d", domain.BatchFailed),
		"an operation in two batches that did not fail")

	// Every claimed batch has at least one member, and exactly the members
	// its claim returned; no batch exists that no claim reported.
	require.Equal(t, 0, count(t, db,
		"SELECT COUNT(*) FROM merge_batch b WHERE NOT EXISTS (SELECT 1 FROM merge_batch_history h WHERE h.batch_id = b.id)"),
		"a batch without members")
	page, err := s.BatchList(t.Context(), store.BatchListParams{Limit: store.BatchListMaxLimit})
	require.NoError(t, err)
	var batches []store.Batch
	for {
		batches = append(batches, page.Items...)
		if page.NextBeforeID == 0 {
			break
		}
		page, err = s.BatchList(t.Context(), store.BatchListParams{Limit: store.BatchListMaxLimit, BeforeID: page.NextBeforeID})
		require.NoError(t, err)
	}
	require.Len(t, batches, len(tl.Claimed), "batches in the database vs claims reported")
	active := map[int64]int{}
	for _, b := range batches {
		members, err := s.BatchMembers(t.Context(), b.ID)
		require.NoError(t, err)
		require.Equal(t, tl.Claimed[b.ID], members, "batch %d: history vs the claim's answer", b.ID)

		// No lost update: every successful guarded write bumped the version
		// once, and no two writers both succeeded from one version.
		require.Equal(t, int64(1+tl.Writes[b.ID]), b.Version, "batch %d (%s): version vs successful writes", b.ID, b.Status)

		rows := count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id = ?", b.ID)
		if b.Status == domain.BatchFailed {
			require.Zero(t, rows, "failed batch %d still holds request rows", b.ID)
		} else {
			require.Equal(t, len(members), rows, "batch %d: request rows vs history", b.ID)
		}
		if b.Status.Active() {
			active[b.ProjectID]++
		}
	}
	for project, n := range active {
		require.LessOrEqual(t, n, 1, "project %d", project)
	}
	require.Equal(t, 0, count(t, db,
		"SELECT COUNT(*) FROM merge_batch_request r WHERE r.batch_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM merge_batch b WHERE b.id = r.batch_id)"))

	// I4: every admission that said "admitted", and every re-admission of
	// a committed FAILED settlement, created the one row of its
	// operationId; that row still exists, or a failed batch released it.
	// So per operationId: admissions + re-admissions = rows now +
	// memberships of failed batches.
	ops := map[string]bool{}
	for op := range tl.Admitted {
		ops[op] = true
	}
	for op := range tl.Readmitted {
		ops[op] = true
	}
	rows, err := db.QueryContext(t.Context(), "SELECT operation_id FROM merge_batch_request")
	require.NoError(t, err)
	for rows.Next() {
		var op string
		require.NoError(t, rows.Scan(&op))
		ops[op] = true
	}
	require.NoError(t, rows.Err())
	rows.Close()
	failed := map[string]int{}
	rows, err = db.QueryContext(t.Context(),
		"SELECT h.operation_id, COUNT(*) FROM merge_batch_history h JOIN merge_batch b ON b.id = h.batch_id WHERE b.status = ? GROUP BY h.operation_id",
		domain.BatchFailed)
	require.NoError(t, err)
	for rows.Next() {
		var (
			op string
			n  int
		)
		require.NoError(t, rows.Scan(&op, &n))
		failed[op] = n
	}
	require.NoError(t, rows.Err())
	rows.Close()
	now := map[string]int{}
	rows, err = db.QueryContext(t.Context(), "SELECT operation_id, COUNT(*) FROM merge_batch_request GROUP BY operation_id")
	require.NoError(t, err)
	for rows.Next() {
		var (
			op string
			n  int
		)
		require.NoError(t, rows.Scan(&op, &n))
		now[op] = n
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for op := range ops {
		require.LessOrEqual(t, now[op], 1, "%s has two rows", op)
		require.Equal(t, tl.Admitted[op]+tl.Readmitted[op], now[op]+failed[op],
			"%s: admissions + re-admissions vs rows now + failed memberships", op)
	}
}
