package workflow_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestLegacyHappyPath: create_mr → poll_pipeline → submit_approval (with
// ext.mrId) → APPROVED callback → two bot approvals → merge → MERGED →
// deploy callback → VALIDATED, with one MR, one approval and one success
// side effect.
func TestLegacyHappyPath(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-legacy-1", "alice", tSingle, false)

		o, _ := w.until("op-legacy-1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		require.NotZero(t, o.MRIID)
		require.Equal(t, "changeflow/op-op-legacy-1", o.Branch)
		as := w.approvalsOf("op-legacy-1")
		require.Len(t, as, 1)
		require.NotEmpty(t, as[0].Ext.MRID, "legacy approvals carry ext.mrId")
		require.Equal(t, as[0].ApprovalID, o.ApprovalID)

		w.decide("op-legacy-1", "approve")
		w.until("op-legacy-1", "validated", at(domain.StepCalledBack, domain.BindingValidated))

		mrs := w.mrsOf("op-legacy-1")
		require.Len(t, mrs, 1, "exactly one MR")
		require.Equal(t, "merged", mrs[0]["state"])
		require.Contains(t, mrs[0]["description"], "Changeflow-Operation: op-legacy-1")
		require.Contains(t, w.fileOnMain(tSingle), `operationId: "op-legacy-1"`)
		w.validatedOnce("op-legacy-1")
	})
}

// TestApproveFirstHappyPath: submit_approval → APPROVED callback without
// ext.mrId on a target without batching → create_mr → pipeline → approve
// → merge → VALIDATED.
func TestApproveFirstHappyPath(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		w.submit("op-af-1", "bob", tSingle, true)
		o, _ := w.until("op-af-1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		require.Zero(t, o.MRIID, "no MR before the approval")
		require.Empty(t, w.approvalsOf("op-af-1")[0].Ext.MRID)

		w.decide("op-af-1", "approve")
		w.until("op-af-1", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		mrs := w.mrsOf("op-af-1")
		require.Len(t, mrs, 1)
		require.Equal(t, "merged", mrs[0]["state"])
		require.True(t, strings.Contains(w.fileOnMain(tSingle), `subject: "bob"`))
		w.validatedOnce("op-af-1")
	})
}
