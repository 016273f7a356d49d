package workflow_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/filecheck"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestAccessInEffectButRemovedFromMainByHand: amy's and ben's grants are
// in effect; a maintainer then removes amy's entry from main by hand.
// changeflow's records still say amy has the access, so the check
// reports IN_EFFECT_NOT_ON_MAIN for her — by target and by subject — and
// nothing for ben. The end check is the shared one, expecting exactly
// that one difference on the target's file and none elsewhere. Nothing
// of changeflow's puts a hand-removed entry back (reconciliation follows
// lost deploy callbacks, not the file), so the records are brought in
// line the way the discrepancy's words say: amy gives the access back,
// the removal finds nothing to remove (REVOKE_ABSENT, no merge), her
// period ends naming the removal and no commit, the discrepancy is gone
// and the files on main are exactly what the database says.
func TestAccessInEffectButRemovedFromMainByHand(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ctx := t.Context()
		w.granted("ie-amy", "amy", tSingle)
		w.granted("ie-ben", "ben", tSingle)
		require.Empty(t, w.discrepancies(tSingle), "both through changeflow: records and main agree")
		require.Empty(t, w.subjectDiscrepancies("amy"))

		w.handCommit(tSingle, func(f bindingfile.File) bindingfile.File { return f.Without("amy") })
		_, onMain := w.entryOf(tSingle, "amy")
		require.False(t, onMain, "amy's entry is gone from main")
		require.True(t, w.period("ie-amy").Open(), "changeflow's records: amy's access lasts")

		amy := domain.AccessDiscrepancy{Subject: "amy", OperationID: "ie-amy", Kind: domain.DiscrepancyInEffectNotOnMain}
		require.Equal(t, []domain.AccessDiscrepancy{amy}, w.discrepancies(tSingle), "by target")
		require.Equal(t, []domain.TargetDiscrepancy{{TargetKey: tSingle, AccessDiscrepancy: amy}},
			w.subjectDiscrepancies("amy"), "by subject")
		require.Empty(t, w.subjectDiscrepancies("ben"), "ben's entry and period agree")

		// The end check, expecting exactly the discrepancy: amy's entry
		// missing on the target's file, every other file exact, and the
		// access history still matching the bindings.
		ids := []string{"ie-amy", "ie-ben"}
		err := filecheck.Check(ctx, st, tSingle, []byte(w.fileOnMain(tSingle)), ids)
		require.EqualError(t, err, "binding file of "+tSingle+" on the default branch (1 entries, 2 VALIDATED requests): "+
			"missing entry amy/ie-amy (VALIDATED in the database)")
		for _, target := range []string{tBatched, tOther} {
			content := ""
			if code := w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/repository/files/bindings%2F"+target+".yaml?ref=main", nil, nil); code == http.StatusOK {
				content = w.fileOnMain(target)
			}
			require.NoError(t, filecheck.Check(ctx, st, target, []byte(content), ids))
		}
		w.accessMatchesBindings()

		// Resolved through changeflow: amy gives the access back.
		res, err := revoker(w.deps).Revoke(ctx, "ie-amy", domain.RevokeGivenBack, "given back by its owner", "amy")
		require.NoError(t, err)
		require.True(t, res.Created)
		w.eng.Wake()
		rev := domain.RevocationID("ie-amy")
		o, _ := w.until(rev, "nothing to remove", at(domain.StepRevokeAbsent, domain.BindingRevoked))
		require.Zero(t, o.MRIID, "no MR: nothing to remove")
		p := w.period("ie-amy")
		require.False(t, p.Open(), "amy's access ended")
		require.Equal(t, rev, p.EndOperationID)
		require.Empty(t, p.EndSHA, "ended by no commit: the entry was already gone")
		require.Empty(t, w.discrepancies(tSingle), "records and main agree again")
		require.Empty(t, w.subjectDiscrepancies("amy"))
		w.filesExact("ie-amy", "ie-ben", rev)
	})
}
