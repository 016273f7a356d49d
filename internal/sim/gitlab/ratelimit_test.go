package gitlab

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable simulator clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestAPIRateLimit(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	e := newEnv(t, func(o *Options) { o.Now = clk.now })
	iid := e.openMR("rate-page", map[string]string{"bindings/p.yaml": binding("p")})
	clk.add(time.Minute) // the MR's calls are in a window of their own
	e.must(200, "PUT", "", "/_control/settings", map[string]any{"api_rate_per_minute": 3})
	for range 3 {
		e.must(200, "GET", tokBot, "/user", nil)
	}
	clk.add(20 * time.Second)
	r := e.must(429, "GET", tokBot, "/user", nil)
	t.Run("429 carries Retry-After and gitlab.com's RateLimit headers", func(t *testing.T) {
		want := map[string]string{"Retry-After": "40", "RateLimit-Limit": "3", "RateLimit-Observed": "4",
			"RateLimit-Remaining": "0", "RateLimit-Reset": strconv.FormatInt(clk.now().Add(40*time.Second).Unix(), 10)}
		for k, v := range want {
			if got := r.Header.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
		if r.str("message") != "Retry later" {
			t.Errorf("body: %s", r.Raw)
		}
	})
	t.Run("per user: another token still passes", func(t *testing.T) {
		e.must(200, "GET", tokA1, "/user", nil)
	})
	t.Run("control API and MR pages are not limited", func(t *testing.T) {
		e.must(200, "GET", "", "/_control/settings", nil)
		e.must(200, "GET", "", "/_control/state", nil)
		for range 5 {
			req, _ := http.NewRequest("GET", e.base+"/config/bindings/-/merge_requests/"+itoa(iid), nil)
			req.Header.Set("PRIVATE-TOKEN", tokBot)
			if r := do(t, req); r.Status != 200 {
				t.Fatalf("MR page over the API rate: %d", r.Status)
			}
		}
	})
	t.Run("the next window passes again", func(t *testing.T) {
		clk.add(40 * time.Second)
		e.must(200, "GET", tokBot, "/user", nil)
	})
	t.Run("0 turns it off", func(t *testing.T) {
		e.must(200, "PUT", "", "/_control/settings", map[string]any{"api_rate_per_minute": 0})
		for range 10 {
			e.must(200, "GET", tokBot, "/user", nil)
		}
	})
}

func TestPipelineRateLimit(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	e := newEnv(t, func(o *Options) { o.Now = clk.now })
	e.must(200, "PUT", "", "/_control/settings", map[string]any{"pipeline_rate_per_minute": 2})
	a := e.openMR("rate-a", map[string]string{"bindings/a.yaml": binding("a")})
	b := e.openMR("rate-b", map[string]string{"bindings/b.yaml": binding("b")})
	e.waitPipeline(a, "success")
	e.waitPipeline(b, "success")
	c := e.openMR("rate-c", map[string]string{"bindings/c.yaml": binding("c")})
	t.Run("over the rate the MR opens without a pipeline", func(t *testing.T) {
		if hp := e.mr(c)["head_pipeline"]; hp != nil {
			t.Fatalf("head pipeline over the rate: %v", hp)
		}
		if l := e.must(200, "GET", tokBot, e.mrPath(c)+"/pipelines", nil).list(); len(l) != 0 {
			t.Fatalf("pipelines: %v", l)
		}
		if e.mr(c)["detailed_merge_status"] == "mergeable" {
			t.Fatal("an MR without a pipeline is mergeable")
		}
	})
	t.Run("a push over the rate lands without a pipeline", func(t *testing.T) {
		e.must(201, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
			"branch": "rate-a", "commit_message": "more", "actions": []any{map[string]any{"action": "create", "file_path": "bindings/a2.yaml", "content": binding("a2")}},
		})
		if hp := e.mr(a)["head_pipeline"]; hp != nil {
			t.Fatalf("head pipeline of the new head over the rate: %v", hp)
		}
	})
	t.Run("creating one over the rate is 429 with Retry-After", func(t *testing.T) {
		r := e.must(429, "POST", tokBot, e.mrPath(c)+"/pipelines", nil)
		if r.Header.Get("Retry-After") != "60" {
			t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
		}
	})
	t.Run("after the window the MR pipeline is created", func(t *testing.T) {
		clk.add(time.Minute)
		r := e.must(201, "POST", tokBot, e.mrPath(c)+"/pipelines", nil)
		if r.obj()["sha"] != e.mr(c)["sha"] {
			t.Fatalf("pipeline %s, MR head %v", r.Raw, e.mr(c)["sha"])
		}
		e.waitPipeline(c, "success")
	})
	t.Run("a push in the new window gets its pipeline", func(t *testing.T) {
		e.must(201, "POST", tokBot, "/projects/1/repository/commits", map[string]any{
			"branch": "rate-b", "commit_message": "more", "actions": []any{map[string]any{"action": "create", "file_path": "bindings/b2.yaml", "content": binding("b2")}},
		})
		e.waitPipeline(b, "success")
		if hp := e.headPipeline(b); hp["sha"] != e.mr(b)["sha"] {
			t.Fatalf("head pipeline %v for head %v", hp, e.mr(b)["sha"])
		}
	})
	t.Run("settings show the limits", func(t *testing.T) {
		st := e.must(200, "GET", "", "/_control/settings", nil).obj()
		if st["pipeline_rate_per_minute"] != float64(2) || st["api_rate_per_minute"] != float64(0) || st["rate_window"] == nil {
			t.Fatalf("settings: %v", st)
		}
	})
}
