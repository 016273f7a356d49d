package workflow_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/reconcile"
)

// TestDeployCallbackAttacks performs the attacks on the deploy callback a
// holder of the shared callback token could try (issue 13, finding 3):
// none may validate a request, neither by exact match nor through
// reconciliation's watermark; each is recorded with its disposition. Then
// the genuine callback for an MR changeflow merged still validates it,
// and its watermark the MERGED requests below it.
func TestDeployCallbackAttacks(t *testing.T) {
	t.Parallel()
	type cb struct {
		iid    int64
		status string
		// sink false: recorded only, as when no sink is wired or its call
		// failed (RECORDED); reconciliation must still not count it.
		sink bool
		want string
	}
	cases := []struct {
		name string
		// prepare sets up what the attack needs in project p.
		prepare func(w *reconcileWorld, p int64)
		attack  []cb
		// after runs after the attack, before reconciliation.
		after func(w *reconcileWorld, p int64)
	}{
		{name: `{"project":P,"mrIid":99999}: an MR no request has`,
			attack: []cb{{iid: 99999, status: "SUCCESS", sink: true, want: store.DeployUnknownMR}}},
		{name: "an MR no request has, recorded but never classified",
			attack: []cb{{iid: 99999, status: "SUCCESS", want: store.DeployRecorded}}},
		{name: "an MR of changeflow's that was closed, never merged",
			prepare: func(w *reconcileWorld, p int64) { w.closedMR(p, 500) },
			attack:  []cb{{iid: 500, status: "SUCCESS", sink: true, want: store.DeployNotMerged}}},
		{name: "an MR iid changeflow reaches only later (sent ahead)",
			attack: []cb{{iid: 12, status: "SUCCESS", sink: true, want: store.DeployUnknownMR}},
			after: func(w *reconcileWorld, p int64) {
				w.merged(p, 10*time.Minute, map[string]int64{fmt.Sprintf("p%d-later-12", p): 12})
			}},
		{name: "a failed deployment of an MR changeflow merged",
			attack: []cb{{iid: 10, status: "FAILED", sink: true, want: store.DeployIgnored}}},
	}
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := t.Context()
				p := int64(100 + i)
				w := newReconcileWorld(t, st, nil)
				below5, below10 := fmt.Sprintf("p%d-below-5", p), fmt.Sprintf("p%d-mr-10", p)
				w.merged(p, 10*time.Minute, map[string]int64{below5: 5, below10: 10})
				if c.prepare != nil {
					c.prepare(w, p)
				}
				cbs := callbacks.New(w.deps().Env, w.deps().Store, nil)
				for _, a := range c.attack {
					rec, err := st.DeployCallbackInsert(ctx, store.DeployCallbackParams{ProjectID: p, MRIID: a.iid, Status: a.status})
					require.NoError(t, err)
					if a.sink {
						res, err := cbs.Deploy(ctx, callbacks.DeployEvent{RowID: rec.ID, ProjectID: p, MRIID: a.iid, Status: a.status})
						require.NoError(t, err)
						require.Equal(t, callbacks.Stale, res)
					}
					got := deployRow(t, st, p, a.iid)
					require.Equal(t, a.want, got.Disposition, got.Reason)
				}
				if c.after != nil {
					c.after(w, p)
				}
				res, err := reconcile.New(w.deps().Env, w.deps().Store).RunOnce(ctx)
				require.NoError(t, err)
				require.Zero(t, res.Validated, "the attack validated nothing")
				require.Zero(t, w.total())

				// The genuine callback for the MR changeflow merged: exact
				// match now, and the watermark for the request below it.
				rec, err := st.DeployCallbackInsert(ctx, store.DeployCallbackParams{ProjectID: p, MRIID: 10, Status: "SUCCESS"})
				require.NoError(t, err)
				out, err := cbs.Deploy(ctx, callbacks.DeployEvent{RowID: rec.ID, ProjectID: p, MRIID: 10, Status: "SUCCESS"})
				require.NoError(t, err)
				require.Equal(t, callbacks.Applied, out)
				_, step := w.state(below10)
				require.Equal(t, domain.StepCalledBack, step)
				res, err = reconcile.New(w.deps().Env, w.deps().Store).RunOnce(ctx)
				require.NoError(t, err)
				b, step := w.state(below5)
				require.Equal(t, domain.BindingValidated, b)
				require.Equal(t, domain.StepReconciled, step)
				if c.after != nil { // MR 12 is above the watermark 10
					b, _ := w.state(fmt.Sprintf("p%d-later-12", p))
					require.Equal(t, domain.BindingMerged, b, "a callback sent ahead never counts for the MR")
				}
				require.Equal(t, 2, w.total())
				require.Equal(t, store.DeployApplied, deployRowByID(t, st, p, rec.ID).Disposition)

				// A second genuine delivery is a duplicate.
				rec, err = st.DeployCallbackInsert(ctx, store.DeployCallbackParams{ProjectID: p, MRIID: 10, Status: "SUCCESS"})
				require.NoError(t, err)
				out, err = cbs.Deploy(ctx, callbacks.DeployEvent{RowID: rec.ID, ProjectID: p, MRIID: 10, Status: "SUCCESS"})
				require.NoError(t, err)
				require.Equal(t, callbacks.Stale, out)
				require.Equal(t, store.DeployDuplicate, deployRowByID(t, st, p, rec.ID).Disposition)
				require.Equal(t, 2, w.total())
			})
		}
	})
}

// closedMR records a request of changeflow with MR iid whose approval was
// rejected and whose MR was closed: changeflow never merged it.
func (w *reconcileWorld) closedMR(project, iid int64) {
	w.t.Helper()
	id := fmt.Sprintf("closed-%d-%d", project, iid)
	_, err := w.st.DB().ExecContext(w.t.Context(),
		"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, mr_iid) VALUES (?, ?, ?, ?, ?, ?, ?)",
		id, "u-"+id, "t-rec", project, flow.FlowLegacy, int(domain.StepCloseMRClosed), iid)
	require.NoError(w.t, err)
	_, err = w.st.DB().ExecContext(w.t.Context(),
		"INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES (?, ?, ?, ?)",
		"u-"+id, "t-rec", string(domain.BindingRejected), id)
	require.NoError(w.t, err)
}

// deployRow is the newest recorded deploy callback for MR (p, iid).
func deployRow(t *testing.T, st *store.Store, p, iid int64) store.DeployCallbackRecord {
	t.Helper()
	recs, err := st.DeployCallbackListByMR(t.Context(), p, iid, 1)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	return recs[0]
}

// deployRowByID is MR (p, 10)'s recorded deploy callback id.
func deployRowByID(t *testing.T, st *store.Store, p, id int64) store.DeployCallbackRecord {
	t.Helper()
	recs, err := st.DeployCallbackListByMR(t.Context(), p, 10, 100)
	require.NoError(t, err)
	for _, r := range recs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no deploy callback %d", id)
	return store.DeployCallbackRecord{}
}
