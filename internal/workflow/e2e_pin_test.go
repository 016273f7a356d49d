package workflow_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/filecheck"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// holdCommit holds the first commit on a branch starting with prefix
// between the step's read and its commit: the step has read the binding
// file and built its edit; the commit waits until the test released it,
// and meanwhile the test lands another change on main — the race of a
// loaded system, made deterministic.
type holdCommit struct {
	gitlab.GitLab
	prefix  string
	held    chan struct{} // closed when the commit is held
	release chan struct{} // closed by the test
	once    sync.Once
}

func newHoldCommit(prefix string) *holdCommit {
	return &holdCommit{prefix: prefix, held: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdCommit) wrap(g gitlab.GitLab) gitlab.GitLab { h.GitLab = g; return h }

func (h *holdCommit) CreateCommit(ctx context.Context, project string, c gitlab.CommitRequest) (gitlab.Commit, error) {
	if strings.HasPrefix(c.Branch, h.prefix) {
		h.once.Do(func() {
			close(h.held)
			select {
			case <-h.release:
			case <-ctx.Done():
			}
		})
	}
	return h.GitLab.CreateCommit(ctx, project, c)
}

// untilHeld drives the engine until h holds a commit.
func (w *world) untilHeld(h *holdCommit) {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, _ = w.eng.RunDue(w.t.Context())
		select {
		case <-h.held:
			return
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			w.t.Fatal("the commit was never held")
		}
	}
}

// filesExact is the end-to-end check: every target's binding file on main
// holds exactly one entry per VALIDATED request of ids and none for any
// other request (filecheck).
func (w *world) filesExact(ids ...string) {
	w.t.Helper()
	for _, target := range []string{tSingle, tBatched, tOther} {
		content := ""
		if code := w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/repository/files/bindings%2F"+target+".yaml?ref=main", nil, nil); code == http.StatusOK {
			content = w.fileOnMain(target)
		}
		require.NoError(w.t, filecheck.Check(w.t.Context(), w.st, target, []byte(content), ids))
	}
	w.accessMatchesBindings()
}

// accessMatchesBindings: the access history agrees with the bindings —
// a relationship has an open period exactly while its access is in
// effect (VALIDATED; RENEWING, REVOKING, REVOKE_FAILED: a renewal or a
// removal under way, the access lasting), and that period is the one of
// the request whose entry is on main: the binding's owner when VALIDATED,
// else the grant its renewal or revocation names (none for the removal of
// an entry changeflow did not write: that access is the entry's repo
// period).
func (w *world) accessMatchesBindings() {
	w.t.Helper()
	rows, err := w.st.DB().QueryContext(w.t.Context(),
		"SELECT b.subject_id, b.target_key, b.status, b.operation_id, COALESCE(o.grant_operation_id, ''), COALESCE(ai.operation_id, ''),"+
			" o.review_item_id IS NOT NULL"+
			" FROM binding b JOIN operation o ON o.operation_id = b.operation_id"+
			" LEFT JOIN access_interval ai ON ai.subject = b.subject_id AND ai.target_key = b.target_key AND ai.source = 'changeflow' AND ai.until_at IS NULL")
	require.NoError(w.t, err)
	defer rows.Close()
	for rows.Next() {
		var subject, target, status, owner, grant, open string
		var repoEntry bool
		require.NoError(w.t, rows.Scan(&subject, &target, &status, &owner, &grant, &open, &repoEntry))
		want := ""
		switch domain.BindingStatus(status) {
		case domain.BindingValidated:
			want = owner
		case domain.BindingRenewing, domain.BindingRevoking, domain.BindingRevokeFailed:
			if !repoEntry { // a review's removal of a repo entry: its period is the repo one
				want = grant
			}
		}
		require.Equal(w.t, want, open, "%s on %s (%s, owner %s): the open period", subject, target, status, owner)
	}
	require.NoError(w.t, rows.Err())
}

// neverPaged: none of ids ever stopped in a state that pages a person.
func (w *world) neverPaged(ids ...string) {
	w.t.Helper()
	for _, id := range ids {
		hist, err := w.st.OperationStepList(w.t.Context(), id)
		require.NoError(w.t, err)
		for _, h := range hist {
			step := domain.StepStatus(h.ToStep)
			require.NotEqual(w.t, domain.StepHandleRebaseConflict, step, "%s: %s", id, h.Note)
			require.NotEqual(w.t, domain.StepCreateFailed, step, "%s: %s", id, h.Note)
		}
	}
}

// legacyValidated drives a legacy request to VALIDATED: MR, approval
// decided, merged, deployed.
func (w *world) legacyValidated(id, subject, target string) {
	w.t.Helper()
	w.submit(id, subject, target, false)
	w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
	w.decide(id, "approve")
	w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
}

