package workflow_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/approval"
	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/filecheck"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/lifecycle"
	"changeflow/internal/workflow/reconcile"
	"changeflow/internal/workflow/single"
)

// revokeWorld is the batch world with the revocation hooks counted.
type revokeWorld struct {
	*batchWorld
	expiry *lifecycle.Expiry

	rmu       sync.Mutex
	revoked   map[string]int // REVOKED flips per revocation (I9)
	created   map[domain.RevokeReason]int
	createdBy map[string]int // revocations created, per operationId
	renewals  map[string]int // renewals ended, per "operationId outcome" (I9)
	withdraws map[string]int // withdraw calls to the approval system, per approval id
}

// countingApproval counts the withdraw calls that leave the adapter.
type countingApproval struct {
	approval.Service
	w *revokeWorld
}

func (c countingApproval) Withdraw(ctx context.Context, id, comment string) (approval.Approval, error) {
	c.w.rmu.Lock()
	c.w.withdraws[id]++
	c.w.rmu.Unlock()
	return c.Service.Withdraw(ctx, id, comment)
}

// withdrawCalls is how often the approval id was withdrawn through the
// adapter.
func (w *revokeWorld) withdrawCalls(id string) int {
	w.rmu.Lock()
	defer w.rmu.Unlock()
	return w.withdraws[id]
}

func newRevokeWorld(t *testing.T, st *store.Store, wrap ...func(gitlab.GitLab) gitlab.GitLab) *revokeWorld {
	t.Helper()
	w := &revokeWorld{revoked: map[string]int{}, created: map[domain.RevokeReason]int{}, createdBy: map[string]int{},
		renewals: map[string]int{}, withdraws: map[string]int{}}
	hooks := func(d *flowDeps) {
		if d.Approval != nil {
			d.Approval = countingApproval{Service: d.Approval, w: w}
		}
		observe(d).revoked = func(_ context.Context, f store.Flip) {
			w.rmu.Lock()
			w.revoked[f.OperationID]++
			w.rmu.Unlock()
		}
		observe(d).revocation = func(_ context.Context, r store.RevocationCreated, reason domain.RevokeReason) {
			w.rmu.Lock()
			w.created[reason]++
			w.createdBy[r.OperationID]++
			w.rmu.Unlock()
		}
		observe(d).renewalEnded = func(_ context.Context, id string, o domain.RenewalOutcome) {
			w.rmu.Lock()
			w.renewals[id+" "+string(o)]++
			w.rmu.Unlock()
		}
	}
	base := newWorld(t, st, func(s *worldSetup) { s.deps = hooks })
	deps := e2eDeps(st, base.cfg.Load, countingTransport{base}, func(_ context.Context, f store.Flip) {
		base.mu.Lock()
		base.validated[f.OperationID]++
		base.mu.Unlock()
	})
	hooks(&deps)
	for _, f := range wrap {
		deps.GitLab = f(deps.GitLab)
	}
	batch.Register(base.eng, batchFlow(deps))
	w.batchWorld = &batchWorld{world: base, deps: deps, rounds: batch.NewRounds(batchFlow(deps), base.eng)}
	w.expiry = lifecycle.NewExpiry(deps.Env, deps.Store)
	w.expiry.Wake = base.eng.Wake
	return w
}

// granted drives an approve-first request for a target without batching
// to VALIDATED.
func (w *revokeWorld) granted(id, subject, target string) {
	w.t.Helper()
	w.submit(id, subject, target, true)
	w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
	w.decide(id, "approve")
	w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
}

