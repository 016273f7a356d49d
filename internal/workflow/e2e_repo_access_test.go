package workflow_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/filecheck"
	"changeflow/internal/gitlab"
	"changeflow/internal/repoaccess"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// repoReader is the periodic reader of the binding files' history over
// w's simulated GitLab, as serve builds it (cmd/changeflow).
func (w *revokeWorld) repoReader() *repoaccess.Reader {
	gl := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return gitlab.SettingsFromConfig(w.cfg.Load()) }})
	return repoaccess.New(repoaccess.Options{Store: w.st, History: gl, Settings: func() repoaccess.Settings {
		s := repoaccess.Settings{Interval: time.Minute, Project: "1", Ref: "main"}
		for _, t := range w.cfg.Load().Targets() {
			s.Targets = append(s.Targets, repoaccess.Target{Key: t.Key, File: t.File})
		}
		return s
	}})
}

// checker is the discrepancy check over w's simulated GitLab, as the
// API's GET /ops/access uses it.
func (w *revokeWorld) checker() repoaccess.Checker {
	gl := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return gitlab.SettingsFromConfig(w.cfg.Load()) }})
	return repoaccess.Checker{Store: w.st, History: gl, Settings: func() repoaccess.Settings {
		s := repoaccess.Settings{Project: "1", Ref: "main"}
		for _, t := range w.cfg.Load().Targets() {
			s.Targets = append(s.Targets, repoaccess.Target{Key: t.Key, File: t.File})
		}
		return s
	}}
}

// discrepancies is what the check reports for target now.
func (w *revokeWorld) discrepancies(target string) []domain.AccessDiscrepancy {
	w.t.Helper()
	d, err := w.checker().Discrepancies(w.t.Context(), target)
	require.NoError(w.t, err)
	return d
}

// subjectDiscrepancies is what the check reports for subject now,
// across its targets; every file must have been compared.
func (w *revokeWorld) subjectDiscrepancies(subject string) []domain.TargetDiscrepancy {
	w.t.Helper()
	d, unreadable, err := w.checker().SubjectDiscrepancies(w.t.Context(), subject)
	require.NoError(w.t, err)
	require.Empty(w.t, unreadable, "every file compared")
	return d
}

// handCommit writes target's file on main as a maintainer, with edit
// applied to what is there, and returns the commit and its committed
// date (GitLab's second).
func (w *revokeWorld) handCommit(target string, edit func(bindingfile.File) bindingfile.File) (string, time.Time) {
	w.t.Helper()
	f, err := bindingfile.Parse([]byte(w.fileOnMain(target)))
	require.NoError(w.t, err)
	var c struct {
		ID            string    `json:"id"`
		CommittedDate time.Time `json:"committed_date"`
	}
	code := w.simJSON(http.MethodPost, "/gitlab/api/v4/projects/1/repository/commits", map[string]any{
		"branch": "main", "commit_message": "hand edit",
		"actions": []map[string]any{{"action": "update", "file_path": "bindings/" + target + ".yaml", "content": string(edit(f).Marshal())}},
	}, &c)
	require.Equal(w.t, http.StatusCreated, code)
	return c.ID, c.CommittedDate
}

// read runs one pass of r and returns the commits it applied.
func (w *revokeWorld) read(r *repoaccess.Reader) int {
	w.t.Helper()
	n, err := r.ReadAll(w.t.Context())
	require.NoError(w.t, err)
	return n
}

