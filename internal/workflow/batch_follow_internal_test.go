package workflow

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestBatchFollowAfterASettlementMovesNobody: the driver's step read its
// batch RUNNING, then a settlement (the sweep, an operator) failed the
// batch and put the members back in the waiting set, and only then does
// the step's catch-up run. It must not move the members forward again —
// they would sit at CREATE_MR_CREATED in the waiting set with no action —
// so the catch-up is pre-empted by the batch's status, read under lock as
// its first statement. (Seen under load in TestBatchSweepSettlesATimedOutBatch
// before the guard.)
func TestBatchFollowAfterASettlementMovesNobody(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		mgr, err := config.Load(ctx, config.Options{Overlay: map[string]any{
			"gitlab.projects": []any{"1"},
			"targets":         map[string]any{"t": map[string]any{"accessMode": "OPEN", "batching": true, "maxDays": 30}},
		}})
		require.NoError(t, err)
		snap := mgr.Current()
		_ = mgr.Close()
		d := Deps{Store: st, GitLab: newBenchGitLab(), Config: func() *config.Snapshot { return snap }}
		ids := []string{"op-f0", "op-f1", "op-f2"}
		for _, id := range ids {
			_, err := st.OperationSubmit(ctx, store.OperationSubmitParams{
				Operation: store.OperationCreateParams{
					OperationID: id, Subject: id, TargetKey: "t", ProjectID: 1, Flow: FlowApproveFirst,
					Step: int(domain.StepCreateAdmitted), Reason: "test", Days: 1,
					ExpiresAt: time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC), Actor: id,
				},
				BindingStatus: domain.BindingMRCreating,
			})
			require.NoError(t, err)
			_, err = st.BatchAdmit(ctx, id, 1)
			require.NoError(t, err)
		}
		storetest.UntilAdmittedBeforeNow(t, st, ids...) // the claim takes admissions before the DB's "now"
		r, err := NewRounds(d, nil).RunRound(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 3, r.Members)

		res, err := d.SettleBatch(ctx, r.BatchID, "TEST", "settled meanwhile", "test")
		require.NoError(t, err)
		require.Equal(t, 3, res.Readmitted)

		err = d.batchFollow(ctx, r.BatchID, ids[0], domain.StepCreateSucceeded)
		require.ErrorIs(t, err, domain.ErrPreempted)
		states, err := st.BatchMemberStates(ctx, r.BatchID)
		require.NoError(t, err)
		for _, m := range states {
			require.Equal(t, domain.StepCreateAdmitted.String(), domain.StepStatus(m.Step).String(), "%s", m.OperationID)
			require.Equal(t, domain.BindingMRCreating, m.Binding, "%s", m.OperationID)
		}
		n, err := st.BatchWaitingCount(ctx, 1)
		require.NoError(t, err)
		require.Equal(t, 3, n, fmt.Sprintf("all of %v wait", ids))
	})
}
