package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// mustRenewalAdmitted stores grant (VALIDATED, expiring within the hour)
// and its approved renewal waiting in project's batch set, as the
// approval callback leaves it (CREATE_ADMITTED, the binding RENEWING).
func mustRenewalAdmitted(t *testing.T, s *store.Store, grant, renewal, subject string, project int64) {
	t.Helper()
	const target = "crm-readonly"
	mustSubmit(t, s, grant, subject, target, domain.BindingMRCreating)
	mustSetBinding(t, s, subject, target, domain.BindingValidated, time.Now().Add(time.Hour))
	p := approveFirstParams(renewal, subject, target)
	p.ProjectID = project
	res, err := s.OperationSubmit(t.Context(), store.OperationSubmitParams{
		Operation: p, BindingStatus: domain.BindingApprovalSending,
		Renew: &domain.RenewWindow{Percent: 25, Min: 24 * time.Hour},
	})
	require.NoError(t, err)
	require.Equal(t, grant, res.Application.Renews)
	cb, err := s.WorkCallbackApply(t.Context(), store.WorkCallbackParams{
		OperationID: renewal, Waiting: []domain.BindingStatus{domain.BindingApprovalSending},
		Step: int(domain.StepCreateAdmitted), Binding: domain.BindingMRCreating, AdmitProject: project, Actor: "test",
	})
	require.NoError(t, err)
	require.True(t, cb.Applied)
	backdateWaiting(t, s, project)
}

// giveBackCandidate is the give-back's candidate for grant while its
// renewal owns the row (as lifecycle.Revoker.Revoke builds it).
func giveBackCandidate(t *testing.T, s *store.Store, grant, renewal string) store.RevocationRow {
	t.Helper()
	r := mustOperation(t, s, renewal)
	b := mustBinding(t, s, r.Subject, r.TargetKey)
	require.Equal(t, domain.BindingRenewing, b.Status)
	return store.RevocationRow{RevocationCandidate: store.RevocationCandidate{
		BindingID: b.ID, BindingVersion: b.Version, Subject: b.Subject, TargetKey: b.TargetKey,
		GrantOperationID: grant, ProjectID: r.ProjectID, ExpiresAt: b.ExpiresAt,
		Renewal: renewal, RenewalStep: r.Step, RenewalVersion: r.Version,
	}, Batching: true}
}

// TestGiveBackCutsARenewalOutOfTheBatchSetRacingTheClaim races, round
// after round, a batch round's claim against give-backs that cut the
// approved renewals out of the same batch set (goroutines, both
// databases). The claim marks waiting rows "WHERE batch_id IS NULL"; the
// cut deletes them "WHERE batch_id IS NULL" in the revocation's
// transaction. Of the two, exactly one wins each renewal: it is in the
// batch (the give-back wrote nothing, store.ErrRenewalClaimed), or it is
// RENEW_REVOKED, out of the set, its binding REVOKING under the grant's
// revocation — never both, never neither.
func TestGiveBackCutsARenewalOutOfTheBatchSetRacingTheClaim(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const rounds, perRound = 8, 4
		won := map[string]int{}
		defer func() { t.Logf("contested renewals won by: %v", won) }()
		for r := range rounds {
			project := int64(700 + r)
			grants, renewals := make([]string, perRound), make([]string, perRound)
			for i := range perRound {
				grants[i], renewals[i] = fmt.Sprintf("cut-g-%d-%d", r, i), fmt.Sprintf("cut-r-%d-%d", r, i)
				mustRenewalAdmitted(t, s, grants[i], renewals[i], fmt.Sprintf("cut-s-%d-%d", r, i), project)
			}
			rows := make([]store.RevocationRow, perRound)
			for i := range perRound {
				rows[i] = giveBackCandidate(t, s, grants[i], renewals[i])
			}
			var (
				wg       sync.WaitGroup
				claim    store.Claim
				claimErr error
				created  = make([][]store.RevocationCreated, perRound)
				errs     = make([]error, perRound)
				start    = make(chan struct{})
			)
			wg.Go(func() {
				<-start
				claim, claimErr = s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: project, MaxRequests: 100})
			})
			for i := range perRound {
				wg.Go(func() {
					<-start
					created[i], errs[i] = s.RevocationCreate(t.Context(), store.RevocationCreateParams{
						Reason: domain.RevokeGivenBack, Text: "given back", Actor: "owner", SingleAction: "create_mr",
						RenewalAction: withdrawAction, Rows: []store.RevocationRow{rows[i]},
					})
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
			for i, ren := range renewals {
				cut := errs[i] == nil && len(created[i]) == 1
				if !cut {
					require.True(t, errors.Is(errs[i], store.ErrRenewalClaimed) || errors.Is(errs[i], domain.ErrPreempted), "%s: %v", ren, errs[i])
				}
				require.NotEqual(t, cut, members[ren], "round %d %s: cut=%v claimed=%v (claim %s, err %v)", r, ren, cut, members[ren], claim.Outcome, errs[i])
				o := mustOperation(t, s, ren)
				b := mustBinding(t, s, o.Subject, o.TargetKey)
				inSet := count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id = ?", ren)
				rev := count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE operation_id = ?", domain.RevocationID(grants[i]))
				if cut {
					won["give-back"]++
					require.Equal(t, int(domain.StepRenewRevoked), o.Step, ren)
					require.Empty(t, o.NextAction, "nothing upstream to undo for an approved renewal")
					require.Zero(t, inSet, ren)
					require.Equal(t, domain.BindingRevoking, b.Status, ren)
					require.Equal(t, domain.RevocationID(grants[i]), b.OperationID)
					require.Equal(t, 1, rev)
					continue
				}
				won["claim"]++
				require.Equal(t, int(domain.StepCreateAdmitted), o.Step, ren)
				require.Equal(t, 1, inSet, ren)
				require.Equal(t, domain.BindingRenewing, b.Status, ren)
				require.Equal(t, ren, b.OperationID)
				require.Zero(t, rev, "a refused give-back wrote nothing")
			}
		}
	})
}

