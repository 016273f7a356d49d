package workflow_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/batch"
)

// TestApproveFirstDaysCountFromTheApproval: on the approve-first flow the
// approver answers three days after the submission; the access still
// lasts the 7 days asked, counted from the approval. The end date the
// approval fixes is the one on main — for a single-request MR and for a
// batch member — in the operation, in the binding once in effect (what
// the expiry scan reads), and the approver's form carries no end date
// (only the days). Ends with the binding files on main against the
// database.
func TestApproveFirstDaysCountFromTheApproval(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		var clock atomic.Pointer[time.Time]
		approvedAt := time.Now().Add(3*24*time.Hour + 250*time.Millisecond).UTC()
		clock.Store(&approvedAt)
		w := newWorld(t, st, func(s *worldSetup) {
			s.deps = func(d *flowDeps) { d.Now = func() time.Time { return *clock.Load() } }
		})
		batchDeps := w.deps
		batch.Register(w.eng, batchFlow(batchDeps))
		rounds := batch.NewRounds(batchFlow(batchDeps), w.eng)
		want := approvedAt.Truncate(time.Second).Add(7 * 24 * time.Hour)

		cases := []struct{ id, subject, target string }{
			{"af-days-single", "bob", tSingle},
			{"af-days-batched", "carol", tBatched},
		}
		for _, c := range cases {
			w.submit(c.id, c.subject, c.target, true) // 7 days, a provisional end in 2031
			w.until(c.id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
			var forms struct {
				Items []map[string]any `json:"items"`
			}
			require.Equal(t, http.StatusOK, w.simJSON(http.MethodGet, "/approval/v1/approvals?operationId="+c.id, nil, &forms))
			require.Len(t, forms.Items, 1)
			fields, _ := forms.Items[0]["fields"].(map[string]any)
			require.EqualValues(t, 7, fields["days"], "%s: the form carries the days", c.id)
			require.NotContains(t, fields, "expiresAt", "%s: no end date before the approval fixes it", c.id)
			w.decide(c.id, "approve")
		}

		o, _ := w.until("af-days-batched", "admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		require.True(t, o.ExpiresAt.Equal(want), "batched: %s, want %s", o.ExpiresAt, want)
		storetest.UntilAdmittedBeforeNow(t, st, "af-days-batched")
		r, err := rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)

		for _, c := range cases {
			o, b := w.until(c.id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			require.True(t, o.ExpiresAt.Equal(want), "%s: operation until %s, want %s", c.id, o.ExpiresAt, want)
			require.True(t, b.ExpiresAt.Equal(want), "%s: binding until %s, want %s", c.id, b.ExpiresAt, want)
			f, err := bindingfile.Parse([]byte(w.fileOnMain(c.target)))
			require.NoError(t, err)
			e, ok := f.Entry(c.subject)
			require.True(t, ok, "%s: entry on main", c.id)
			require.True(t, e.ExpiresAt.Equal(want), "%s: main says until %s, want %s", c.id, e.ExpiresAt, want)
			w.validatedOnce(c.id)
		}
		w.filesExact("af-days-single", "af-days-batched")
	})
}