// expire moves the expiry of id's binding an hour into the past (database
// clock), as if its time had come, and its entry's on main to match (so
// the file and the database agree, as they would have from the start).
func (w *revokeWorld) expire(ids ...string) {
	w.t.Helper()
	for _, id := range ids {
		past, arg := w.st.Dialect().NowAdd(-time.Hour)
		res, err := w.st.DB().ExecContext(w.t.Context(), "UPDATE binding SET expires_at = "+past+" WHERE operation_id = ?", arg, id)
		require.NoError(w.t, err)
		n, _ := res.RowsAffected()
		require.Equal(w.t, int64(1), n, "binding of %s", id)
		b, err := w.st.BindingGetByOperation(w.t.Context(), id)
		require.NoError(w.t, err)
		if code := w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/repository/files/bindings%2F"+b.TargetKey+".yaml?ref=main", nil, nil); code != http.StatusOK {
			continue
		}
		f, err := bindingfile.Parse([]byte(w.fileOnMain(b.TargetKey)))
		require.NoError(w.t, err)
		if e, ok := f.Entry(b.Subject); ok && e.OperationID == id {
			e.ExpiresAt = b.ExpiresAt
			w.commitOnMain("update", b.TargetKey, string(f.With(e).Marshal()))
		}
	}
}

// scan runs one expiry scan.
func (w *revokeWorld) scan() lifecycle.ExpiryResult {
	w.t.Helper()
	res, err := w.expiry.ScanOnce(w.t.Context())
	require.NoError(w.t, err)
	return res
}

// revokedOnce: the REVOKED side effect ran exactly once for grant id's
// revocation, and it was created once.
func (w *revokeWorld) revokedOnce(id string) {
	w.t.Helper()
	rev := domain.RevocationID(id)
	require.Eventually(w.t, func() bool {
		w.rmu.Lock()
		defer w.rmu.Unlock()
		return w.revoked[rev] >= 1
	}, 10*time.Second, 5*time.Millisecond, "%s: no REVOKED side effect", rev)
	w.rmu.Lock()
	defer w.rmu.Unlock()
	require.Equal(w.t, 1, w.revoked[rev], "%s flipped to REVOKED once", rev)
	require.Equal(w.t, 1, w.createdBy[rev], "%s created once", rev)
}

// entryOf returns subject's entry in target's file on main.
func (w *revokeWorld) entryOf(target, subject string) (bindingfile.Entry, bool) {
	w.t.Helper()
	f, err := bindingfile.Parse([]byte(w.fileOnMain(target)))
	require.NoError(w.t, err)
	return f.Entry(subject)
}

// TestExpiredGrantIsRemovedAndConfirmed: two grants of a target without
// batching expire. The first one's removal MR merges and its deploy
// callback confirms it (REVOKE_CALLED_BACK); the second one's callback is
// lost and reconciliation infers it once a later MR of the project was
// deployed (REVOKE_RECONCILED). Both entries are gone from main; a live
// grant's entry stays; the file on main is exact.
func TestExpiredGrantIsRemovedAndConfirmed(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ov := e2eOverlay(w.simTS.URL)
		ov["reconcile.minAge"] = "0s"
		w.load(ov)
		w.granted("exp-1", "amy", tSingle)
		w.granted("exp-2", "ben", tSingle)
		w.granted("live", "cleo", tSingle)
		_, ok := w.entryOf(tSingle, "amy")
		require.True(t, ok)

		w.expire("exp-1")
		require.Equal(t, 1, w.scan().Revoked)
		rev1 := domain.RevocationID("exp-1")
		o, b := w.until(rev1, "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Equal(t, domain.OperationRevoke, o.Kind)
		require.NotZero(t, o.MRIID, "removed by an MR")
		require.Equal(t, rev1, b.OperationID)
		_, ok = w.entryOf(tSingle, "amy")
		require.False(t, ok, "amy's entry is gone from main")
		w.revokedOnce("exp-1")
		require.Len(t, w.mrsOf(rev1), 1, "one removal MR")
		require.Zero(t, w.scan().Revoked, "a second scan revokes nothing")

		// The removal's deploy callback is lost.
		w.simJSON(http.MethodPost, "/deploy/_control/faults", map[string]any{"dropNext": 1}, nil)
		w.expire("exp-2")
		require.Equal(t, 1, w.scan().Revoked)
		rev2 := domain.RevocationID("exp-2")
		w.until(rev2, "merged", at(domain.StepHandleMerged, domain.BindingRevoking))
		_, ok = w.entryOf(tSingle, "ben")
		require.False(t, ok, "ben's entry is gone from main")
		w.filesExact("exp-1", "exp-2", "live")
		// A later MR of the project is deployed: the lost callback is
		// inferred.
		w.granted("later", "dora", tOther)
		rec := reconcile.New(w.deps.Env, w.deps.Store)
		res, err := rec.RunOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, res.Validated, "%+v", res)
		w.until(rev2, "reconciled", at(domain.StepRevokeReconciled, domain.BindingRevoked))
		w.revokedOnce("exp-2")
		res, err = rec.RunOnce(t.Context())
		require.NoError(t, err)
		require.Zero(t, res.Validated, "flipped once")

		_, ok = w.entryOf(tSingle, "cleo")
		require.True(t, ok, "a live grant stays")
		w.filesExact("exp-1", "exp-2", "live", "later")
		require.Equal(t, 2, w.created[domain.RevokeExpired])

		// A revoked grant's late callbacks are stale: the grant no longer
		// owns the binding.
		flip, err := st.BindingMarkValidated(t.Context(), store.BindingMarkValidatedParams{
			OperationID: "exp-1", CalledBackStep: int(domain.StepCalledBack), Actor: "late"})
		require.NoError(t, err)
		require.Nil(t, flip)
		// REVOKED is re-appliable: amy asks again.
		w.granted("exp-1-again", "amy", tSingle)
		w.filesExact("exp-1", "exp-2", "live", "later", "exp-1-again")
	})
}