// TestCreateMRCommitIsPinnedToWhatItRead (issue 12, finding 1): create_mr
// has read the binding file on main (holding cleo's entry) and built its
// edit, when amy's request merges meanwhile. The commit starts from the
// commit that was read (start_sha), not from main's new head: committing on
// the new head with the old read would merge cleanly and revert amy's entry
// while amy's request says VALIDATED. Pinned, the MR conflicts with amy's
// merge, is regenerated from a fresh read, and every entry survives: the
// file on main is exactly the three VALIDATED requests, nobody paged.
func TestCreateMRCommitIsPinnedToWhatItRead(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		hold := newHoldCommit(flow.BranchName("op-pin-ben"))
		w := newWorld(t, st, withGitLab(hold.wrap))
		w.legacyValidated("op-pin-cleo", "cleo", tSingle)
		before := w.fileOnMain(tSingle)

		w.submit("op-pin-ben", "ben", tSingle, false)
		w.untilHeld(hold)
		w.legacyValidated("op-pin-amy", "amy", tSingle)
		require.NotEqual(t, before, w.fileOnMain(tSingle), "amy's merge landed while ben's commit was held")
		close(hold.release)

		w.until("op-pin-ben", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("op-pin-ben", "approve")
		w.until("op-pin-ben", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.filesExact("op-pin-cleo", "op-pin-amy", "op-pin-ben")
		w.neverPaged("op-pin-cleo", "op-pin-amy", "op-pin-ben")
		require.Len(t, w.mrsOf("op-pin-ben"), 1, "one MR, regenerated in place")
	})
}

// TestCreateMRFileCreatedMeanwhile (issue 12, finding 2): create_mr read
// main while the binding file did not exist yet; amy's request creates it
// before ben's commit lands. The pinned commit creates the file on the
// commit that was read (where it still does not exist), the MR conflicts
// with amy's, regeneration reads the file and edits it: ben VALIDATED,
// never CREATE_FAILED, both entries on main.
func TestCreateMRFileCreatedMeanwhile(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		hold := newHoldCommit(flow.BranchName("op-new-ben"))
		w := newWorld(t, st, withGitLab(hold.wrap))
		w.submit("op-new-ben", "ben", tSingle, false)
		w.untilHeld(hold)
		w.legacyValidated("op-new-amy", "amy", tSingle)
		close(hold.release)

		w.until("op-new-ben", "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide("op-new-ben", "approve")
		w.until("op-new-ben", "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.filesExact("op-new-amy", "op-new-ben")
		w.neverPaged("op-new-amy", "op-new-ben")
	})
}

// TestFileAlreadyExistsIsARetry (issue 12, finding 2, GitLab's answer):
// the commit is refused with GitLab's 400 "A file with this name already
// exists" (as when a commit is built on a stale read of the branch). That
// is a retry from a fresh read, never CREATE_FAILED: the request reaches
// VALIDATED with its entry on main.
func TestFileAlreadyExistsIsARetry(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		require.Equal(t, http.StatusCreated, w.simJSON(http.MethodPost, "/gitlab/_control/faults", map[string]any{
			"method": "POST", "path": "/projects/*/repository/commits", "kind": "status", "status": 400,
			"message": "A file with this name already exists", "count": 2,
		}, nil))
		w.legacyValidated("op-exists", "eve", tSingle)
		w.filesExact("op-exists")
		w.neverPaged("op-exists")
		hist, err := st.OperationStepList(t.Context(), "op-exists")
		require.NoError(t, err)
		require.NotEmpty(t, hist)
	})
}

// TestBatchCommitIsPinnedToWhatItRead (issue 12, finding 1, batches): a
// round has read the batching target's file and built the batch's edit,
// when a legacy request for the same target merges meanwhile (the two
// flows overlap while workflow.approveFirst is switched). The batch commit
// starts from the commit that was read; its MR conflicts with the merge
// instead of reverting it, the batch settles, its members are claimed
// again from a fresh read: every member VALIDATED and the file exact.
func TestBatchCommitIsPinnedToWhatItRead(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, st *store.Store) {
		hold := newHoldCommit("changeflow/batch-")
		w := newBatchWorld(t, st, hold.wrap)
		w.legacyValidated("op-bp-seed", "sam", tBatched)
		ids := []string{"op-bp-1", "op-bp-2"}
		w.admitted(ids...)

		round := make(chan error, 1)
		go func() { _, err := w.rounds.RunRound(t.Context(), 1); round <- err }()
		select {
		case <-hold.held:
		case <-time.After(20 * time.Second):
			t.Fatal("the batch commit was never held")
		}
		w.legacyValidated("op-bp-legacy", "lou", tBatched)
		close(hold.release)
		require.NoError(t, <-round)

		w.roundsUntilIdle()
		all := append([]string{"op-bp-seed", "op-bp-legacy"}, ids...)
		for _, id := range all {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		w.filesExact(all...)
	})
}

// TestOwnMergesNeverPage (issue 12, finding 3): three legacy requests for
// one non-batching file, their MRs open together; each merge makes the
// others conflict. With workflow.maxRegenerations 0 — the count allows no
// regeneration at all — every conflict still regenerates, because it was
// made by changeflow's own merges (every entry that changed on main is a
// request changeflow knows): all three VALIDATED, nobody paged, the file
// exact. TestRegenerationBoundExhausted shows a change made outside
// changeflow still stops at the bound.
func TestOwnMergesNeverPage(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st, withConfig(map[string]any{"workflow.maxRegenerations": 0}))
		ids := []string{"op-own-a", "op-own-b", "op-own-c"}
		for i, id := range ids {
			w.submit(id, []string{"amy", "ben", "cleo"}[i], tSingle, false)
		}
		for _, id := range ids {
			w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		}
		for _, id := range ids {
			w.decide(id, "approve")
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		w.filesExact(ids...)
		w.neverPaged(ids...)
		regenerated := 0
		for _, id := range ids[1:] {
			hist, err := st.OperationStepList(t.Context(), id)
			require.NoError(t, err)
			for _, h := range hist {
				if strings.HasPrefix(h.Note, "regenerated ") {
					regenerated++
				}
			}
		}
		require.GreaterOrEqual(t, regenerated, 2, "the later two regenerated past the bound")
	})
}
