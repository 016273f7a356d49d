package workflow_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/batch"
)

// A batch that ends without merging leaves no MR open (docs/flows/batch.md,
// "Batch rounds", "A round whose batch ended meanwhile"): the round that
// opens a batch MR after its batch was finished elsewhere — another round
// resumed and merged it, an operator settled it, every member was settled
// as nothing to remove — closes that MR itself. In
// TestServeThreeInstancesRevokeEachExpiredGrantOnce a round's look-up said
// "no MR yet", another instance resumed the batch (batch.resumeAfter 1 s
// on a loaded machine) and merged it, and the first round then opened a
// second MR on the merged branch: changeflow/batch-2 stayed open for good.

// heldCall holds the first call of one GitLab method before it reaches
// GitLab, until released: a round stalled right there, on a loaded
// machine. Calls after the first pass through.
type heldCall struct {
	gitlab.GitLab
	method  string // "CreateMR" or "CreateCommit"
	once    *sync.Once
	reached chan struct{}
	release chan struct{}
}

func newHeldCall(g gitlab.GitLab, method string) heldCall {
	return heldCall{GitLab: g, method: method, once: &sync.Once{}, reached: make(chan struct{}), release: make(chan struct{})}
}

func (h heldCall) hold(ctx context.Context, method string) error {
	if method != h.method {
		return nil
	}
	first := false
	h.once.Do(func() { first = true })
	if !first {
		return nil
	}
	close(h.reached)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h heldCall) CreateMR(ctx context.Context, project string, r gitlab.CreateMRRequest) (gitlab.MR, error) {
	if err := h.hold(ctx, "CreateMR"); err != nil {
		return gitlab.MR{}, err
	}
	return h.GitLab.CreateMR(ctx, project, r)
}

func (h heldCall) CreateCommit(ctx context.Context, project string, c gitlab.CommitRequest) (gitlab.Commit, error) {
	if err := h.hold(ctx, "CreateCommit"); err != nil {
		return gitlab.Commit{}, err
	}
	return h.GitLab.CreateCommit(ctx, project, c)
}

// roundsOf is a second instance's round service over the same database
// and simulators: its own instance.id (which never heartbeats, so the
// world's rounds may resume what it claimed at once, as another instance
// does once batch.resumeAfter has passed) and its own GitLab client.
func (w *batchWorld) roundsOf(instance string, g gitlab.GitLab) *batch.Rounds {
	w.t.Helper()
	ov := e2eOverlay(w.simTS.URL)
	ov["instance.id"] = instance
	mgr, err := config.Load(w.t.Context(), config.Options{Overlay: ov})
	require.NoError(w.t, err)
	snap := mgr.Current()
	_ = mgr.Close()
	d := w.deps
	d.Config = func() *config.Snapshot { return snap }
	d.GitLab = g
	return batch.NewRounds(batchFlow(d), nil)
}

// noMROpenForEndedBatches is the invariant: no MR of the project is open
// while its batch has ended, every MR of an ended batch's branch is merged
// or closed, and a SUCCEEDED batch's recorded MR is merged.
func (w *batchWorld) noMROpenForEndedBatches() {
	w.t.Helper()
	page, err := w.st.BatchList(w.t.Context(), store.BatchListParams{ProjectID: 1, Limit: 100})
	require.NoError(w.t, err)
	require.Zero(w.t, page.NextBeforeID, "one page holds every batch of the test")
	for _, b := range page.Items {
		if b.Status.Active() {
			continue
		}
		for _, mr := range w.batchMRs(b.ID) {
			state, _ := mr["state"].(string)
			require.Contains(w.t, []string{"merged", "closed"}, state,
				"batch %d ended %s, and MR !%v of its branch is %s", b.ID, b.Status, mr["iid"], state)
			if b.Status == domain.BatchSucceeded && b.MRIID != 0 && int64(mr["iid"].(float64)) == b.MRIID {
				require.Equal(w.t, "merged", state, "batch %d SUCCEEDED with MR !%d", b.ID, b.MRIID)
			}
		}
	}
	var open []map[string]any
	w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests?state=opened", nil, &open)
	require.Empty(w.t, open, "no MR is left open once every batch has ended")
}

