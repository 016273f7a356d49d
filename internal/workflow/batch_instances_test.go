package workflow_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/batch"
	"changeflow/internal/workflow/single"
	"changeflow/internal/workflow/withdraw"
)

// TestBatchThreeInstancesConverge: three instances (engine + round
// service each, own owner ids, one database) run rounds every 15 ms while
// requests are approved concurrently. Every request ends VALIDATED, each
// in exactly one SUCCEEDED batch, and no sample ever sees two active
// batches of the project.
func TestBatchThreeInstancesConverge(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBatchWorld(t, st)
		w.reload(map[string]any{"batch.interval": "15ms", "batch.maxRequests": 4})
		for i := range 3 {
			e, err := engine.New(engine.Options{Store: st, Owner: fmt.Sprintf("inst-%d", i), Workers: 4, QueueSize: 4,
				Lease: 30 * time.Second, PollInterval: 10 * time.Millisecond, MaxRetries: 20})
			require.NoError(t, err)
			single.Register(e, single.Steps{Env: w.deps.Env, Store: w.deps.Store})
			withdraw.Register(e, withdrawFlow(w.deps))
			batch.Register(e, batchFlow(w.deps))
			require.NoError(t, e.Start(t.Context()))
			t.Cleanup(e.Stop)
			r := batch.NewRounds(batchFlow(w.deps), e)
			r.Start(t.Context())
			t.Cleanup(r.Stop)
		}
		stop := make(chan struct{})
		var (
			wg          sync.WaitGroup
			maxActive   int
			sampleError error
		)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(3 * time.Millisecond):
				}
				var n int
				if err := st.DB().QueryRowContext(t.Context(),
					"SELECT COUNT(*) FROM merge_batch WHERE project_id = 1 AND status IN (1, 4)").Scan(&n); err != nil {
					sampleError = err
					return
				}
				maxActive = max(maxActive, n)
			}
		})

		ids := make([]string, 10)
		for i := range ids {
			ids[i] = fmt.Sprintf("op-m%d", i)
		}
		for i, id := range ids {
			w.submit(id, fmt.Sprintf("user-m%d", i), tBatched, true)
		}
		for _, id := range ids {
			w.until(id, "approval sent", func(o store.Operation, _ store.Binding) bool {
				return domain.StepStatus(o.Step) != domain.StepCreateApprovalSubmitting
			})
			w.decide(id, "approve")
		}
		for _, id := range ids {
			w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
			w.validatedOnce(id)
		}
		close(stop)
		wg.Wait()
		require.NoError(t, sampleError)
		require.LessOrEqual(t, maxActive, 1, "never two active batches of the project")

		var dup int
		require.NoError(t, st.DB().QueryRowContext(t.Context(),
			"SELECT COUNT(*) FROM (SELECT h.operation_id FROM merge_batch_history h JOIN merge_batch b ON b.id = h.batch_id"+
				" WHERE b.status = 2 GROUP BY h.operation_id HAVING COUNT(*) > 1) x").Scan(&dup))
		require.Zero(t, dup, "each request in exactly one succeeded batch")
		file := w.fileOnMain(tBatched)
		for _, id := range ids {
			require.Contains(t, file, `operationId: "`+id+`"`)
		}
	})
}