// TestExpiryNeverRemovesEntriesItDidNotWrite: an expired entry added by
// hand stays; a grant whose entry on main was replaced by hand is revoked
// without touching that entry (REVOKE_ABSENT, nothing to remove).
func TestExpiryNeverRemovesEntriesItDidNotWrite(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("own", "amy", tSingle)
		w.granted("replaced", "ben", tSingle)
		f, err := bindingfile.Parse([]byte(w.fileOnMain(tSingle)))
		require.NoError(t, err)
		gone := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		hal := bindingfile.Entry{Subject: "hal", ExpiresAt: gone, OperationID: "by-hand"}
		benByHand := bindingfile.Entry{Subject: "ben", ExpiresAt: gone, OperationID: "ben-by-hand"}
		w.commitOnMain("update", tSingle, string(f.With(hal).With(benByHand).Marshal()))

		w.expire("own", "replaced")
		require.Equal(t, 2, w.scan().Revoked)
		w.until(domain.RevocationID("own"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		o, _ := w.until(domain.RevocationID("replaced"), "nothing to remove", at(domain.StepRevokeAbsent, domain.BindingRevoked))
		require.Zero(t, o.MRIID, "no MR for nothing")
		w.revokedOnce("own")
		w.revokedOnce("replaced")

		content := w.fileOnMain(tSingle)
		require.NoError(t, filecheck.Check(t.Context(), st, tSingle, []byte(content), []string{"own", "replaced"}, hal, benByHand),
			"the hand-added entries stay, unchanged; amy's is gone")
	})
}

// TestRevocationsJoinTheBatchRounds: on a batching target, two expired
// grants' removals and two new approved grants go out in one round's MR,
// which adds two entries and removes two; after its deploy callback the
// grants are VALIDATED and the revocations REVOKED, each once.
func TestRevocationsJoinTheBatchRounds(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.admitted("old-1", "old-2")
		rounds := w.roundsUntilIdle()
		require.Len(t, rounds, 1)
		w.until("old-1", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.until("old-2", "validated", at(domain.StepCalledBack, domain.BindingValidated))

		w.expire("old-1", "old-2")
		res := w.scan()
		require.Equal(t, 2, res.Revoked)
		w.admitted("new-1", "new-2")
		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID("old-1"), domain.RevocationID("old-2"))
		rounds = w.roundsUntilIdle()
		require.Len(t, rounds, 1, "one MR adds two entries and removes two")
		require.Equal(t, 4, rounds[0].Members)
		mrs := w.batchMRs(rounds[0].BatchID)
		require.Len(t, mrs, 1)
		desc, _ := mrs[0]["description"].(string)
		for _, id := range []string{"new-1", "new-2", domain.RevocationID("old-1"), domain.RevocationID("old-2")} {
			require.True(t, flow.HasTrailer(desc, id), "trailer of %s in %q", id, desc)
		}
		for _, id := range []string{"new-1", "new-2"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		for _, id := range []string{"old-1", "old-2"} {
			w.until(domain.RevocationID(id), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
			w.revokedOnce(id)
		}
		w.filesExact("old-1", "old-2", "new-1", "new-2")
	})
}

