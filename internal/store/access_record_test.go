package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// confirm is the deploy callback's flip for operationID (store.BindingMarkValidated).
func confirm(t *testing.T, s *store.Store, operationID string) *store.Flip {
	t.Helper()
	flip, err := s.BindingMarkValidated(t.Context(), store.BindingMarkValidatedParams{
		OperationID: operationID, CalledBackStep: int(domain.StepCalledBack), Actor: "deploy-callback", Note: "in effect",
	})
	require.NoError(t, err)
	require.NotNil(t, flip, "%s flipped", operationID)
	return flip
}

// atStep sets operationID's step behind the store's back, to arrange a
// starting state (the step paths are proven elsewhere).
func atStep(t *testing.T, s *store.Store, operationID string, step domain.StepStatus) {
	t.Helper()
	require.Equal(t, int64(1), mustExec(t, s.DB(), "UPDATE operation SET step_status = ? WHERE operation_id = ?", int(step), operationID))
}

// accessAt is who had access to target at at.
func accessAt(t *testing.T, s *store.Store, target string, at time.Time) []store.AccessInterval {
	t.Helper()
	items, err := s.AccessAtTarget(t.Context(), target, at)
	require.NoError(t, err)
	return items
}

// periodOf is the period operationID opened.
func periodOf(t *testing.T, s *store.Store, operationID string) store.AccessInterval {
	t.Helper()
	a, err := s.AccessOfOperation(t.Context(), operationID)
	require.NoError(t, err, "the period %s opened", operationID)
	return a
}

// TestAccessHistoryFollowsEveryInEffectMove: the store writes the access
// history in the transaction of each binding move that changes it — a
// grant confirmed (BindingMarkValidated), a renewal confirmed (its
// grant's period ends at the very instant the renewal's starts), a
// removal confirmed, a removal with nothing to remove (TransitionMany,
// as a batch round writes it), several members confirmed at once
// (TransitionMany) — and nothing for the moves that change nothing
// (a revocation started, a renewal accepted).
func TestAccessHistoryFollowsEveryInEffectMove(t *testing.T) {
	t.Parallel()
	storetest.Each(t, accessJourney)
}

