package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// batchRaceDuration bounds the race test per database, so `make test` stays
// fast; long enough for thousands of claims, admissions and settlements.
const batchRaceDuration = 2500 * time.Millisecond

// TestBatchInvariantsUnderConcurrency runs 32 goroutines against one
// database for batchRaceDuration: claim rounds on three projects, admissions of
// fresh operationIds and of a small pool admitted over and over, guarded
// settlements (block, succeed, fail) of whatever is active, timeout sweeps
// racing them, and samplers checking I1 and "no member-less batch" at
// every moment they look. Afterwards checkBatchInvariants compares the
// database with every answer the workers got. Run it under -race.
func TestBatchInvariantsUnderConcurrency(t *testing.T) {
	t.Parallel()
	mix := batchWorkloadMix{Claimers: 8, FreshAdmitters: 6, DupAdmitters: 8, Settlers: 4, Sweepers: 2}
	const samplers = 4
	require.Equal(t, 32, mix.Claimers+mix.FreshAdmitters+mix.DupAdmitters+mix.Settlers+mix.Sweepers+samplers)

	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		tl := newBatchTally()
		stop := make(chan struct{})
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			samples int
		)
		for range samplers {
			wg.Go(func() {
				n := sampleBatchInvariants(ctx, s, stop, tl)
				mu.Lock()
				samples += n
				mu.Unlock()
			})
		}
		wg.Go(func() { runBatchWorkload(ctx, s, mix, "fresh", stop, tl) })
		// At least batchRaceDuration, and then until every kind of race the
		// assertions below need has happened at least once: on a loaded
		// machine 2.5 s gave only a handful of samples and sometimes no
		// raced settlement. A liveness bound of two minutes ends a run in
		// which they never happen (the assertions then say which).
		time.Sleep(batchRaceDuration)
		raced := func() bool {
			tl.mu.Lock()
			defer tl.mu.Unlock()
			return tl.Ops["claim/claimed"] > 0 && tl.Ops["admit/duplicate"] > 0 &&
				tl.Ops["settle/preempted"]+tl.Ops["sweep/settled"] > 0
		}
		for deadline := time.Now().Add(2 * time.Minute); !raced() && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
		close(stop)
		wg.Wait()

		t.Logf("%s: %d samples; %s", s.Dialect().Name(), samples, tl.summary())
		require.Positive(t, samples)
		require.Positive(t, tl.Ops["claim/claimed"], "the workload claimed nothing")
		require.Positive(t, tl.Ops["admit/duplicate"], "no duplicate admission was tried")
		require.Positive(t, tl.Ops["settle/preempted"]+tl.Ops["sweep/settled"], "no settlement raced")
		checkBatchInvariants(t, s, tl)
	})
}