// TestExpiryCutSchedulesTheApprovalsWithdrawal: the expiry scan's cut of a
// renewal waiting for its approval leaves the renewal RENEW_EXPIRED with
// the withdraw action due at once (the approval is withdrawn by the
// engine, not inside the scan's transaction), and without RenewalAction
// nothing is due, as before.
func TestExpiryCutSchedulesTheApprovalsWithdrawal(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for _, action := range []string{withdrawAction, ""} {
			grant, ren, subject := "exp-g-"+action, "exp-r-"+action, "exp-s-"+action
			mustSubmit(t, s, grant, subject, "crm-readonly", domain.BindingMRCreating)
			mustSetBinding(t, s, subject, "crm-readonly", domain.BindingValidated, time.Now().Add(time.Hour))
			_, err := s.OperationSubmit(t.Context(), store.OperationSubmitParams{
				Operation: approveFirstParams(ren, subject, "crm-readonly"), BindingStatus: domain.BindingApprovalSending,
				Renew: &domain.RenewWindow{Percent: 25, Min: 24 * time.Hour},
			})
			require.NoError(t, err)
			mustExec(t, s.DB(), "UPDATE binding SET expires_at = ? WHERE subject_id = ?", s.Dialect().Time(time.Now().Add(-time.Hour)), subject)
			cands, err := s.ExpiredRenewals(t.Context(), 10)
			require.NoError(t, err)
			var mine []store.RevocationRow
			for _, c := range cands {
				if c.Renewal == ren {
					require.Equal(t, domain.ExpiryCutWithRevocation, domain.ExpiryCutOf(c.Place()))
					mine = append(mine, store.RevocationRow{RevocationCandidate: c.RevocationCandidate})
				}
			}
			require.Len(t, mine, 1)
			created, err := s.RevocationCreate(t.Context(), store.RevocationCreateParams{
				Reason: domain.RevokeExpired, Text: "expired", Actor: "scan", SingleAction: "create_mr", RenewalAction: action, Rows: mine,
			})
			require.NoError(t, err)
			require.Len(t, created, 1)
			require.Equal(t, ren, created[0].Renewal)
			o := mustOperation(t, s, ren)
			require.Equal(t, int(domain.StepRenewExpired), o.Step)
			require.Equal(t, action, o.NextAction)
			require.Equal(t, action != "", !o.DueAt.IsZero(), "due at once exactly when an action is named")
			require.Empty(t, o.LeaseOwner)
		}
	})
}