// TestRevocationWhosePipelineFailsIsIsolated: a batch of two grants and a
// revocation whose removal breaks the check pipeline fails; culprit
// isolation halves it until the revocation is alone, which stops in
// REVOKE_FAILED with CREATE_PIPELINE_FAILED (CONTACT_MAINTAINERS) and its
// entry still on main — the access is still granted. The grants are
// VALIDATED. Once the checks are fixed, a retrigger takes the revocation
// on through a single-request MR and it is REVOKED.
func TestRevocationWhosePipelineFailsIsIsolated(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		culprit := &removalCulprit{id: domain.RevocationID("bad")}
		w := newRevokeWorld(t, st, func(g gitlab.GitLab) gitlab.GitLab { return removalCulpritGitLab{g, culprit} })
		w.admitted("bad")
		w.roundsUntilIdle()
		w.until("bad", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.expire("bad")
		require.Equal(t, 1, w.scan().Revoked)
		w.admitted("g-1", "g-2")
		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID("bad"))
		w.roundsUntilIdle()
		for _, id := range []string{"g-1", "g-2"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		rev := domain.RevocationID("bad")
		o, b := w.until(rev, "isolated", at(domain.StepCreatePipelineFailed, domain.BindingRevokeFailed))
		require.Equal(t, domain.HintContactMaintainers, domain.HintFor(domain.StepStatus(o.Step), b.Status))
		subject := b.Subject
		_, ok := w.entryOf(tBatched, subject)
		require.True(t, ok, "a failed removal leaves the access in place")
		w.filesExact("bad", "g-1", "g-2")

		culprit.off()
		_, err := single.Retrigger(t.Context(), st, rev, "ops")
		require.NoError(t, err)
		w.eng.Wake()
		w.until(rev, "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		_, ok = w.entryOf(tBatched, subject)
		require.False(t, ok)
		w.revokedOnce("bad")
		w.filesExact("bad", "g-1", "g-2")
	})
}

// removalCulprit names the operation whose change breaks the checks,
// until off.
type removalCulprit struct {
	mu  sync.Mutex
	id  string
	dis bool
}

func (s *removalCulprit) off() { s.mu.Lock(); s.dis = true; s.mu.Unlock() }
func (s *removalCulprit) on() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.dis
}

// removalCulpritGitLab fails the check pipeline of every MR whose description names
// the culprit, while it is on.
type removalCulpritGitLab struct {
	gitlab.GitLab
	c *removalCulprit
}

func (c removalCulpritGitLab) GetMR(ctx context.Context, project string, iid int64) (gitlab.MR, error) {
	mr, err := c.GitLab.GetMR(ctx, project, iid)
	if err == nil && c.c.on() && mr.HeadPipeline != nil && flow.HasTrailer(mr.Description, c.c.id) {
		p := *mr.HeadPipeline
		p.Status = "failed"
		mr.HeadPipeline = &p
	}
	return mr, err
}