// TestAccessHistoryFromTheRepository: amy's grant goes through
// changeflow; then a maintainer adds mallory's entry by hand on main and
// later removes it, and adds nina's, which stays. The reader gives the
// hand entries periods of their own (source repo) from the commit that
// added each to the one that removed it, and none to amy's, which
// changeflow's records cover: one second before and after each hand
// commit, "at" answers exactly who had access. A second pass over the
// same commits applies nothing. Amy then gives her access back, and a
// maintainer puts her entry back by hand: the check reports the entry on
// main whose access changeflow's records say ended. At the end the files on main are what
// the database says, with the hand entries as the only foreign ones, and
// changeflow's own periods still match its bindings exactly.
func TestAccessHistoryFromTheRepository(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newRevokeWorld(t, st)
		ctx := t.Context()
		r := w.repoReader()

		w.granted("rh-g1", "amy", tSingle)
		g1 := w.period("rh-g1")
		require.Positive(t, w.read(r), "the first pass reads the history so far")
		require.Equal(t, 0, w.read(r), "nothing new")
		require.Equal(t, []string{"rh-g1"}, w.accessAt(tSingle, g1.From.Add(time.Second)), "amy's entry is changeflow's: no repo period")

		w.pastByTwoSeconds(g1.From)
		expires := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
		mallory := bindingfile.Entry{Subject: "mallory", ExpiresAt: expires, OperationID: "hand-mallory"}
		addSHA, added := w.handCommit(tSingle, func(f bindingfile.File) bindingfile.File { return f.With(mallory) })
		require.Equal(t, 1, w.read(r))
		require.Equal(t, 0, w.read(r), "each commit applied once")
		w.boundary("mallory added by hand", tSingle, added, []string{"rh-g1"}, []string{"rh-g1", "hand-mallory"})
		then, err := st.AccessAtTarget(ctx, tSingle, added)
		require.NoError(t, err)
		require.Equal(t, store.AccessSourceRepo, then[1].Source)
		require.Equal(t, addSHA, then[1].MergeSHA)

		w.pastByTwoSeconds(added)
		delSHA, removed := w.handCommit(tSingle, func(f bindingfile.File) bindingfile.File { return f.Without("mallory") })
		w.pastByTwoSeconds(removed)
		nina := bindingfile.Entry{Subject: "nina", ExpiresAt: expires, OperationID: ""}
		_, ninaAt := w.handCommit(tSingle, func(f bindingfile.File) bindingfile.File { return f.With(nina) })
		require.Equal(t, 2, w.read(r))
		w.boundary("mallory removed by hand", tSingle, removed, []string{"rh-g1", "hand-mallory"}, []string{"rh-g1"})
		hist, _, err := st.AccessHistory(ctx, tSingle, added.Add(-time.Second), removed.Add(time.Second), store.MaxAccessHistory)
		require.NoError(t, err)
		var repo []store.AccessInterval
		for _, a := range hist {
			if a.Source == store.AccessSourceRepo {
				repo = append(repo, a)
			}
		}
		require.Len(t, repo, 1)
		require.Equal(t, "mallory", repo[0].Subject)
		require.True(t, repo[0].From.Equal(added) && repo[0].Until.Equal(removed), "mallory's period %s–%s, commits at %s and %s", repo[0].From, repo[0].Until, added, removed)
		require.Equal(t, delSHA, repo[0].EndSHA)
		ninaNow, err := st.AccessAtTarget(ctx, tSingle, ninaAt)
		require.NoError(t, err)
		require.Len(t, ninaNow, 2)
		require.Equal(t, "nina", ninaNow[1].Subject)
		require.Empty(t, ninaNow[1].OperationID, "nina's entry names no operation")

		require.Empty(t, w.discrepancies(tSingle), "hand entries have periods of their own: no discrepancy")

		// Amy gives her access back through changeflow; then a maintainer
		// puts her entry back by hand, operationId and all (a revert).
		// The entry is changeflow's, so the reader opens no repo period
		// for it — and the check says the records and main disagree.
		w.pastByTwoSeconds(ninaAt)
		amy, ok := bindingfile.File{}, false
		if f, err := bindingfile.Parse([]byte(w.fileOnMain(tSingle))); err == nil {
			var e bindingfile.Entry
			e, ok = f.Entry("amy")
			amy = amy.With(e)
		}
		require.True(t, ok, "amy's entry on main before the give-back")
		res, err := revoker(w.deps).Revoke(ctx, "rh-g1", domain.RevokeGivenBack, "given back by its owner", "amy")
		require.NoError(t, err)
		require.True(t, res.Created)
		w.eng.Wake()
		w.until(domain.RevocationID("rh-g1"), "removed", at(domain.StepRevokeCalledBack, domain.BindingRevoked))
		require.Empty(t, w.discrepancies(tSingle), "removed through changeflow: records and main agree")
		w.pastByTwoSeconds(w.period("rh-g1").Until)
		back, _ := amy.Entry("amy")
		_, revertedAt := w.handCommit(tSingle, func(f bindingfile.File) bindingfile.File { return f.With(back) })
		require.Positive(t, w.read(r))
		require.Equal(t, []string{"nina"}, w.subjectsAt(tSingle, revertedAt.Add(time.Second)),
			"the re-added entry is changeflow's: no repo period, changeflow's records say it ended")
		require.Equal(t, []domain.AccessDiscrepancy{{Subject: "amy", OperationID: "rh-g1", Kind: domain.DiscrepancyOnMainNotInEffect}},
			w.discrepancies(tSingle))
		require.Equal(t, []domain.TargetDiscrepancy{{TargetKey: tSingle,
			AccessDiscrepancy: domain.AccessDiscrepancy{Subject: "amy", OperationID: "rh-g1", Kind: domain.DiscrepancyOnMainNotInEffect}}},
			w.subjectDiscrepancies("amy"), "by subject: amy's, on the target she had a binding on")
		require.Empty(t, w.subjectDiscrepancies("nina"), "a hand entry is not compared, by subject either")

		// The end check: the file holds exactly what the database wants
		// plus the foreign entries — nina's, and amy's put back by hand
		// (the discrepancy) — and changeflow's own periods match its
		// bindings exactly.
		require.NoError(t, filecheck.Check(ctx, st, tSingle, []byte(w.fileOnMain(tSingle)),
			[]string{"rh-g1", domain.RevocationID("rh-g1")}, nina, back))
		w.accessMatchesBindings()
		require.Equal(t, domain.BindingRevoked, w.bindingOf(domain.RevocationID("rh-g1")))
	})
}

// subjectsAt is who had access to target at t, by subject.
func (w *revokeWorld) subjectsAt(target string, t time.Time) []string {
	w.t.Helper()
	items, err := w.st.AccessAtTarget(w.t.Context(), target, t)
	require.NoError(w.t, err)
	out := []string{}
	for _, a := range items {
		out = append(out, a.Subject)
	}
	return out
}

// bindingOf is id's binding status.
func (w *revokeWorld) bindingOf(id string) domain.BindingStatus {
	w.t.Helper()
	b, err := w.st.BindingGetByOperation(w.t.Context(), id)
	require.NoError(w.t, err)
	return b.Status
}
