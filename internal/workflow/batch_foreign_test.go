package workflow_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"

	"changeflow/internal/store/storetest"
)

// sneakEntry commits, as the developer, a mallory entry into the batching
// target's binding file and bindings/sneak.yaml on branch (from main when
// fromMain): what a person with push rights would slip into a batch.
func (w *world) sneakEntry(branch string, fromMain bool) string {
	w.t.Helper()
	action := "create"
	if !fromMain {
		action = "update" // the batch's commit created the file
	}
	body := map[string]any{
		"branch": branch, "commit_message": "changeflow: batch (nobody reviews this)",
		"actions": []map[string]any{
			{"action": action, "file_path": "bindings/" + tBatched + ".yaml",
				"content": "- subject: \"mallory\"\n  expiresAt: \"2099-01-01T00:00:00Z\"\n  operationId: \"forged\"\n"},
			{"action": "create", "file_path": "bindings/sneak.yaml",
				"content": "- subject: \"mallory\"\n  expiresAt: \"2099-01-01T00:00:00Z\"\n"},
		},
	}
	if fromMain {
		body["start_branch"] = "main"
	}
	var c struct {
		ID string `json:"id"`
	}
	require.Equal(w.t, http.StatusCreated, w.asDeveloper(http.MethodPost, "/repository/commits", body, &c), "the developer's commit on %s", branch)
	return c.ID
}

// TestForeignPreMadeBatchBranchIsNotAdopted: a person prepares
// changeflow/batch-1 — the next round's branch — with a mallory entry in
// the batching target's file. The round does not build on it: a security
// event foreign_branch for batch-1, the batch built on
// changeflow/r2/batch-1 from main, merged, every member in effect,
// nothing of the person's on main. Before the check the round built on
// the branch's head and the merged MR carried the mallory entry.
func TestForeignPreMadeBatchBranchIsNotAdopted(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-fb-1", "op-fb-2"}
		w.sneakEntry(flow.BatchBranchName(1), true)
		w.admitted(ids...)

		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		require.Equal(t, int64(1), r.BatchID)
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		w.nothingForeignOnMain(ids...)

		b, err := st.BatchGet(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, domain.BatchSucceeded, b.Status)
		require.Equal(t, flow.FreshBranchName(flow.BatchBranchName(1), 2), b.Branch)
		require.Empty(t, w.batchMRs(1), "no MR on the person's branch")
		evs := w.securityEvents("batch-1")
		require.Len(t, evs, 1)
		require.Equal(t, "security.foreign_branch", evs[0].Action)
		for _, id := range ids {
			w.validatedOnce(id)
		}
	})
}

// TestForeignPushOntoABatchMRIsNeverApproved: while the batch MR waits for
// the bots (the first approval is held in GitLab), the person pushes a
// mallory entry onto its branch. The held approval, pinned to the checked
// head, is refused (409); the check of the new head finds the person's
// commit: a security event foreign_head, the batch failed and settled (its
// MR closed, not merged), and its members go through the next batch on a
// new branch. Before the check the bots approved and merged the pushed
// head.
func TestForeignPushOntoABatchMRIsNeverApproved(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-fp-1", "op-fp-2"}
		w.admitted(ids...)
		code := w.simJSON(http.MethodPost, "/gitlab/_control/faults", map[string]any{
			"method": "POST", "path": "/projects/*/merge_requests/*/approve", "kind": "delay", "delay": "60s", "phase": "before", "count": 1,
		}, nil)
		require.Equal(t, http.StatusCreated, code)
		t.Cleanup(func() { // a failed test must not leave the call held
			if resp, err := http.Post(w.simTS.URL+"/gitlab/_control/faults/release", "application/json", nil); err == nil {
				_ = resp.Body.Close()
			}
		})

		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r.Outcome)
		deadline := time.Now().Add(time.Minute)
		for {
			_, _ = w.eng.RunDue(t.Context())
			var held struct {
				Held int `json:"held"`
			}
			w.simJSON(http.MethodGet, "/gitlab/_control/faults/held", nil, &held)
			if held.Held > 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "the approval was never held")
			time.Sleep(5 * time.Millisecond)
		}
		pushed := w.sneakEntry(flow.BatchBranchName(r.BatchID), false)
		w.simJSON(http.MethodPost, "/gitlab/_control/faults/release", map[string]any{}, nil)
		w.untilBatch(r.BatchID, domain.BatchFailed)

		mrs := w.batchMRs(r.BatchID)
		require.Len(t, mrs, 1)
		require.Equal(t, "closed", mrs[0]["state"], "the MR with the pushed head is closed, never merged")
		evs := w.securityEvents("batch-1")
		require.Len(t, evs, 1)
		require.Equal(t, "security.foreign_head", evs[0].Action)
		require.Contains(t, evs[0].Params, pushed)

		// The members wait again; the next round builds a new batch.
		for _, id := range ids {
			w.until(id, "re-admitted", at(domain.StepCreateAdmitted, domain.BindingMRCreating))
		}
		storetest.UntilAdmittedBeforeNow(t, st, ids...)
		r2, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		require.Equal(t, "CLAIMED", r2.Outcome)
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		w.nothingForeignOnMain(ids...)
		for _, id := range ids {
			w.validatedOnce(id)
		}
	})
}

// TestStraySweepClosesOnlyTheBotsMRs: a person's MR "Human MR: docs" from
// changeflow/batch-1 after batch 1 SUCCEEDED. The stray sweep, which
// closes MRs on ended batches' branches, leaves it open and records a
// security event foreign_mr (once, however often it runs). Before, the
// sweep closed it.
func TestStraySweepClosesOnlyTheBotsMRs(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		ids := []string{"op-sweep-1"}
		w.admitted(ids...)
		r, err := w.rounds.RunRound(t.Context(), 1)
		require.NoError(t, err)
		w.until(ids[0], "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.untilBatch(r.BatchID, domain.BatchSucceeded)

		branch := flow.BatchBranchName(r.BatchID)
		require.Equal(t, http.StatusCreated, w.asDeveloper(http.MethodPost, "/repository/commits", map[string]any{
			"branch": branch, "start_branch": "main", "force": true, "commit_message": "docs",
			"actions": []map[string]any{{"action": "create", "file_path": "docs.md", "content": "docs\n"}},
		}, nil))
		var mr struct {
			IID int64 `json:"iid"`
		}
		require.Equal(t, http.StatusCreated, w.asDeveloper(http.MethodPost, "/merge_requests", map[string]any{
			"source_branch": branch, "target_branch": "main", "title": "Human MR: docs",
		}, &mr))

		for range 2 {
			n, err := w.rounds.SweepStrays(t.Context())
			require.NoError(t, err)
			require.Zero(t, n, "nothing of the bot's to close")
		}
		require.Equal(t, "opened", w.mrState(mr.IID), "a person's MR is left alone")
		evs := w.securityEvents("batch-1")
		require.Len(t, evs, 1, "one event, however many sweeps")
		require.Equal(t, "security.foreign_mr", evs[0].Action)
		w.filesExact(ids...)
	})
}