// TestGiveBackAndOperatorRevoke: the owner gives access back before it
// expires, an operator revokes another's; both through the same path, no
// approval asked; a second call answers the existing revocation; a
// request not in effect cannot be given back.
func TestGiveBackAndOperatorRevoke(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("mine", "amy", tSingle)
		w.granted("theirs", "ben", tOther)
		r, err := revoker(w.deps).Revoke(t.Context(), "mine", domain.RevokeGivenBack, "given back by its owner", "amy")
		require.NoError(t, err)
		require.True(t, r.Created)
		again, err := revoker(w.deps).Revoke(t.Context(), "mine", domain.RevokeGivenBack, "given back by its owner", "amy")
		require.NoError(t, err)
		require.False(t, again.Created)
		require.Equal(t, r.OperationID, again.OperationID)
		_, err = revoker(w.deps).Revoke(t.Context(), "theirs", domain.RevokeOperator, "left the team", "ops-olga")
		require.NoError(t, err)
		w.eng.Wake()
		w.until(domain.RevocationID("mine"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		o, _ := w.until(domain.RevocationID("theirs"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Equal(t, domain.RevokeOperator, o.RevokeReason)
		require.Equal(t, "left the team", o.Reason)
		require.Empty(t, w.approvalsOf(domain.RevocationID("mine")), "no approval is asked to lose access")
		w.revokedOnce("mine")
		w.revokedOnce("theirs")
		require.Equal(t, 1, w.created[domain.RevokeGivenBack])
		require.Equal(t, 1, w.created[domain.RevokeOperator])

		// Not in effect: still waiting for approval.
		w.submit("pending", "cleo", tSingle, true)
		w.until("pending", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		_, err = revoker(w.deps).Revoke(t.Context(), "pending", domain.RevokeGivenBack, "", "cleo")
		require.ErrorIs(t, err, lifecycle.ErrNotInEffect)
		_, err = revoker(w.deps).Revoke(t.Context(), "nope", domain.RevokeGivenBack, "", "cleo")
		require.ErrorIs(t, err, domain.ErrNotFound)
		w.filesExact("mine", "theirs")
	})
}

// TestConcurrentExpiryScansCreateEachRevocationOnce: three scans (three
// instances' schedules, or a manual run beside them) of 40 expired grants
// at once, in chunks of 7: every revocation is created once, counted once.
func TestConcurrentExpiryScansCreateEachRevocationOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ov := e2eOverlay(w.simTS.URL)
		ov["expiry.chunkSize"] = 7
		w.load(ov)
		const n = 40
		var ids []string
		for i := range n {
			id := fmt.Sprintf("g-%02d", i)
			ids = append(ids, id)
			_, err := st.OperationSubmit(t.Context(), store.OperationSubmitParams{
				Operation: store.OperationCreateParams{OperationID: id, Subject: fmt.Sprintf("u%02d", i), TargetKey: tBatched,
					ProjectID: 1, Flow: "APPROVE_FIRST", Step: int(domain.StepCreateApprovalSubmitting), Reason: "r", Days: 1,
					ExpiresAt: time.Now().Add(time.Hour), Actor: "t"},
				BindingStatus: domain.BindingApprovalSending,
			})
			require.NoError(t, err)
			_, err = st.DB().ExecContext(t.Context(), "UPDATE binding SET status = ? WHERE operation_id = ?", string(domain.BindingValidated), id)
			require.NoError(t, err)
		}
		w.expire(ids...)
		scanners := []*lifecycle.Expiry{w.expiry, lifecycle.NewExpiry(w.deps.Env, w.deps.Store), lifecycle.NewExpiry(w.deps.Env, w.deps.Store)}
		var wg sync.WaitGroup
		results := make([]lifecycle.ExpiryResult, len(scanners))
		errs := make([]error, len(scanners))
		for i, x := range scanners {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = x.ScanOnce(t.Context())
			}()
		}
		wg.Wait()
		total := 0
		for i := range scanners {
			require.NoError(t, errs[i])
			total += results[i].Revoked
		}
		require.Equal(t, n, total, "%+v", results)
		for _, id := range ids {
			rev := domain.RevocationID(id)
			require.Equal(t, 1, w.createdBy[rev], rev)
			b, err := st.BindingGetByOperation(t.Context(), rev)
			require.NoError(t, err)
			require.Equal(t, domain.BindingRevoking, b.Status)
		}
		waiting, err := st.BatchWaitingCount(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, n, waiting, "each admitted to the waiting set once")
	})
}
