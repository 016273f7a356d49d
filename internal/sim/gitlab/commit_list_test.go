package gitlab

import (
	"net/url"
	"sync"
	"testing"
	"time"
)

// TestListCommitsFileHistory lists a file's history on main over real
// git: direct commits and a merge, newest first; first_parent lists the
// merge (its committed date the merge's) where git alone lists the branch's
// commit;
// path leaves out commits of other files; since is "on or after"; pages
// follow per_page; an unknown ref is an empty list; a bad since is 400.
func TestListCommitsFileHistory(t *testing.T) {
	// The clock runs (the simulator's delays need it) and each tick
	// moves it a minute ahead, so every commit has its own second.
	var mu sync.Mutex
	var offset time.Duration
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(offset).UTC() }
	tick := func() {
		mu.Lock()
		offset += time.Minute
		mu.Unlock()
	}
	e := newEnv(t, func(o *Options) { o.Now = now })
	onMain := func(action, path, content string) string {
		tick()
		return e.must(201, "POST", tokMaint, "/projects/1/repository/commits", map[string]any{
			"branch": "main", "commit_message": action + " " + path,
			"actions": []any{map[string]any{"action": action, "file_path": path, "content": content}},
		}).str("id")
	}
	c1 := onMain("create", "bindings/a.yaml", binding("alice"))
	onMain("create", "bindings/b.yaml", binding("bob"))
	c3 := onMain("update", "bindings/a.yaml", binding("alice")+binding("carol"))
	tick()
	e.branchWithFiles("work", map[string]string{"bindings/c.yaml": binding("dan")})
	tick()
	// The MR's branch changes a.yaml too: a second commit on it.
	e.must(201, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
		"branch": "work", "commit_message": "edit a",
		"actions": []any{map[string]any{"action": "update", "file_path": "bindings/a.yaml", "content": binding("erin")}},
	})
	iid := int64(e.must(201, "POST", tokBot, "/projects/1/merge_requests", map[string]any{
		"source_branch": "work", "target_branch": "main", "title": "Add work",
	}).obj()["iid"].(float64))
	e.waitStatus(iid, "not_approved")
	e.must(201, "POST", tokA1, e.mrPath(iid)+"/approve", nil)
	e.must(201, "POST", tokA2, e.mrPath(iid)+"/approve", nil)
	e.waitStatus(iid, "mergeable")
	branchHead := e.must(200, "GET", tokBot, "/projects/1/repository/branches/work", nil).obj()["commit"].(map[string]any)["id"].(string)
	tick()
	merge := e.must(200, "PUT", tokA1, e.mrPath(iid)+"/merge", map[string]any{"sha": branchHead}).str("merge_commit_sha")
	mergedAt := now()

	list := func(q url.Values) []map[string]any {
		return e.must(200, "GET", tokBot, "/projects/1/repository/commits?"+q.Encode(), nil).list()
	}
	ids := func(l []map[string]any) []string {
		var out []string
		for _, c := range l {
			out = append(out, c["id"].(string))
		}
		return out
	}
	q := url.Values{"ref_name": {"main"}, "path": {"bindings/a.yaml"}, "first_parent": {"true"}}
	got := list(q)
	if want := []string{merge, c3, c1}; !equalStrings(ids(got), want) {
		t.Fatalf("first-parent history of a.yaml: %v, want %v", ids(got), want)
	}
	if at, _ := time.Parse(time.RFC3339, got[0]["committed_date"].(string)); mergedAt.Sub(at) > 5*time.Second || at.After(mergedAt) || len(got[0]["parent_ids"].([]any)) != 2 {
		t.Fatalf("merge listed with %v and parents %v, want %v and two", got[0]["committed_date"], got[0]["parent_ids"], mergedAt)
	}
	full := list(url.Values{"ref_name": {"main"}, "path": {"bindings/a.yaml"}})
	// git's default history simplification: the merge is TREESAME to
	// the branch's side, so the branch's commit stands for it.
	if s := ids(full); !equalStrings(s, []string{branchHead, c3, c1}) {
		t.Fatalf("without first_parent: %v, want the branch's commit instead of the merge", s)
	}
	c3At, _ := time.Parse(time.RFC3339, got[1]["committed_date"].(string))
	q.Set("since", c3At.Format(time.RFC3339))
	if s := ids(list(q)); !equalStrings(s, []string{merge, c3}) {
		t.Fatalf("since %v: %v, want the merge and c3", c3At, s)
	}
	q.Del("since")
	q.Set("per_page", "2")
	r := e.must(200, "GET", tokBot, "/projects/1/repository/commits?"+q.Encode(), nil)
	q.Set("page", "2")
	r2 := e.must(200, "GET", tokBot, "/projects/1/repository/commits?"+q.Encode(), nil)
	if r.Header.Get("X-Next-Page") != "2" || r2.Header.Get("X-Next-Page") != "" ||
		!equalStrings(append(ids(r.list()), ids(r2.list())...), []string{merge, c3, c1}) {
		t.Fatalf("pages: %v (next %q) then %v (next %q)", ids(r.list()), r.Header.Get("X-Next-Page"), ids(r2.list()), r2.Header.Get("X-Next-Page"))
	}
	if l := list(url.Values{"ref_name": {"nowhere"}}); len(l) != 0 {
		t.Fatalf("unknown ref: %v, want []", ids(l))
	}
	if r := e.must(400, "GET", tokBot, "/projects/1/repository/commits?since=yesterday", nil); r.obj()["error"] != "since is invalid" {
		t.Fatalf("bad since: %s", r.Raw)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
