package batch

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

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
		ids := []string{"op-f0", "op-f1", "op-f2"}
		d := admittedBatchWorld(t, st, ids...)
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
