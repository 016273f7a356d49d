package workflow_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/review"
)

// TestAccessReviewRemovesARepositoryEntry: on a batching target, three
// grants went through changeflow and a maintainer added hank's entry to
// main by hand, which the repository reader gives a period of its own.
// A campaign holds all four. The owner keeps one grant, revokes another
// and hank's entry (hank, an owner too, may not decide his own), and
// leaves the third grant to the default. The removals go out through the
// ordinary path — the project's batch MR, whose description names the
// campaign and the decider, merged and confirmed — the repo entry's by a
// removal no grant owns. Two instances run the review pass side by side;
// each removal starts once. At the end main holds only the kept entry,
// the report says who decided what and that each removal is in effect,
// hank's repo period ended at his removal's confirmation (the reader,
// reading the merge, leaves it so), nothing is flagged, and the files
// on main are what the database says.
func TestAccessReviewRemovesARepositoryEntry(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		w := newRevokeWorld(t, st)
		ov := e2eOverlay(w.simTS.URL)
		ov["targets"].(map[string]any)[tBatched].(map[string]any)["owners"] = []any{"olga", "hank"}
		w.load(ov)
		w.admitted("rr-keep", "rr-gone", "rr-late")
		require.Len(t, w.roundsUntilIdle(), 1)
		for _, id := range []string{"rr-keep", "rr-gone", "rr-late"} {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		}
		r := w.repoReader()
		w.read(r)
		hank := bindingfile.Entry{Subject: "hank", ExpiresAt: time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second), OperationID: "hand-hank"}
		_, added := w.handCommit(tBatched, func(f bindingfile.File) bindingfile.File { return f.With(hank) })
		require.Equal(t, 1, w.read(r), "the reader reads the hand commit")

		rv := wakingRevoker{Revoker: revoker(w.deps), wake: w.eng.Wake}
		one := &review.Reviews{Store: st, Revoker: rv, Config: w.cfg.Load, Wake: w.eng.Wake}
		two := &review.Reviews{Store: st, Revoker: rv, Config: w.cfg.Load, Wake: w.eng.Wake}
		c, err := st.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: tBatched, DueAt: time.Now().Add(time.Hour),
			Default: domain.ReviewRevoke, OpenedBy: "ops-olga"})
		require.NoError(t, err)
		require.Equal(t, 4, c.Items, "three grants and the repository entry")
		item := w.reviewItems(c.ID)
		keep, gone, late := item["user-rr-keep-0"], item["user-rr-gone-1"], item["user-rr-late-2"]
		require.Equal(t, "rr-gone", gone.GrantOperationID)
		require.Empty(t, item["hank"].GrantOperationID, "the repository entry has no grant")
		require.True(t, item["hank"].From.Equal(added), "from the hand commit: %v, %v", item["hank"].From, added)

		// hank is an owner, but the entry is his own access.
		owners := []string{"olga", "hank"}
		require.Equal(t, domain.ReviewOwnAccess, domain.MayDecide(domain.Reviewer{Account: "hank"}, owners, item["hank"].Subject))
		require.Equal(t, domain.ReviewAllowed, domain.MayDecide(domain.Reviewer{Account: "olga"}, owners, item["hank"].Subject))
		for _, d := range []struct {
			it       store.ReviewItem
			decision domain.ReviewDecision
			comment  string
		}{{keep, domain.ReviewKeep, ""}, {gone, domain.ReviewRevoke, "left the team"}, {item["hank"], domain.ReviewRevoke, "nobody knows him"}} {
			_, err := st.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: d.it.ID, Decision: d.decision, By: "olga", Comment: d.comment})
			require.NoError(t, err)
		}

		res := passes(t, one, two)
		require.Equal(t, 2, res.Removals, "the grant's and the entry's removal, once each")
		removal := domain.RepoRemovalID(item["hank"].ID)
		require.Equal(t, domain.BindingRevoking, w.bindingOf(removal))
		w.accessMatchesBindings() // while removing: the grant's period open, and hank's repo one
		require.Len(t, w.accessAt(tBatched, time.Now()), 4, "every access lasts until its removal is in effect")
		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID("rr-gone"), removal)
		rounds := w.roundsUntilIdle()
		require.Len(t, rounds, 1, "both removals in one batch MR")
		require.Equal(t, 2, rounds[0].Members)
		mrs := w.batchMRs(rounds[0].BatchID)
		require.Len(t, mrs, 1)
		desc, _ := mrs[0]["description"].(string)
		for _, want := range []string{"remove hank from " + tBatched, "revoked by olga (nobody knows him)", "revoked by olga (left the team)"} {
			require.Contains(t, desc, want)
		}
		require.Contains(t, desc, "access review "+strconv.FormatInt(c.ID, 10)+" of "+tBatched)
		o, _ := w.until(removal, "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Equal(t, "hand-hank", o.GrantOperationID)
		require.Equal(t, domain.RevokeOperator, o.RevokeReason)
		w.until(domain.RevocationID("rr-gone"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		w.revokedOnce("rr-gone")
		steps, err := st.OperationStepList(ctx, removal)
		require.NoError(t, err)
		require.Equal(t, "olga", steps[0].Actor, "the decider started the removal")
		require.Contains(t, steps[0].Note, "access review "+strconv.FormatInt(c.ID, 10)+" of "+tBatched+": revoked by olga")

		// The due date passes: the undecided grant takes the default.
		_, err = st.DB().ExecContext(ctx, "UPDATE review_campaign SET due_at = ? WHERE id = ?",
			st.Dialect().Time(time.Now().Add(-time.Minute)), c.ID)
		require.NoError(t, err)
		res = passes(t, one, two)
		require.Equal(t, 1, res.Closed)
		require.Equal(t, 1, res.Defaulted)
		require.Equal(t, 1, res.Removals)
		storetest.UntilAdmittedBeforeNow(t, st, domain.RevocationID("rr-late"))
		require.Len(t, w.roundsUntilIdle(), 1)
		w.until(domain.RevocationID("rr-late"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Equal(t, review.PassResult{}, passes(t, one, two), "nothing left to do")

		// The report.
		item = w.reviewItems(c.ID)
		require.Equal(t, domain.ReviewKeep, item[keep.Subject].Decision)
		require.Empty(t, item[keep.Subject].RevocationID)
		require.True(t, item[gone.Subject].RemovalInEffect)
		require.True(t, item[late.Subject].ByDefault)
		require.True(t, item[late.Subject].RemovalInEffect)
		h := item["hank"]
		require.Equal(t, domain.ReviewRevoke, h.Decision)
		require.Equal(t, "olga", h.DecidedBy)
		require.False(t, h.DecidedAt.IsZero())
		require.Equal(t, "nobody knows him", h.Comment)
		require.Equal(t, removal, h.RevocationID)
		require.True(t, h.RemovalInEffect, "hank's removal is in effect")

		// The access history: hank's repo period ended at the removal's
		// confirmation, and reading the merge commit changes nothing.
		require.Positive(t, w.read(r))
		var confirmed time.Time
		for _, s := range w.stepsOf(removal) {
			if s.ToBinding == domain.BindingRevoked {
				confirmed = s.CreatedAt
			}
		}
		var periods []store.AccessInterval
		hist, _, err := st.AccessHistory(ctx, tBatched, added.Add(-time.Second), time.Now().Add(time.Minute), store.MaxAccessHistory)
		require.NoError(t, err)
		for _, a := range hist {
			if a.Subject == "hank" {
				periods = append(periods, a)
			}
		}
		require.Len(t, periods, 1)
		require.Equal(t, store.AccessSourceRepo, periods[0].Source)
		require.True(t, periods[0].From.Equal(added))
		require.WithinDuration(t, confirmed, periods[0].Until, time.Millisecond, "ended at the confirmation")

		_, ok := w.entryOf(tBatched, keep.Subject)
		require.True(t, ok, "the kept entry stays")
		for _, s := range []string{gone.Subject, late.Subject, "hank"} {
			_, ok := w.entryOf(tBatched, s)
			require.False(t, ok, "%s's entry is gone from main", s)
		}
		require.Empty(t, w.discrepancies(tBatched), "nothing flagged")
		w.filesExact("rr-keep", "rr-gone", "rr-late")
	})
}

// reviewItems reads campaign id's items by subject.
func (w *revokeWorld) reviewItems(id int64) map[string]store.ReviewItem {
	w.t.Helper()
	items, err := w.st.ReviewItems(w.t.Context(), id)
	require.NoError(w.t, err)
	out := map[string]store.ReviewItem{}
	for _, it := range items {
		out[it.Subject] = it
	}
	return out
}

// stepsOf is id's step history.
func (w *revokeWorld) stepsOf(id string) []store.OperationStep {
	w.t.Helper()
	steps, err := w.st.OperationStepList(w.t.Context(), id)
	require.NoError(w.t, err)
	return steps
}

// TestAccessReviewRemovesARepositoryEntryOnItsOwnMR: on a target without
// batching, the removal of a hand entry (blank operationId) a review
// revoked takes the single-request path at once (the pass wakes the
// engine): its own MR, whose description names the entry and the
// campaign, merged and confirmed; the entry leaves main.
func TestAccessReviewRemovesARepositoryEntryOnItsOwnMR(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		w := newRevokeWorld(t, st)
		w.granted("rs-keep", "amy", tSingle)
		r := w.repoReader()
		w.read(r)
		ivy := bindingfile.Entry{Subject: "ivy", ExpiresAt: time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)}
		w.handCommit(tSingle, func(f bindingfile.File) bindingfile.File { return f.With(ivy) })
		require.Equal(t, 1, w.read(r))
		c, err := st.ReviewOpen(ctx, store.ReviewOpenParams{TargetKey: tSingle, DueAt: time.Now().Add(time.Hour),
			Default: domain.ReviewKeep, OpenedBy: "ops-olga"})
		require.NoError(t, err)
		item := w.reviewItems(c.ID)
		require.Len(t, item, 2)
		_, err = st.ReviewDecide(ctx, store.ReviewDecideParams{CampaignID: c.ID, ItemID: item["ivy"].ID, Decision: domain.ReviewRevoke, By: "olga"})
		require.NoError(t, err)
		rv := &review.Reviews{Store: st, Revoker: wakingRevoker{Revoker: revoker(w.deps), wake: w.eng.Wake}, Config: w.cfg.Load, Wake: w.eng.Wake}
		res, err := rv.PassOnce(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, res.Removals)
		removal := domain.RepoRemovalID(item["ivy"].ID)
		w.until(removal, "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		mrs := w.mrsOf(removal)
		require.Len(t, mrs, 1)
		desc, _ := mrs[0]["description"].(string)
		require.Contains(t, desc, "an entry changeflow did not write")
		require.Contains(t, desc, "access review "+strconv.FormatInt(c.ID, 10)+" of "+tSingle+": revoked by olga")
		_, ok := w.entryOf(tSingle, "ivy")
		require.False(t, ok, "ivy's entry is gone from main")
		require.True(t, w.reviewItems(c.ID)["ivy"].RemovalInEffect)
		w.filesExact("rs-keep")
	})
}