// accessJourney is TestAccessHistoryFollowsEveryInEffectMove's body.
func accessJourney(t *testing.T, s *store.Store) {
	ctx := t.Context()
	// A grant merged, its approval and MR known; the deploy confirms it.
	mustSubmit(t, s, "acc-g", "alice", "acc-t", domain.BindingMerged)
	mustExec(t, s.DB(), "UPDATE operation SET approval_id = 'appr-1', mr_iid = 41 WHERE operation_id = 'acc-g'")
	atStep(t, s, "acc-g", domain.StepHandleMerged)
	before := time.Now()
	require.Empty(t, accessAt(t, s, "acc-t", time.Now()), "merged is not in effect")
	confirm(t, s, "acc-g")
	g := periodOf(t, s, "acc-g")
	require.Equal(t, store.AccessInterval{ID: g.ID, Subject: "alice", TargetKey: "acc-t", From: g.From,
		Source: store.AccessSourceChangeflow, OperationID: "acc-g", ApprovalID: "appr-1", MRIID: 41}, g)
	require.True(t, g.Open())
	require.WithinDuration(t, before, g.From, time.Minute)
	require.Equal(t, []store.AccessInterval{g}, accessAt(t, s, "acc-t", g.From), "from is inclusive")
	require.Empty(t, accessAt(t, s, "acc-t", g.From.Add(-s.Dialect().Precision())), "nothing before")
	// A second confirmation (a duplicate callback) writes nothing.
	flip, err := s.BindingMarkValidated(ctx, store.BindingMarkValidatedParams{OperationID: "acc-g", CalledBackStep: int(domain.StepCalledBack)})
	require.NoError(t, err)
	require.Nil(t, flip)
	require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM access_interval"))

	// A renewal accepted (VALIDATED → RENEWING) changes nothing; once
	// confirmed, the grant's period ends where the renewal's begins.
	renewalOf(t, s, "acc-r", "acc-g")
	mustExec(t, s.DB(), "UPDATE operation SET subject = 'alice', target_key = 'acc-t', approval_id = 'appr-2' WHERE operation_id = 'acc-r'")
	mustExec(t, s.DB(), "UPDATE binding SET status = ?, operation_id = 'acc-r', version = version + 1 WHERE subject_id = 'alice' AND target_key = 'acc-t'",
		string(domain.BindingRenewing))
	atStep(t, s, "acc-r", domain.StepHandleMerged)
	time.Sleep(5 * time.Millisecond)
	confirm(t, s, "acc-r")
	g, r := periodOf(t, s, "acc-g"), periodOf(t, s, "acc-r")
	require.False(t, g.Open())
	require.Equal(t, r.From, g.Until, "no gap, no overlap")
	require.Equal(t, "acc-r", g.EndOperationID)
	require.True(t, r.Open())
	require.Equal(t, "appr-2", r.ApprovalID, "the period names its own approval")
	require.Equal(t, []store.AccessInterval{r}, accessAt(t, s, "acc-t", r.From), "exactly one at the boundary")
	require.Equal(t, []store.AccessInterval{g}, accessAt(t, s, "acc-t", r.From.Add(-s.Dialect().Precision())))

	// A revocation: started, nothing changes; confirmed, the period ends.
	c, st, err := s.RevocationCandidateOf(ctx, "acc-r")
	require.NoError(t, err)
	require.Equal(t, domain.BindingValidated, st)
	_, err = s.RevocationCreate(ctx, store.RevocationCreateParams{
		Reason: domain.RevokeGivenBack, Actor: "alice", SingleAction: "create_mr", Rows: []store.RevocationRow{{RevocationCandidate: c}},
	})
	require.NoError(t, err)
	rev := domain.RevocationID("acc-r")
	require.True(t, periodOf(t, s, "acc-r").Open(), "a removal under way: the access lasts")
	atStep(t, s, rev, domain.StepHandleMerged)
	time.Sleep(5 * time.Millisecond)
	confirm(t, s, rev)
	r = periodOf(t, s, "acc-r")
	require.False(t, r.Open())
	require.Equal(t, rev, r.EndOperationID)
	require.Empty(t, accessAt(t, s, "acc-t", r.Until), "until is exclusive")
	require.Equal(t, []store.AccessInterval{r}, accessAt(t, s, "acc-t", r.Until.Add(-s.Dialect().Precision())))

	// Three members of a batch confirmed in one TransitionMany: three
	// periods, the MR the batch's.
	res, err := s.DB().ExecContext(ctx, "INSERT INTO merge_batch (project_id, status, mr_iid) VALUES (1, 2, 77)")
	require.NoError(t, err)
	batchID, err := res.LastInsertId()
	require.NoError(t, err)
	var rows []store.TransitionRow
	for _, id := range []string{"acc-b1", "acc-b2", "acc-b3"} {
		mustSubmit(t, s, id, "s-"+id, "acc-batch", domain.BindingMerged)
		mustExec(t, s.DB(), "UPDATE operation SET batch_id = ? WHERE operation_id = ?", batchID, id)
		atStep(t, s, id, domain.StepHandleMerged)
		op, b := mustOperation(t, s, id), mustBinding(t, s, "s-"+id, "acc-batch")
		rows = append(rows, store.TransitionRow{OperationID: id, Version: op.Version, BindingVersion: b.Version})
	}
	require.NoError(t, s.TransitionMany(ctx, store.TransitionManyParams{
		FromStep: int(domain.StepHandleMerged), ToStep: int(domain.StepCalledBack),
		BindingFrom: domain.BindingMerged, BindingTo: domain.BindingValidated, Rows: rows, Actor: "test",
	}))
	at := accessAt(t, s, "acc-batch", time.Now().Add(time.Second))
	require.Len(t, at, 3)
	for i, a := range at {
		require.Equal(t, rows[i].OperationID, a.OperationID)
		require.Equal(t, int64(77), a.MRIID, "a member's MR is its batch's")
		require.Equal(t, at[0].From, a.From, "one instant for the transaction")
	}

	// A removal with nothing to remove (REVOKE_ABSENT, as a batch
	// round settles it): REVOKING → REVOKED ends the period too.
	c, _, err = s.RevocationCandidateOf(ctx, "acc-b1")
	require.NoError(t, err)
	_, err = s.RevocationCreate(ctx, store.RevocationCreateParams{
		Reason: domain.RevokeOperator, Actor: "olivia", SingleAction: "create_mr", Rows: []store.RevocationRow{{RevocationCandidate: c}},
	})
	require.NoError(t, err)
	absent := domain.RevocationID("acc-b1")
	atStep(t, s, absent, domain.StepCreateAdmitted)
	op, b := mustOperation(t, s, absent), mustBinding(t, s, "s-acc-b1", "acc-batch")
	require.NoError(t, s.TransitionMany(ctx, store.TransitionManyParams{
		FromStep: int(domain.StepCreateAdmitted), ToStep: int(domain.StepRevokeAbsent),
		BindingFrom: domain.BindingRevoking, BindingTo: domain.BindingRevoked, Actor: "round",
		Rows: []store.TransitionRow{{OperationID: absent, Version: op.Version, BindingVersion: b.Version}},
	}))
	b1 := periodOf(t, s, "acc-b1")
	require.False(t, b1.Open())
	require.Equal(t, absent, b1.EndOperationID)
	require.Len(t, accessAt(t, s, "acc-batch", time.Now().Add(time.Second)), 2)

	// Reconciliation's confirmation (RECONCILED) opens a period as the
	// deploy callback's does.
	mustSubmit(t, s, "acc-rec", "erin", "acc-t", domain.BindingMerged)
	atStep(t, s, "acc-rec", domain.StepHandleMerged)
	time.Sleep(5 * time.Millisecond)
	flip, err = s.BindingMarkValidated(ctx, store.BindingMarkValidatedParams{OperationID: "acc-rec", CalledBackStep: int(domain.StepReconciled), Actor: "reconcile"})
	require.NoError(t, err)
	require.NotNil(t, flip)
	require.True(t, periodOf(t, s, "acc-rec").Open())

	// What alice and s-acc-b2 had, by subject.
	bySubject, err := s.AccessAtSubject(ctx, "s-acc-b2", time.Now().Add(time.Second))
	require.NoError(t, err)
	require.Len(t, bySubject, 1)
	require.Equal(t, "acc-b2", bySubject[0].OperationID)

	// The history of acc-t: both periods, oldest first; a window
	// after them finds none.
	hist, more, err := s.AccessHistory(ctx, "acc-t", before.Add(-time.Hour), time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.False(t, more)
	require.Len(t, hist, 3)
	require.Equal(t, []string{"acc-g", "acc-r", "acc-rec"}, []string{hist[0].OperationID, hist[1].OperationID, hist[2].OperationID})
	hist, _, err = s.AccessHistory(ctx, "acc-t", r.Until, periodOf(t, s, "acc-rec").From, 10)
	require.NoError(t, err)
	require.Empty(t, hist, "[T1, T2) between alice's end and erin's start")
	hist, more, err = s.AccessHistory(ctx, "acc-t", before.Add(-time.Hour), time.Now().Add(time.Hour), 1)
	require.NoError(t, err)
	require.True(t, more)
	require.Len(t, hist, 1)
}

// TestAccessBackfillRebuildsWhatTheStoreWrote: the migration that created
// access_interval rebuilt the periods of an existing database from its
// step history. Run on the history of accessJourney, its statement
// rebuilds exactly the periods the store wrote as the moves happened —
// the same starts, ends, operations, approvals and MRs.
func TestAccessBackfillRebuildsWhatTheStoreWrote(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		accessJourney(t, s)
		q, err := store.AccessBackfillSQL(s.Dialect().Name())
		require.NoError(t, err)
		live := allPeriods(t, s)
		require.Len(t, live, 6)
		mustExec(t, s.DB(), "DELETE FROM access_interval")
		mustExec(t, s.DB(), q)
		require.Equal(t, live, allPeriods(t, s))
	})
}

