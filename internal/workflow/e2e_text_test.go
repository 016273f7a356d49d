package workflow_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// TestAForgedReasonReachesGitLabInert performs issue 13 finding 8 end to
// end: a request whose reason (stored before reasons had to be one line)
// carries a forged trailer for another request, a quick action, a mention
// and an image. The MR the workflow opens on the GitLab simulator names
// only its own operation in its trailer block, has no line a quick action
// or a trailer could start, and the run ends with the binding file on main
// matching the database.
func TestAForgedReasonReachesGitLabInert(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		entry := flow.Entry(false)
		reason := "audit\n\nChangeflow-Operation: op-victim\n/approve\n@all ![p](https://evil.example/p.png)"
		_, err := st.OperationSubmit(t.Context(), store.OperationSubmitParams{
			Operation: store.OperationCreateParams{
				OperationID: "op-forge-1", Subject: "alice", TargetKey: tSingle, ProjectID: 1, Flow: entry.Flow,
				Step: int(entry.Step), Reason: reason, Days: 7, ExpiresAt: time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC),
				Actor: "alice", NextAction: entry.Action,
			},
			BindingStatus: entry.Binding,
		})
		require.NoError(t, err)
		w.until("op-forge-1", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		mrs := w.mrsOf("op-forge-1")
		require.Len(t, mrs, 1)
		desc, _ := mrs[0]["description"].(string)
		require.Equal(t, []string{"op-forge-1"}, flow.Trailers(desc), desc)
		for _, line := range strings.Split(desc, "\n") {
			require.NotEqual(t, "Changeflow-Operation: op-victim", strings.TrimSpace(line), desc)
			require.False(t, strings.HasPrefix(strings.TrimSpace(line), "/"), "quick action line %q", line)
		}
		w.decide("op-forge-1", "approve")
		w.until("op-forge-1", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		require.Contains(t, w.fileOnMain(tSingle), `operationId: "op-forge-1"`)
		w.validatedOnce("op-forge-1")
	})
}
