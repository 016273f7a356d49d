package config

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadersNeverSeeAHalfAppliedReload runs many goroutines through the
// accessors while the file flips between two versions and reloads run
// back to back. Under -race it checks the swap is data-race free; the
// assertions check every snapshot is internally consistent: a value and
// the target title written in the same file always agree.
func TestReadersNeverSeeAHalfAppliedReload(t *testing.T) {
	t.Parallel()
	doc := func(n int) string {
		return fmt.Sprintf(`
batch: {maxRequests: %d}
ratelimit: {apply: {limit: %d}}
targets:
  db: {title: "v%d", accessMode: TEST_WINDOW, window: {start: "09:00", end: "17:00"}}
authz: {routes: {r: {rules: [code%d]}}}
`, n, n, n, n)
	}
	p := writeFile(t, t.TempDir(), "changeflow.yaml", doc(1))
	m := mustLoad(t, testOptions(p))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, m.Watch(ctx)) // the watcher reloads concurrently with the explicit reloads below

	var stop atomic.Bool
	var reads atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				s := m.Current()
				n := s.Batch().MaxRequests
				limit, _, _ := s.RateLimit("apply")
				tg, _ := s.Target("db")
				rules, _ := s.RouteRules("r")
				_, _ = tg.Open(time.Now())
				_ = s.Effective()
				if limit != n || tg.Title != fmt.Sprintf("v%d", n) || len(rules) != 1 || rules[0] != fmt.Sprintf("code%d", n) {
					errs <- fmt.Errorf("inconsistent snapshot v%d: maxRequests=%d limit=%d title=%s rules=%v", s.Version(), n, limit, tg.Title, rules)
					return
				}
				reads.Add(1)
				// Let the reloading goroutine in between reads: sixteen
				// readers that never yield keep it waiting a full time
				// slice each whenever it comes back from a file write
				// or read, and the test spent seconds spinning on the
				// same snapshot instead of reading across reloads.
				runtime.Gosched()
			}
		}()
	}
	for i := range 60 {
		writeFile(t, filepath.Dir(p), filepath.Base(p), doc(1+i%2*1+i%3))
		require.NoError(t, m.Reload(context.Background()))
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d reads across %d versions", reads.Load(), m.Current().Version())
	require.Greater(t, reads.Load(), int64(100))
	require.Greater(t, m.Current().Version(), uint64(10))
}
