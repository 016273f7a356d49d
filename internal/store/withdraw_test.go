package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

const withdrawAction = "withdraw"

// mustAdmitted submits operationID approve-first and applies its approval
// as the callback does (CREATE_ADMITTED, MR_CREATING, admitted to project's
// waiting set), backdated so a claim takes it at once.
func mustAdmitted(t testing.TB, s *store.Store, operationID string, project int64) {
	t.Helper()
	p := approveFirstParams(operationID, "u-"+operationID, "crm-readonly")
	p.ProjectID = project
	_, err := s.OperationSubmit(t.Context(), store.OperationSubmitParams{Operation: p, BindingStatus: domain.BindingApprovalSending})
	require.NoError(t, err)
	res, err := s.WorkCallbackApply(t.Context(), store.WorkCallbackParams{
		OperationID: operationID, Waiting: []domain.BindingStatus{domain.BindingApprovalSending},
		Step: int(domain.StepCreateAdmitted), Binding: domain.BindingMRCreating, AdmitProject: project, Actor: "test",
	})
	require.NoError(t, err)
	require.True(t, res.Applied)
	backdateWaiting(t, s, project)
}

func withdraw(t testing.TB, s *store.Store, operationID string) store.WithdrawResult {
	t.Helper()
	res, err := s.OperationWithdraw(t.Context(), store.WithdrawParams{OperationID: operationID, Action: withdrawAction, Actor: "owner"})
	require.NoError(t, err)
	return res
}

// TestOperationWithdrawPlaces: each waiting place moves the right layers,
// and every other place is refused without a write.
func TestOperationWithdrawPlaces(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		t.Run("waiting for approval: CLOSED at once, the upstream action due", func(t *testing.T) {
			mustSubmitApproval(t, s, "w-appr", "alice", "payments-db")
			res := withdraw(t, s, "w-appr")
			require.Equal(t, store.WithdrawApplied, res.Outcome)
			require.Equal(t, store.WithdrawFromApproval, res.Place)
			require.NotNil(t, res.Flip)
			require.Equal(t, domain.BindingClosed, res.Flip.To)
			o := mustOperation(t, s, "w-appr")
			require.Equal(t, int(domain.StepCloseRequesterWithdrawn), o.Step)
			require.Equal(t, withdrawAction, o.NextAction)
			require.False(t, o.DueAt.IsZero())
			require.Equal(t, domain.BindingClosed, mustBinding(t, s, "alice", "payments-db").Status)

			again := withdraw(t, s, "w-appr")
			require.Equal(t, store.WithdrawAlready, again.Outcome, "idempotent")
			require.Len(t, mustSteps(t, s, "w-appr"), 2, "the second call wrote nothing")

			// A late approval callback is stale: the binding left the waiting set.
			cb, err := s.WorkCallbackApply(t.Context(), store.WorkCallbackParams{
				OperationID: "w-appr", Waiting: []domain.BindingStatus{domain.BindingApprovalSending, domain.BindingApprovalSent},
				Step: int(domain.StepCreateStarted), Binding: domain.BindingMRCreating, NextAction: "create_mr", Actor: "cb",
			})
			require.NoError(t, err)
			require.False(t, cb.Applied)
		})
		t.Run("waiting in the batch set: out of the set and CLOSED, nothing due", func(t *testing.T) {
			mustAdmitted(t, s, "w-set", 71)
			res := withdraw(t, s, "w-set")
			require.Equal(t, store.WithdrawApplied, res.Outcome)
			require.Equal(t, store.WithdrawFromBatchSet, res.Place)
			require.Equal(t, 0, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", "w-set"))
			o := mustOperation(t, s, "w-set")
			require.Equal(t, int(domain.StepCloseRequesterWithdrawn), o.Step)
			require.Empty(t, o.NextAction)
			c, err := s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 71, MaxRequests: 10})
			require.NoError(t, err)
			require.Equal(t, store.ClaimNothingWaiting, c.Outcome)
		})
		t.Run("claimed by a round: refused, nothing written", func(t *testing.T) {
			mustAdmitted(t, s, "w-claimed", 72)
			c := mustClaim(t, s, 72, 10)
			res := withdraw(t, s, "w-claimed")
			require.Equal(t, store.WithdrawClaimed, res.Outcome)
			require.Equal(t, c.BatchID, res.BatchID)
			require.Equal(t, int(domain.StepCreateAdmitted), mustOperation(t, s, "w-claimed").Step)
			require.Equal(t, domain.BindingMRCreating, mustBinding(t, s, "u-w-claimed", "crm-readonly").Status)
		})
		t.Run("single-request MR: only the step moves, the action due", func(t *testing.T) {
			mustSubmit(t, s, "w-mr", "bob", "payments-db", domain.BindingMRCreating)
			res := withdraw(t, s, "w-mr")
			require.Equal(t, store.WithdrawApplied, res.Outcome)
			require.Equal(t, store.WithdrawFromMR, res.Place)
			require.Nil(t, res.Flip, "the binding waits for the MR to be closed")
			require.Equal(t, domain.BindingMRCreating, mustBinding(t, s, "bob", "payments-db").Status)
			o := mustOperation(t, s, "w-mr")
			require.Equal(t, int(domain.StepCloseRequesterWithdrawn), o.Step)
			require.Equal(t, withdrawAction, o.NextAction)
		})
		t.Run("merging, in effect, another's binding, unknown: refused or not found", func(t *testing.T) {
			mustSubmit(t, s, "w-merging", "carol", "payments-db", domain.BindingMRCreating)
			mustSetBinding(t, s, "carol", "payments-db", domain.BindingMerging, mustBinding(t, s, "carol", "payments-db").ExpiresAt)
			res := withdraw(t, s, "w-merging")
			require.Equal(t, store.WithdrawRefused, res.Outcome)
			require.Equal(t, domain.BindingMerging, res.Binding.Status)
			require.Equal(t, stepCreateStarted, mustOperation(t, s, "w-merging").Step)

			_, err := s.OperationWithdraw(t.Context(), store.WithdrawParams{OperationID: "w-none", Action: withdrawAction})
			require.ErrorIs(t, err, domain.ErrNotFound)
		})
	})
}

