package batch

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
)

// benchGitLab answers the calls a round and a settlement make, in memory:
// the benchmark measures changeflow's side (statements, building the
// file), not a GitLab. Any other call panics on the nil embedded port.
type benchGitLab struct {
	gitlab.GitLab
	mu       sync.Mutex
	mrs      map[int64]gitlab.MR
	bySource map[string]int64
	calls    int
}

func newBenchGitLab() *benchGitLab {
	return &benchGitLab{mrs: map[int64]gitlab.MR{}, bySource: map[string]int64{}}
}

func (g *benchGitLab) call() { g.mu.Lock(); g.calls++; g.mu.Unlock() }

var errBenchNotFound = &gitlab.Error{Op: "bench", Status: http.StatusNotFound, Message: "404 Not Found"}

func (g *benchGitLab) FindMRBySourceBranch(_ context.Context, _, source string, _ gitlab.MRStateFilter) (gitlab.MR, bool, error) {
	g.call()
	g.mu.Lock()
	defer g.mu.Unlock()
	iid, ok := g.bySource[source]
	return g.mrs[iid], ok, nil
}

// ListOpenMRs lists the open MRs the fake opened.
func (g *benchGitLab) ListOpenMRs(context.Context, string, string) ([]gitlab.MR, bool, error) {
	g.call()
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []gitlab.MR
	for _, mr := range g.mrs {
		if mr.State == gitlab.MRStateOpened {
			out = append(out, mr)
		}
	}
	return out, false, nil
}

// GetBranch knows the target branch only (its head is what a round's
// commit is pinned to); a batch branch does not exist yet.
func (g *benchGitLab) GetBranch(_ context.Context, _, branch string) (gitlab.Branch, error) {
	g.call()
	if branch == "main" {
		return gitlab.Branch{Name: branch, CommitID: "sha-main"}, nil
	}
	return gitlab.Branch{}, errBenchNotFound
}

func (g *benchGitLab) GetFile(context.Context, string, string, string) (gitlab.File, error) {
	g.call()
	return gitlab.File{}, errBenchNotFound
}

func (g *benchGitLab) CreateCommit(_ context.Context, _ string, c gitlab.CommitRequest) (gitlab.Commit, error) {
	g.call()
	return gitlab.Commit{ID: fmt.Sprintf("sha-%d", len(c.Actions))}, nil
}

func (g *benchGitLab) CreateMR(_ context.Context, _ string, r gitlab.CreateMRRequest) (gitlab.MR, error) {
	g.call()
	g.mu.Lock()
	defer g.mu.Unlock()
	mr := gitlab.MR{IID: int64(len(g.mrs) + 1), SourceBranch: r.SourceBranch, State: gitlab.MRStateOpened, Description: r.Description}
	g.mrs[mr.IID], g.bySource[r.SourceBranch] = mr, mr.IID
	return mr, nil
}

func (g *benchGitLab) GetMR(_ context.Context, _ string, iid int64) (gitlab.MR, error) {
	g.call()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mrs[iid], nil
}

func (g *benchGitLab) CloseMR(_ context.Context, _ string, iid int64) (gitlab.MR, error) {
	g.call()
	g.mu.Lock()
	defer g.mu.Unlock()
	mr := g.mrs[iid]
	mr.State = gitlab.MRStateClosed
	g.mrs[iid] = mr
	return mr, nil
}

