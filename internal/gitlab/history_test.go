package gitlab_test

import (
	"net/http"
	"testing"
	"time"

	"changeflow/internal/gitlab"
)

// TestContractFileHistory: ListFileCommits through the adapter against
// the simulator — a file's commits on main, newest first, with their
// committed dates and parents; the commits of other files left out;
// since as "on or after"; the file at each commit through GetFile.
func TestContractFileHistory(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	var h gitlab.History = e.gl
	onMain := func(action, path, content string) {
		t.Helper()
		status, body := e.as("local-maintainer-token", "POST", "/projects/1/repository/commits", map[string]any{
			"branch": "main", "commit_message": action + " " + path,
			"actions": []map[string]any{{"action": action, "file_path": path, "content": content}},
		})
		if status != http.StatusCreated {
			t.Fatalf("commit on main: %d %s", status, body)
		}
	}
	onMain("create", "bindings/h.yaml", binding("alice"))
	onMain("create", "bindings/other.yaml", binding("bob"))
	onMain("update", "bindings/h.yaml", binding("carol"))

	got, next, err := h.ListFileCommits(c, project, "main", "bindings/h.yaml", time.Time{}, 1)
	if err != nil || next != 0 || len(got) != 2 {
		t.Fatalf("ListFileCommits: %+v next %d %v", got, next, err)
	}
	if got[0].Title != "update bindings/h.yaml" || got[1].Title != "create bindings/h.yaml" ||
		len(got[0].ParentIDs) != 1 || got[0].CommittedDate.IsZero() || got[0].CommittedDate.Before(got[1].CommittedDate) {
		t.Fatalf("history: %+v", got)
	}
	f, err := h.GetFile(c, project, "bindings/h.yaml", got[1].ID)
	if err != nil || string(f.Content) != binding("alice") {
		t.Fatalf("file at the first commit: %q %v", f.Content, err)
	}
	later, _, err := h.ListFileCommits(c, project, "main", "bindings/h.yaml", got[0].CommittedDate.Add(time.Second), 1)
	if err != nil || len(later) != 0 {
		t.Fatalf("since after the newest: %+v %v", later, err)
	}
	same, _, err := h.ListFileCommits(c, project, "main", "bindings/h.yaml", got[0].CommittedDate, 1)
	if err != nil || len(same) == 0 || same[0].ID != got[0].ID {
		t.Fatalf("since the newest's own second: %+v %v", same, err)
	}
}