// TestOperationWithdrawRacesTheClaim: withdrawals of admitted requests race
// a batch round claiming the same waiting set, over and over, on both
// databases. For every contested request exactly one side wins: it is a
// member of the claimed batch (its waiting row carries the batch, its
// binding still MR_CREATING) or it was withdrawn (no waiting row, binding
// CLOSED) — never both, never neither.
func TestOperationWithdrawRacesTheClaim(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const rounds, perRound = 12, 6
		won := map[string]int{}
		defer func() { t.Logf("contested requests won by: %v", won) }()
		for r := range rounds {
			project := int64(500 + r)
			ids := make([]string, perRound)
			for i := range ids {
				ids[i] = fmt.Sprintf("race-%d-%d", r, i)
				mustAdmitted(t, s, ids[i], project)
			}
			var (
				wg       sync.WaitGroup
				claim    store.Claim
				claimErr error
				results  = make([]store.WithdrawResult, perRound)
				errs     = make([]error, perRound)
				start    = make(chan struct{})
			)
			wg.Go(func() {
				<-start
				claim, claimErr = s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: project, MaxRequests: 100})
			})
			for i, id := range ids {
				wg.Go(func() {
					<-start
					results[i], errs[i] = s.OperationWithdraw(t.Context(), store.WithdrawParams{OperationID: id, Action: withdrawAction, Actor: "owner"})
				})
			}
			close(start)
			wg.Wait()
			require.NoError(t, claimErr)
			members := map[string]bool{}
			if claim.Outcome == store.ClaimClaimed {
				for _, m := range claim.Members {
					members[m.OperationID] = true
				}
			}
			for i, id := range ids {
				require.NoError(t, errs[i], id)
				withdrawn := results[i].Outcome == store.WithdrawApplied
				if withdrawn {
					won["withdrawal"]++
				} else {
					won["claim"]++
				}
				require.NotEqual(t, withdrawn, members[id], "round %d %s: withdrawn=%v, claimed=%v (claim %s, withdraw %d)",
					r, id, withdrawn, members[id], claim.Outcome, results[i].Outcome)
				if !withdrawn {
					require.Equal(t, store.WithdrawClaimed, results[i].Outcome, id)
				}
				// The database agrees with the answers.
				rows := count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ? AND batch_id IS NOT NULL", id)
				b := mustBinding(t, s, "u-"+id, "crm-readonly")
				if withdrawn {
					require.Zero(t, rows, id)
					require.Equal(t, domain.BindingClosed, b.Status, id)
				} else {
					require.Equal(t, 1, rows, id)
					require.Equal(t, domain.BindingMRCreating, b.Status, id)
				}
			}
		}
	})
}

// TestOperationWithdrawBetweenTheClaimsReadAndItsUpdate: the exact
// interleaving the guards exist for, forced with the claim's hook on
// MariaDB (SQLite's single writer cannot interleave them): the claim has
// read the waiting set, the withdrawal commits, then the claim's guarded
// UPDATE marks fewer rows than it read — the whole claim rolls back
// (preempted), the withdrawal stands, and the next round claims the rest.
func TestOperationWithdrawBetweenTheClaimsReadAndItsUpdate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "a second writer cannot commit inside SQLite's claim transaction")
		mustAdmitted(t, s, "mid-1", 90)
		mustAdmitted(t, s, "mid-2", 90)
		var inner store.WithdrawResult
		p := store.ClaimAfterRead(store.BatchClaimParams{ProjectID: 90, MaxRequests: 10},
			func(ctx context.Context, _ *sql.Tx, _ int64, read []store.BatchMember) error {
				require.Len(t, read, 2)
				var err error
				inner, err = s.OperationWithdraw(ctx, store.WithdrawParams{OperationID: "mid-1", Action: withdrawAction, Actor: "owner"})
				return err
			})
		c, err := s.BatchClaim(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, store.ClaimPreempted, c.Outcome)
		require.Equal(t, store.WithdrawApplied, inner.Outcome)
		next := mustClaim(t, s, 90, 10)
		require.Equal(t, []string{"mid-2"}, memberOpIDs(next.Members))
		require.Equal(t, domain.BindingClosed, mustBinding(t, s, "u-mid-1", "crm-readonly").Status)
	})
}