// BenchmarkBatchRound measures a batch of n members on each database
// (docs/benchmarks.md), statements counted at the driver boundary as
// BenchmarkClaim does, GitLab answered in memory:
//
//   - round: Rounds.RunRound — planRound's read, the claim, the member
//     reads, building one commit with every member's entry, and the one
//     BatchApply (MR on the batch, members linked and moved to
//     CREATE_MR_CREATED, driver scheduled);
//   - life: what the members cost for the rest of a successful batch —
//     the followers' catch-up at the driver's CREATE_SUCCEEDED and
//     HANDLE_STARTED steps (batchFollow) and batch_finish (every member
//     MERGED, the batch SUCCEEDED); the driver's own steps are a single
//     request's, whatever n is;
//   - settle: a FAILED settlement of another batch of n (close and
//     re-read the MR, every member back to CREATE_ADMITTED and
//     re-admitted, one transaction).
//
// Run with -benchtime=1x: the setup submits 2n requests per iteration.
func BenchmarkBatchRound(b *testing.B) {
	for _, driver := range storetest.Drivers() {
		b.Run(driver, func(b *testing.B) {
			ctx := b.Context()
			st, counter, err := store.OpenCounting(ctx, driver, storetest.NewDatabase(b, driver))
			require.NoError(b, err)
			b.Cleanup(func() { _ = st.Close() })
			_, err = st.Migrate(ctx)
			require.NoError(b, err)
			snap := flowtest.Config(b, flowtest.Targets(map[string]bool{"t": true}), map[string]any{"batch.maxRequests": 1000})
			gl := newBenchGitLab()
			d := Flow{Env: flow.Env{GitLab: gl, Config: snap}, Store: st}
			rounds := NewRounds(d, nil)

			seq := 0
			admit := func(n int) {
				seq++
				ids := make([]string, 0, n)
				for i := range n {
					ids = append(ids, fmt.Sprintf("br-%d-%d", seq, i))
				}
				storetest.AdmitWaiting(b, st, "t", "bench", ids...)
				storetest.UntilAdmittedBeforeNow(b, st, ids...) // claimable: admitted before the claim's "now"
			}
			type phase struct {
				stmts, txs int64
				took       time.Duration
			}
			measure := func(p *phase, fn func()) {
				s0, _, t0 := counter.Snapshot()
				start := time.Now()
				fn()
				p.took += time.Since(start)
				s1, _, t1 := counter.Snapshot()
				p.stmts, p.txs = p.stmts+s1-s0, p.txs+t1-t0
			}

			for _, n := range []int{10, 100, 1000} {
				b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
					var round, life, settle phase
					calls := 0
					for range b.N {
						admit(n)
						var r RoundResult
						c0 := gl.calls
						measure(&round, func() {
							r, err = rounds.RunRound(ctx, 1)
							require.NoError(b, err)
						})
						calls += gl.calls - c0
						require.Equal(b, n, r.Members)
						members, err := st.BatchMemberOperations(ctx, r.BatchID)
						require.NoError(b, err)
						driverOp := members[0]
						measure(&life, func() {
							require.NoError(b, d.batchFollow(ctx, r.BatchID, driverOp.OperationID, domain.StepCreateSucceeded))
							require.NoError(b, d.batchFollow(ctx, r.BatchID, driverOp.OperationID, domain.StepHandleStarted))
							out, err := d.batchFinish(ctx, engine.Work{Operation: driverOp, Action: flow.ActionBatchFinish})
							require.NoError(b, err)
							require.Equal(b, engine.OutcomeDone, out.Kind(), out.Reason())
						})
						done, err := st.BatchGet(ctx, r.BatchID)
						require.NoError(b, err)
						require.Equal(b, domain.BatchSucceeded, done.Status)

						admit(n)
						failing, err := rounds.RunRound(ctx, 1)
						require.NoError(b, err)
						measure(&settle, func() {
							res, err := d.SettleBatch(ctx, failing.BatchID, "BENCH", "bench", "bench")
							require.NoError(b, err)
							require.Equal(b, n, res.Readmitted)
						})
						// The re-admitted members leave the queue for the next
						// iteration (not measured).
						_, err = st.DB().ExecContext(ctx, "DELETE FROM merge_batch_request WHERE batch_id IS NULL")
						require.NoError(b, err)
					}
					per := func(x int64) float64 { return float64(x) / float64(b.N) }
					ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
					b.ReportMetric(per(round.stmts), "round-stmts")
					b.ReportMetric(per(round.txs), "round-tx")
					b.ReportMetric(ms(round.took), "round-ms")
					b.ReportMetric(float64(calls)/float64(b.N), "round-gitlab-calls")
					b.ReportMetric(per(life.stmts), "life-stmts")
					b.ReportMetric(ms(life.took), "life-ms")
					b.ReportMetric(per(settle.stmts), "settle-stmts")
					b.ReportMetric(ms(settle.took), "settle-ms")
				})
			}
		})
	}
}
