package repoaccess_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/bindingfile"
	"changeflow/internal/gitlab"
	"changeflow/internal/repoaccess"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// fakeHistory is a file's first-parent history, oldest first, served as
// GitLab does: newest first, since "on or after", perPage a page.
type fakeHistory struct {
	commits []gitlab.Commit
	files   map[string]string // sha → content ("" with ok false: absent)
	perPage int
	lists   int
}

func (h *fakeHistory) ListFileCommits(_ context.Context, _, _, _ string, since time.Time, page int) ([]gitlab.Commit, int, error) {
	h.lists++
	var all []gitlab.Commit
	for i := len(h.commits) - 1; i >= 0; i-- {
		if since.IsZero() || !h.commits[i].CommittedDate.Before(since) {
			all = append(all, h.commits[i])
		}
	}
	start := (page - 1) * h.perPage
	if start >= len(all) {
		return nil, 0, nil
	}
	end := min(start+h.perPage, len(all))
	next := 0
	if end < len(all) {
		next = page + 1
	}
	return all[start:end], next, nil
}

func (h *fakeHistory) GetFile(_ context.Context, _, path, ref string) (gitlab.File, error) {
	c, ok := h.files[ref]
	if !ok {
		return gitlab.File{}, &gitlab.Error{Op: "GetFile", Status: http.StatusNotFound}
	}
	return gitlab.File{Path: path, Content: []byte(c)}, nil
}

// commit appends a commit whose file holds subjects (hand entries), or
// content as given when raw is set.
func (h *fakeHistory) commit(at time.Time, raw string, subjects ...string) string {
	sha := fmt.Sprintf("c%02d", len(h.commits)+1)
	var parents []string
	if n := len(h.commits); n > 0 {
		parents = []string{h.commits[n-1].ID}
	}
	h.commits = append(h.commits, gitlab.Commit{ID: sha, ParentIDs: parents, CommittedDate: at})
	content := raw
	if raw == "" {
		var f bindingfile.File
		for _, s := range subjects {
			f = f.With(bindingfile.Entry{Subject: s, ExpiresAt: at.Add(24 * time.Hour), OperationID: "hand-" + s})
		}
		content = string(f.Marshal())
	}
	h.files[sha] = content
	return sha
}

func reader(st *store.Store, h *fakeHistory, maxPages, maxCommits int) *repoaccess.Reader {
	return repoaccess.New(repoaccess.Options{Store: st, History: h, MaxPages: maxPages, MaxCommits: maxCommits,
		Settings: func() repoaccess.Settings {
			return repoaccess.Settings{Interval: time.Minute, Project: "1", Ref: "main",
				Targets: []repoaccess.Target{{Key: "t", File: "bindings/t.yaml"}}}
		}})
}

// TestReaderBoundedPasses: a first read of a history longer than a pass
// takes is spread over passes of at most MaxCommits each, paged through
// every page since the cursor, and gives the same periods as one pass
// would: x from c01 to c04, y from c02 to c05 — the broken version at
// c03 standing for the one before it, so nothing changes there.
func TestReaderBoundedPasses(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		t0 := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
		h := &fakeHistory{files: map[string]string{}, perPage: 2}
		h.commit(t0, "", "x")
		h.commit(t0.Add(time.Minute), "", "x", "y")
		h.commit(t0.Add(2*time.Minute), "- subject: [broken\n")
		h.commit(t0.Add(3*time.Minute), "", "y")
		h.commit(t0.Add(4*time.Minute), "[]\n")
		r := reader(st, h, 10, 2)
		var passes []int
		for range 4 {
			n, err := r.ReadAll(t.Context())
			require.NoError(t, err)
			passes = append(passes, n)
		}
		require.Equal(t, []int{2, 2, 1, 0}, passes)
		cur, err := st.AccessRepoCursor(t.Context(), "t", "bindings/t.yaml")
		require.NoError(t, err)
		require.Equal(t, "c05", cur.SHA)

		hist, _, err := st.AccessHistory(t.Context(), "t", t0.Add(-time.Hour), t0.Add(time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, hist, 2)
		require.Equal(t, []string{"x", "c01", "c04"}, []string{hist[0].Subject, hist[0].MergeSHA, hist[0].EndSHA})
		require.Equal(t, []string{"y", "c02", "c05"}, []string{hist[1].Subject, hist[1].MergeSHA, hist[1].EndSHA})
		require.True(t, hist[0].From.Equal(t0) && hist[0].Until.Equal(t0.Add(3*time.Minute)))
		require.Equal(t, "hand-x", hist[0].OperationID)
	})
}

// TestReaderRefusesACutList: more pages since the cursor than a pass may
// list is an error, and nothing is applied — a newest-first list cut
// short would miss the oldest commits, the ones to apply first.
func TestReaderRefusesACutList(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		t0 := time.Date(2026, 6, 2, 8, 0, 0, 0, time.UTC)
		h := &fakeHistory{files: map[string]string{}, perPage: 2}
		for i := range 5 {
			h.commit(t0.Add(time.Duration(i)*time.Minute), "", "x")
		}
		_, err := reader(st, h, 2, 100).ReadAll(t.Context())
		require.ErrorContains(t, err, "more than 2 pages")
		cur, err := st.AccessRepoCursor(t.Context(), "t", "bindings/t.yaml")
		require.NoError(t, err)
		require.Equal(t, store.RepoCursor{}, cur)
		n, err := reader(st, h, 3, 100).ReadAll(t.Context())
		require.NoError(t, err)
		require.Equal(t, 5, n, "with room for the pages, the whole history")
	})
}

// TestReaderRewrittenBranch: when the last commit read is no longer on
// the branch (history rewritten), the reader goes on from its time: the
// commits after it are applied, none before.
func TestReaderRewrittenBranch(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		t0 := time.Date(2026, 6, 3, 8, 0, 0, 0, time.UTC)
		h := &fakeHistory{files: map[string]string{}, perPage: 100}
		h.commit(t0, "", "x")
		r := reader(st, h, 10, 100)
		n, err := r.ReadAll(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		// Rewritten: c01 replaced by another commit of the same second.
		h.commits[0].ID = "rewritten"
		h.files["rewritten"] = h.files["c01"]
		h.commit(t0.Add(time.Minute), "", "x", "z")
		n, err = r.ReadAll(t.Context())
		require.NoError(t, err)
		require.Equal(t, 1, n, "only the commit after the cursor's time")
		at, err := st.AccessAtTarget(t.Context(), "t", t0.Add(2*time.Minute))
		require.NoError(t, err)
		require.Len(t, at, 2)
		require.Equal(t, "z", at[1].Subject)
	})
}
