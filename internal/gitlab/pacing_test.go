package gitlab_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"changeflow/internal/gitlab"
)

// limitedClient is a second adapter on e's simulator that records what
// OnRateLimited is told, with a breaker that one counted failure opens:
// a 429 that counted against it would fail the next call at once.
func limitedClient(e *env, f func(*gitlab.Settings)) (*gitlab.Client, func() map[string]int) {
	var mu sync.Mutex
	seen := map[string]int{}
	s := *e.settings.Load()
	s.BreakerFailures = 1
	if f != nil {
		f(&s)
	}
	c := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return s },
		OnRateLimited: func(kind string) { mu.Lock(); seen[kind]++; mu.Unlock() }})
	return c, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

// A 429 is a wait: the call is sent again after Retry-After and succeeds,
// and the breaker never counts it.
func TestRateLimitedCallWaitsRetryAfter(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	mr := e.openMR("req-429")
	cl, seen := limitedClient(e, nil)
	e.resetCalls()
	e.fault(map[string]any{"method": "GET", "path": "/projects/*/merge_requests/*", "kind": "status", "status": 429, "count": 2})
	start := time.Now()
	got, err := cl.GetMR(c, project, mr.IID)
	if err != nil || got.IID != mr.IID {
		t.Fatalf("GetMR after two 429s: %v %+v", err, got)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("two Retry-After: 1 waited only %s", d)
	}
	if n := e.count("GET", "/projects/*/merge_requests/*"); n != 3 {
		t.Fatalf("%d calls, want 3 (two 429s, one answer)", n)
	}
	if seen()[gitlab.LimitedByGitLab] != 2 {
		t.Fatalf("OnRateLimited: %v", seen())
	}
	// BreakerFailures is 1: had a 429 counted, this call would be refused.
	if _, err := cl.GetMR(c, project, mr.IID); err != nil {
		t.Fatalf("after the 429s: %v", err)
	}
}

// The simulator's own API rate (a short window): a burst of calls over it
// all succeed, each 429 waited out, none a failure.
func TestSimAPIRateIsWaitedOut(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	e.control("PUT", "/settings", map[string]any{"api_rate_per_minute": 3, "rate_window": "1s"})
	cl, seen := limitedClient(e, nil)
	for i := range 8 {
		if _, err := cl.GetBranch(c, project, "main"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if seen()[gitlab.LimitedByGitLab] == 0 {
		t.Fatal("8 calls at 3 per second never met a 429: the limit was not exercised")
	}
}

// A 429 whose Retry-After does not fit before the deadline comes back
// at once, with the wait it asks for, for the workflow to reschedule.
func TestRateLimitedPastDeadlineReturns429(t *testing.T) {
	e := newEnv(t)
	cl, _ := limitedClient(e, nil)
	e.resetCalls()
	e.fault(map[string]any{"method": "GET", "path": "/projects/*/repository/branches/*", "kind": "status", "status": 429})
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := cl.GetBranch(short, project, "main")
	if !gitlab.IsRateLimited(err) || gitlab.RetryAfterOf(err) != time.Second {
		t.Fatalf("want a 429 with RetryAfter 1s: %v (%s)", err, gitlab.RetryAfterOf(err))
	}
	if e.count("GET", "/projects/*/repository/branches/*") != 1 {
		t.Fatal("sent more than once")
	}
}

// gitlab.rateLimit.apiPerMinute spaces calls out; pipelinesPerMinute
// spaces the calls that start a pipeline per project, and a turn beyond
// the deadline is a 429 of our own that sends nothing.
func TestPacer(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	t.Run("api per minute", func(t *testing.T) {
		cl, _ := limitedClient(e, func(s *gitlab.Settings) { s.APIPerMinute = 600 })
		start := time.Now()
		for range 6 {
			if _, err := cl.GetBranch(c, project, "main"); err != nil {
				t.Fatal(err)
			}
		}
		// 10 per second, one token: the first is free, five more wait 0.1 s each.
		if d := time.Since(start); d < 450*time.Millisecond {
			t.Fatalf("6 calls at 600/min took %s", d)
		}
	})
	t.Run("pipelines per minute, past the deadline", func(t *testing.T) {
		cl, seen := limitedClient(e, func(s *gitlab.Settings) { s.PipelinesPerMinute = 1 })
		commit := func(ctx context.Context, branch string) error {
			_, err := cl.CreateCommit(ctx, project, gitlab.CommitRequest{Branch: branch, StartBranch: "main", Message: "m",
				Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/" + branch + ".yaml", Content: binding(branch)}}})
			return err
		}
		if err := commit(c, "req-pace-1"); err != nil {
			t.Fatal(err)
		}
		e.resetCalls()
		short, cancel := context.WithTimeout(c, time.Second)
		defer cancel()
		err := commit(short, "req-pace-2")
		if !gitlab.IsRateLimited(err) || gitlab.RetryAfterOf(err) < 50*time.Second {
			t.Fatalf("second pipeline start within the minute: %v (%s)", err, gitlab.RetryAfterOf(err))
		}
		if e.count("POST", "/projects/*/repository/commits") != 0 || seen()[gitlab.LimitedByPace] != 1 {
			t.Fatalf("a paced call reached GitLab, or was not counted: %v", seen())
		}
		// Reads are not pipeline starts: they pass.
		if _, err := cl.GetBranch(short, project, "main"); err != nil {
			t.Fatal(err)
		}
	})
}