// allPeriods is every period, without its id and created_at, in a fixed order.
func allPeriods(t *testing.T, s *store.Store) []store.AccessInterval {
	t.Helper()
	var out []store.AccessInterval
	for _, target := range []string{"acc-t", "acc-batch"} {
		items, _, err := s.AccessHistory(t.Context(), target, time.Unix(0, 0), time.Now().Add(time.Hour), store.MaxAccessHistory)
		require.NoError(t, err)
		for _, a := range items {
			a.ID = 0
			out = append(out, a)
		}
	}
	return out
}

// TestAccessIntervalAdmitsOneOpenPeriod: the database refuses a second
// open period of one (target, subject, source), and admits any number of
// closed ones.
func TestAccessIntervalAdmitsOneOpenPeriod(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ins := "INSERT INTO access_interval (subject, target_key, from_at, until_at, source, operation_id) VALUES (?, ?, ?, ?, ?, ?)"
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		d := s.Dialect()
		mustExec(t, s.DB(), ins, "alice", "t", d.Time(t0), d.Time(t0.Add(time.Hour)), "changeflow", "op-1")
		mustExec(t, s.DB(), ins, "alice", "t", d.Time(t0.Add(time.Hour)), d.Time(t0.Add(2*time.Hour)), "changeflow", "op-2")
		mustExec(t, s.DB(), ins, "alice", "t", d.Time(t0.Add(2*time.Hour)), nil, "changeflow", "op-3")
		err := exec(t, s.DB(), ins, "alice", "t", d.Time(t0.Add(3*time.Hour)), nil, "changeflow", "op-4")
		require.ErrorIs(t, store.Translate(err), domain.ErrDuplicate, "a second open period")
		// Another subject, another target, or what the repository shows.
		mustExec(t, s.DB(), ins, "bob", "t", d.Time(t0), nil, "changeflow", "op-5")
		mustExec(t, s.DB(), ins, "alice", "u", d.Time(t0), nil, "changeflow", "op-6")
		mustExec(t, s.DB(), ins, "alice", "t", d.Time(t0), nil, "repo", nil)
		// A changeflow period names its operation; an end precedes no start.
		require.True(t, store.IsCheckViolation(exec(t, s.DB(), ins, "carol", "t", d.Time(t0), nil, "changeflow", nil)))
		require.True(t, store.IsCheckViolation(exec(t, s.DB(), ins, "carol", "t", d.Time(t0), d.Time(t0.Add(-time.Second)), "changeflow", "op-7")))
		require.True(t, store.IsCheckViolation(exec(t, s.DB(), ins, "carol", "t", d.Time(t0), nil, "git", "op-8")))
	})
}

