package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestBatchResumable: which unstarted batch a round may finish building
// at once, and which only after batch.resumeAfter (MinAge). Each case
// claims a fresh batch in its own project, far younger than MinAge.
func TestBatchResumable(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		const liveAfter = 30 * time.Second
		require.NoError(t, s.InstanceHeartbeat(ctx, "live-b"))
		require.NoError(t, s.InstanceHeartbeat(ctx, "dead-c"))
		old, arg := s.Dialect().NowMinus(liveAfter + time.Second)
		mustExec(t, s.DB(), "UPDATE instance_heartbeat SET heartbeat_at = "+old+" WHERE instance_id = 'dead-c'", arg)

		project := int64(100)
		claim := func(builder string) (int64, int64) {
			t.Helper()
			project++
			admitWaiting(t, s, project, fmt.Sprintf("op-p%d", project), 1)
			c, err := s.BatchClaim(ctx, store.BatchClaimParams{ProjectID: project, MaxRequests: 5, Builder: builder})
			require.NoError(t, err)
			require.Equal(t, store.ClaimClaimed, c.Outcome)
			return project, c.BatchID
		}
		resumable := func(project int64, minAge time.Duration) (int64, bool) {
			t.Helper()
			b, err := s.BatchResumable(ctx, store.BatchResumableParams{ProjectID: project, MinAge: minAge, Self: "self-a", LiveAfter: liveAfter})
			if err != nil {
				require.ErrorIs(t, err, domain.ErrNotFound)
				return 0, false
			}
			return b.ID, true
		}
		for _, tt := range []struct {
			name    string
			builder string
			release bool
			want    bool
		}{
			{"a live builder elsewhere may still be building", "live-b", false, false},
			{"a builder whose heartbeat aged out was killed", "dead-c", false, true},
			{"a builder that never heartbeat is gone", "never-seen", false, true},
			{"this instance's own batch is for the caller to judge", "self-a", false, true},
			{"a live builder whose round returned holds nothing", "live-b", true, true},
			{"no builder recorded: only by age", "", false, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				p, id := claim(tt.builder)
				if tt.release {
					require.NoError(t, s.BatchBuildRelease(ctx, id, "someone-else"))
					_, got := resumable(p, time.Hour)
					require.False(t, got, "only the builder releases")
					require.NoError(t, s.BatchBuildRelease(ctx, id, tt.builder))
				}
				got, ok := resumable(p, time.Hour)
				require.Equal(t, tt.want, ok)
				if ok {
					require.Equal(t, id, got)
				}
				storetest.UntilBatchOlder(t, s, id, time.Millisecond)
				got, ok = resumable(p, time.Millisecond)
				require.True(t, ok, "older than MinAge: resumable whatever its builder")
				require.Equal(t, id, got)
			})
		}
		t.Run("a resumer takes the build over; a batch with its MR is never resumable", func(t *testing.T) {
			p, id := claim("dead-c")
			require.NoError(t, s.BatchBuildTake(ctx, id, "live-b"))
			_, ok := resumable(p, time.Hour)
			require.False(t, ok, "now built by a live instance")
			mr := &store.BatchMR{IID: 7, URL: "u", Branch: "b"}
			_, err := s.BatchApply(ctx, store.BatchApplyParams{BatchID: id, SetMR: mr})
			require.NoError(t, err)
			_, ok = resumable(p, time.Nanosecond)
			require.False(t, ok)
			// A second round that built the same batch records nothing.
			_, err = s.BatchApply(ctx, store.BatchApplyParams{BatchID: id, SetMR: &store.BatchMR{IID: 8, URL: "u", Branch: "b"},
				Schedule: &store.BatchSchedule{OperationID: fmt.Sprintf("op-p%d-0", p), Action: "batch_poll_pipeline"}})
			require.ErrorIs(t, err, domain.ErrPreempted)
			b, err := s.BatchGet(ctx, id)
			require.NoError(t, err)
			require.Equal(t, int64(7), b.MRIID)
		})
	})
}
