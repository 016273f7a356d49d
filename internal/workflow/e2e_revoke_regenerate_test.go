package workflow_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/filecheck"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// conflictedRemoval expires grant (of the single-request target), holds
// its removal MR's check pipeline, lets edit change main under the open MR
// (a change next to or on the entry the MR removes, so its rebase
// conflicts in Git) and releases the pipeline: the merge then meets the
// conflict and regenerates the MR.
func (w *revokeWorld) conflictedRemoval(grant string, edit func()) (rev string, iid int64) {
	w.t.Helper()
	// The held pipeline is polled until released, however long the edit
	// takes on a loaded machine (not timed out into PIPELINE_PENDING).
	ov := e2eOverlay(w.simTS.URL)
	ov["polling.pipeline.timeout"] = "10m"
	w.load(ov)
	require.Equal(w.t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"outcome": "never", "count": 1}, nil))
	w.expire(grant)
	require.Equal(w.t, 1, w.scan().Revoked)
	rev = domain.RevocationID(grant)
	o, _ := w.until(rev, "its removal's pipeline held", at(domain.StepCreatePipelineRunning, domain.BindingRevoking))
	edit()
	require.Equal(w.t, http.StatusOK, w.simJSON(http.MethodPost, "/gitlab/_control/pipelines", map[string]any{"mr_iid": o.MRIID, "outcome": "pass"}, nil))
	return rev, o.MRIID
}

// TestRemovalWhoseRebaseConflictsIsRegeneratedAsARemoval: a removal MR of
// a target without batching conflicts at its merge (main moved under it:
// another grant's entry was added next to the one it removes). The
// regeneration rewrites it on main's head as the REMOVAL of the grant's
// entry — before, regenerate knew only grants and wrote an entry under the
// revocation's operationId, so the access stayed on main after the
// revocation said REVOKED (found by the three-process expiry test). The
// one MR merges, the revocation is REVOKED once, the other entries stay.
func TestRemovalWhoseRebaseConflictsIsRegeneratedAsARemoval(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("rg-old", "amy", tSingle)
		// ben's entry lands right after amy's (the file is sorted): Git
		// cannot merge the removal of the one with the addition of the
		// other.
		rev, iid := w.conflictedRemoval("rg-old", func() { w.granted("rg-new", "ben", tSingle) })
		w.until(rev, "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("rg-old")

		mrs := w.mrsOf(rev)
		require.Len(t, mrs, 1, "the same MR, regenerated")
		require.EqualValues(t, iid, mrs[0]["iid"])
		require.Equal(t, "merged", mrs[0]["state"])
		hist, err := st.OperationStepList(t.Context(), rev)
		require.NoError(t, err)
		regenerated := 0
		for _, h := range hist {
			if strings.HasPrefix(h.Note, "regenerated ") {
				regenerated++
			}
		}
		require.Equal(t, 1, regenerated, "one regeneration")
		f, err := bindingfile.Parse([]byte(w.fileOnMain(tSingle)))
		require.NoError(t, err)
		for _, e := range f.Entries {
			require.NotEqual(t, "amy", e.Subject, "amy's access is gone from main: %+v", f.Entries)
			require.NotEqual(t, rev, e.OperationID, "no entry under the revocation's id: %+v", f.Entries)
		}
		_, ok := f.Entry("ben")
		require.True(t, ok, "the other grant's entry stays")
		w.filesExact("rg-old", "rg-new")
	})
}

// TestRemovalWhoseEntryVanishedBeforeItsRegeneration: as above, but a
// maintainer replaced the grant's entry on main by one of their own while
// the removal MR was open (the edit conflicts with the removal). Regenerating finds nothing left to remove: the MR is closed
// and the revocation is REVOKE_ABSENT, REVOKED once — as create_mr does
// when the entry is gone before the MR — never a conflict for a person.
func TestRemovalWhoseEntryVanishedBeforeItsRegeneration(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		w.granted("rv-old", "amy", tSingle)
		w.granted("rv-live", "ben", tSingle)
		amyByHand := bindingfile.Entry{Subject: "amy", ExpiresAt: time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC), OperationID: "amy-by-hand"}
		rev, iid := w.conflictedRemoval("rv-old", func() {
			f, err := bindingfile.Parse([]byte(w.fileOnMain(tSingle)))
			require.NoError(t, err)
			w.commitOnMain("update", tSingle, string(f.With(amyByHand).Marshal()))
		})
		o, _ := w.until(rev, "nothing to remove", at(domain.StepRevokeAbsent, domain.BindingRevoked))
		require.Empty(t, o.NextAction)
		w.revokedOnce("rv-old")
		mrs := w.mrsOf(rev)
		require.Len(t, mrs, 1)
		require.EqualValues(t, iid, mrs[0]["iid"])
		require.Equal(t, "closed", mrs[0]["state"], "an MR that would remove nothing is closed")
		hist, err := st.OperationStepList(t.Context(), rev)
		require.NoError(t, err)
		for _, h := range hist {
			require.NotEqual(t, domain.StepHandleRebaseConflict, domain.StepStatus(h.ToStep), "never a conflict for a person: %s", h.Note)
		}
		require.Contains(t, hist[len(hist)-1].Note, "nothing to remove")
		require.NoError(t, filecheck.Check(t.Context(), st, tSingle, []byte(w.fileOnMain(tSingle)), []string{"rv-old", "rv-live"}, amyByHand),
			"the entry put there by hand stays, unchanged")
	})
}