// TestBatchMRCreatedAfterItsBatchEndedIsClosed: a round claims a batch of
// two removals, commits, and stalls — held in CreateMR (its look-up said
// "no MR yet"; the creation is in flight) or before its commit — while the
// batch ends elsewhere:
//
//   - another instance's round resumes the batch, opens and records its MR,
//     and the batch merges (both REVOKED);
//   - an operator settles the batch (no MR found: FAILED, re-admitted);
//   - a maintainer removed both entries by hand, and the resuming round
//     settles every member as nothing to remove (SUCCEEDED without an MR).
//
// Then the stalled round goes on. Before the fix it opened a second MR on
// the batch's branch (the merged one does not block it) and left it open.
// Now an MR created after its batch ended is closed by the round that
// opened it, and a round that finds its batch ended or recorded before it
// creates anything opens none. Each ends with every member REVOKED once and
// the files on main exact.
func TestBatchMRCreatedAfterItsBatchEndedIsClosed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// held is the stalled round's held call.
		held string
		// end ends the batch elsewhere while the round is held.
		end string
		// mrs is how many MRs the batch's branch ends with.
		mrs int
	}{
		{"merged by another round while the MR creation was in flight", "CreateMR", "merged", 2},
		{"settled by an operator while the MR creation was in flight", "CreateMR", "settled", 1},
		{"every member nothing to remove while the MR creation was in flight", "CreateMR", "absent", 1},
		{"merged by another round before the stalled round committed", "CreateCommit", "merged", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			storetest.RaceOnSQLite(t, func(t *testing.T, st *store.Store) {
				w := newRevokeWorld(t, st)
				grants := []string{"stray-1", "stray-2"}
				w.admitted(grants...)
				w.roundsUntilIdle()
				for _, id := range grants {
					w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
				}
				w.expire(grants...)
				require.Equal(t, 2, w.scan().Revoked)
				revs := []string{domain.RevocationID(grants[0]), domain.RevocationID(grants[1])}
				storetest.UntilAdmittedBeforeNow(t, st, revs...)

				held := newHeldCall(w.deps.GitLab, tc.held)
				slow := w.roundsOf("slow-builder", held)
				type result struct {
					r   batch.RoundResult
					err error
				}
				done := make(chan result, 1)
				go func() {
					r, err := slow.RunRound(context.WithoutCancel(t.Context()), 1)
					done <- result{r, err}
				}()
				select {
				case <-held.reached:
				case <-time.After(time.Minute):
					t.Fatalf("the stalled round never reached %s", tc.held)
				}
				page, err := st.BatchList(t.Context(), store.BatchListParams{ProjectID: 1, Status: domain.BatchRunning, Limit: 1})
				require.NoError(t, err)
				require.Len(t, page.Items, 1)
				batch := page.Items[0]
				require.Zero(t, batch.MRIID, "held before the MR exists")

				switch tc.end {
				case "merged":
					r, err := w.rounds.RunRound(t.Context(), 1)
					require.NoError(t, err)
					require.True(t, r.Resumed, "%+v", r)
					require.Equal(t, batch.ID, r.BatchID)
					for _, rev := range revs {
						w.until(rev, "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
					}
				case "settled":
					res, err := batchFlow(w.deps).SettleBatch(t.Context(), batch.ID, "OPERATOR", "settled by hand", "olivia")
					require.NoError(t, err)
					require.Equal(t, 2, res.Readmitted, "%+v", res)
				case "absent":
					// The stalled round checked main before its commit;
					// the entries go now, and the resuming round finds
					// nothing to remove.
					w.removeByHand(grants...)
					r, err := w.rounds.RunRound(t.Context(), 1)
					require.NoError(t, err)
					require.True(t, r.Resumed, "%+v", r)
				}
				b, err := st.BatchGet(t.Context(), batch.ID)
				require.NoError(t, err)
				require.False(t, b.Status.Active(), "batch %d ended elsewhere: %s", b.ID, b.Status)

				close(held.release)
				var res result
				select {
				case res = <-done:
				case <-time.After(time.Minute):
					t.Fatal("the stalled round never returned")
				}
				require.NoError(t, res.err, "the stalled round: %+v", res.r)

				if tc.end == "settled" {
					w.roundsUntilIdle()
				}
				for _, rev := range revs {
					w.until(rev, "removed", func(o store.Operation, b store.Binding) bool {
						return b.Status == domain.BindingRevoked && o.LeaseOwner == "" && o.NextAction == ""
					})
				}
				w.noMROpenForEndedBatches()
				require.Len(t, w.batchMRs(batch.ID), tc.mrs, "MRs of the batch's branch")
				for _, id := range grants {
					w.revokedOnce(id)
				}
				w.filesExact(grants...)
			})
		})
	}
}
