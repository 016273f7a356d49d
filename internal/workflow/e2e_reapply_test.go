package workflow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// TestReapplyAfterExpiryBeforeTheScan performs the hole that was open: a
// grant's expiry passes, and before the expiry scan runs its owner asks
// again. The re-application used to take the row over (the expired
// VALIDATED row counted as re-appliable); rejected, it left the old entry
// on main with the binding REJECTED and no revocation — access granted in
// the file for good. Now it is refused (in progress, nothing stored), the
// scan removes the old entry, and once REVOKED the person asks again.
func TestReapplyAfterExpiryBeforeTheScan(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("lapse", "amy", tSingle)
		w.expire("lapse")

		entry := flow.Entry(true)
		_, err := st.OperationSubmit(t.Context(), store.OperationSubmitParams{
			Operation: store.OperationCreateParams{
				OperationID: "lapse-again", Subject: "amy", TargetKey: tSingle, ProjectID: 1, Flow: entry.Flow,
				Step: int(entry.Step), Reason: "e2e", Days: 7, ExpiresAt: time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC),
				Actor: "amy", NextAction: entry.Action,
			},
			BindingStatus: entry.Binding,
		})
		var refused *store.BindingRefusedError
		require.ErrorAs(t, err, &refused)
		require.Equal(t, domain.CodeRequestInProgress, refused.Code())
		require.True(t, refused.Current.ExpiredAwaitingRemoval())
		_, err = st.OperationGet(t.Context(), "lapse-again")
		require.ErrorIs(t, err, domain.ErrNotFound, "nothing of the refused request is stored")
		b, err := st.BindingGet(t.Context(), "amy", tSingle)
		require.NoError(t, err)
		require.Equal(t, "lapse", b.OperationID, "the expired grant still owns its row")
		_, ok := w.entryOf(tSingle, "amy")
		require.True(t, ok, "the entry is on main until its removal")
		w.filesExact("lapse")

		require.Equal(t, 1, w.scan().Revoked, "the scan still finds the expired grant")
		w.until(domain.RevocationID("lapse"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("lapse")
		_, ok = w.entryOf(tSingle, "amy")
		require.False(t, ok, "the old entry is gone from main")
		w.filesExact("lapse")

		// REVOKED is re-appliable: the person asks again, and this time the
		// approval says no — the file has no entry of hers, nothing lingers.
		w.submit("lapse-again", "amy", tSingle, true)
		w.until("lapse-again", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("lapse-again", "reject")
		w.until("lapse-again", "rejected", at(domain.StepCloseRejected, domain.BindingRejected))
		_, ok = w.entryOf(tSingle, "amy")
		require.False(t, ok)
		w.filesExact("lapse", "lapse-again")
	})
}
