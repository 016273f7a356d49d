package gitlab

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"
)

// TestConcurrentWriters drives many clients at once: each creates a branch
// with a commit, opens an MR, gets it approved and merges it, retrying 405
// while the other merges keep moving main. Every file must end up on main,
// once, with one merge commit per MR.
func TestConcurrentWriters(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MergeabilityDelay = 20 * time.Millisecond })
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- e.mergeOne(fmt.Sprintf("conc-%d", i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		f := fmt.Sprintf("bindings/conc-%d.yaml", i)
		r := e.call("GET", tokBot, "/projects/1/repository/files/"+url.PathEscape(f)+"/raw?ref=main", nil)
		if r.Status != 200 {
			t.Fatalf("%s missing on main: %d", f, r.Status)
		}
	}
	p, _ := e.sim.project("1")
	out, err := p.repo.git(context.Background(), nil, nil, "rev-list", "--merges", "--count", "main")
	if err != nil || out != fmt.Sprintf("%d\n", n) {
		t.Fatalf("merge commits on main: %q %v", out, err)
	}
}

func (e *env) mergeOne(branch string) error {
	c := e.call("POST", tokBot, "/projects/1/repository/commits", map[string]any{
		"branch": branch, "start_branch": "main", "commit_message": branch,
		"actions": []any{map[string]any{"action": "create", "file_path": "bindings/" + branch + ".yaml", "content": binding(branch)}},
	})
	if c.Status != 201 {
		return fmt.Errorf("%s commit: %d %s", branch, c.Status, c.Raw)
	}
	m := e.call("POST", tokBot, "/projects/1/merge_requests", map[string]any{"source_branch": branch, "target_branch": "main", "title": branch})
	if m.Status != 201 {
		return fmt.Errorf("%s mr: %d %s", branch, m.Status, m.Raw)
	}
	iid := int64(m.obj()["iid"].(float64))
	for _, tok := range []string{tokA1, tokA2} {
		if r := e.call("POST", tok, e.mrPath(iid)+"/approve", nil); r.Status != 201 {
			return fmt.Errorf("%s approve: %d %s", branch, r.Status, r.Raw)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		r := e.call("PUT", tokA1, e.mrPath(iid)+"/merge", map[string]any{"sha": c.str("id")})
		switch r.Status {
		case 200:
			return nil
		case 405:
			<-tick.C
		default:
			return fmt.Errorf("%s merge: %d %s", branch, r.Status, r.Raw)
		}
	}
	return fmt.Errorf("%s: never mergeable", branch)
}

// TestConcurrentCommitsToOneBranch: commits racing on one branch are
// serialised; none is lost.
func TestConcurrentCommitsToOneBranch(t *testing.T) {
	e := newEnv(t)
	e.must(201, "POST", tokBot, "/projects/1/repository/branches", map[string]any{"branch": "shared", "ref": "main"})
	const n = 12
	var wg sync.WaitGroup
	status := make(chan int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.call("POST", tokBot, "/projects/1/repository/commits", map[string]any{
				"branch": "shared", "commit_message": fmt.Sprint(i),
				"actions": []any{map[string]any{"action": "create", "file_path": fmt.Sprintf("f/%d", i), "content": "x"}},
			})
			status <- r.Status
		}()
	}
	wg.Wait()
	close(status)
	for s := range status {
		if s != 201 {
			t.Fatalf("commit status %d", s)
		}
	}
	p, _ := e.sim.project("1")
	tree, err := p.repo.listTree(context.Background(), "shared")
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, ok := tree[fmt.Sprintf("f/%d", i)]; !ok {
			t.Fatalf("f/%d lost", i)
		}
	}
}

// TestUpdateRefIsCompareAndSwap: the safety net under the mutex.
func TestUpdateRefIsCompareAndSwap(t *testing.T) {
	e := newEnv(t)
	p, _ := e.sim.project("1")
	ctx := context.Background()
	main, _ := p.repo.branchHead(ctx, "main")
	m := e.sim.world().byToken[tokMaint]
	now := time.Now()
	a, err := p.repo.writeCommit(ctx, main, []fileChange{{Path: "a", Content: []byte("a")}}, "a", m.sig(now), m.sig(now))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.repo.writeCommit(ctx, main, []fileChange{{Path: "b", Content: []byte("b")}}, "b", m.sig(now), m.sig(now))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.repo.updateRef(ctx, "main", a, main); err != nil {
		t.Fatalf("first CAS: %v", err)
	}
	if err := p.repo.updateRef(ctx, "main", b, main); !errors.Is(err, errRefMoved) {
		t.Fatalf("stale CAS: %v, want errRefMoved", err)
	}
	if err := p.repo.updateRef(ctx, "main", b, ""); !errors.Is(err, errRefMoved) {
		t.Fatalf("create over an existing ref: %v", err)
	}
	if head, _ := p.repo.branchHead(ctx, "main"); head != a {
		t.Fatalf("main %s, want %s", head, a)
	}
}