// TestAccessRecordUnderConcurrentConfirmations: 20 grants of one target
// confirmed at once, each by its own transaction, and 10 of them given
// back and confirmed at once: every period opened once and the 10 ended
// once, whatever the interleaving (on MariaDB, row locks; on SQLite, the
// single writer).
func TestAccessRecordUnderConcurrentConfirmations(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const n = 20
		ids := make([]string, n)
		for i := range n {
			ids[i] = fmt.Sprintf("conc-%02d", i)
			mustSubmit(t, s, ids[i], fmt.Sprintf("conc-s%02d", i), "conc-t", domain.BindingMerged)
			atStep(t, s, ids[i], domain.StepHandleMerged)
		}
		confirmAll := func(ids []string) {
			var wg sync.WaitGroup
			errs := make(chan error, len(ids))
			for _, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := s.BindingMarkValidated(t.Context(), store.BindingMarkValidatedParams{
						OperationID: id, CalledBackStep: int(domain.StepCalledBack), Actor: "deploy-callback"})
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
		}
		confirmAll(ids)
		require.Len(t, accessAt(t, s, "conc-t", time.Now().Add(time.Second)), n)

		var revs []string
		for _, id := range ids[:n/2] {
			c, _, err := s.RevocationCandidateOf(t.Context(), id)
			require.NoError(t, err)
			_, err = s.RevocationCreate(t.Context(), store.RevocationCreateParams{
				Reason: domain.RevokeGivenBack, Actor: "owner", SingleAction: "create_mr", Rows: []store.RevocationRow{{RevocationCandidate: c}},
			})
			require.NoError(t, err)
			revs = append(revs, domain.RevocationID(id))
			atStep(t, s, domain.RevocationID(id), domain.StepHandleMerged)
		}
		confirmAll(revs)
		require.Len(t, accessAt(t, s, "conc-t", time.Now().Add(time.Second)), n-n/2)
		require.Equal(t, n, count(t, s.DB(), "SELECT COUNT(*) FROM access_interval WHERE target_key = 'conc-t'"))
		require.Equal(t, n/2, count(t, s.DB(), "SELECT COUNT(*) FROM access_interval WHERE target_key = 'conc-t' AND end_operation_id IS NOT NULL"))
	})
}
