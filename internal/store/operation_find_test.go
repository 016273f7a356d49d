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

// findAll pages through OperationFind with pages of limit and returns the
// operationIds in the order read.
func findAll(t *testing.T, s *store.Store, p store.OperationFindParams, limit int) []string {
	t.Helper()
	var got []string
	p.Limit = limit
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100, "the pages never end")
		page, err := s.OperationFind(t.Context(), p)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Items), limit)
		for _, o := range page.Items {
			got = append(got, o.OperationID)
		}
		if page.Next.IsZero() {
			return got
		}
		p.After, err = store.ParseOperationCursor(page.Next.Encode())
		require.NoError(t, err)
	}
}

func TestOperationFind(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		// alice and bob, on targets a and b, created in this order.
		for _, r := range [][3]string{
			{"f-0", "alice", "a"}, {"f-1", "bob", "a"}, {"f-2", "alice", "b"},
			{"f-3", "bob", "b"}, {"f-4", "alice", "c"}, {"f-5", "bob", "c"},
		} {
			_, err := s.OperationCreate(ctx, opParams(r[0], r[1], r[2]))
			require.NoError(t, err)
		}
		// f-1 and f-2 were created in the same instant: the id orders them.
		same := s.Dialect().Time(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		mustExec(t, s.DB(), "UPDATE operation SET created_at = ? WHERE operation_id IN ('f-1', 'f-2')", same)
		insertBinding(t, s.DB(), "bob", "a", string(domain.BindingValidated), "f-1")
		insertBinding(t, s.DB(), "alice", "b", string(domain.BindingRevokeFailed), "f-2")
		insertBinding(t, s.DB(), "bob", "b", string(domain.BindingValidated), "f-3")

		for _, limit := range []int{1, 2, 50} {
			t.Run(fmt.Sprintf("pages of %d", limit), func(t *testing.T) {
				require.Equal(t, []string{"f-2", "f-1", "f-5", "f-4", "f-3", "f-0"}, findAll(t, s, store.OperationFindParams{}, limit))
				require.Equal(t, []string{"f-2", "f-4", "f-0"}, findAll(t, s, store.OperationFindParams{Subject: "alice"}, limit))
				require.Equal(t, []string{"f-1", "f-0"}, findAll(t, s, store.OperationFindParams{TargetKey: "a"}, limit))
				require.Equal(t, []string{"f-3"}, findAll(t, s, store.OperationFindParams{Subject: "bob", TargetKey: "b"}, limit))
				// What access does bob have now: his requests in effect.
				require.Equal(t, []string{"f-1", "f-3"}, findAll(t, s, store.OperationFindParams{Subject: "bob", Status: domain.BindingValidated}, limit))
				require.Empty(t, findAll(t, s, store.OperationFindParams{Subject: "alice", Status: domain.BindingValidated}, limit))
			})
		}

		t.Run("attention", func(t *testing.T) {
			// f-0 stopped on a failure; f-2's removal failed (its
			// binding); f-4 is in a BLOCKED batch; f-5 sat at its step
			// since long before its bound, f-3 at the same step but
			// recently; f-1 waits on no one.
			mustExec(t, s.DB(), "UPDATE operation SET step_status = ? WHERE operation_id = 'f-0'", int(domain.StepCreatePipelineFailed))
			batch := mustInsert(t, s.DB(), "INSERT INTO merge_batch (project_id, status) VALUES (?, ?)", 77, int(domain.BatchBlocked))
			mustExec(t, s.DB(), "UPDATE operation SET batch_id = ? WHERE operation_id = 'f-4'", batch)
			done := mustInsert(t, s.DB(), "INSERT INTO merge_batch (project_id, status) VALUES (?, ?)", 78, int(domain.BatchSucceeded))
			mustExec(t, s.DB(), "UPDATE operation SET batch_id = ? WHERE operation_id = 'f-1'", done)
			old := s.Dialect().Time(time.Now().Add(-48 * time.Hour))
			mustExec(t, s.DB(), "UPDATE operation SET step_status = ?, updated_at = ? WHERE operation_id = 'f-5'", int(domain.StepHandlePipelineRunning), old)
			mustExec(t, s.DB(), "UPDATE operation SET step_status = ? WHERE operation_id = 'f-3'", int(domain.StepHandlePipelineRunning))
			att := &store.OperationAttention{
				Stopped:  []domain.StepStatus{domain.StepCreatePipelineFailed, domain.StepHandleMergeFailed},
				Bindings: []domain.BindingStatus{domain.BindingRevokeFailed},
				Slow:     []store.SlowStep{{Steps: []domain.StepStatus{domain.StepHandlePipelineRunning}, Before: time.Now().Add(-2 * time.Hour)}},
			}
			for _, limit := range []int{1, 50} {
				require.Equal(t, []string{"f-2", "f-5", "f-4", "f-0"}, findAll(t, s, store.OperationFindParams{Attention: att}, limit))
			}
			require.Equal(t, []string{"f-2", "f-4", "f-0"}, findAll(t, s, store.OperationFindParams{Attention: att, Subject: "alice"}, 50))
			require.Equal(t, []string{"f-5"}, findAll(t, s, store.OperationFindParams{Attention: att, TargetKey: "c", Subject: "bob"}, 50))
		})
	})
}

// Each shape of the search reads its index in order: no sort and no
// scan of the table, on either database.
func TestOperationFindUsesItsIndex(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for i := range 200 {
			_, err := s.OperationCreate(t.Context(), opParams(fmt.Sprintf("plan-%d", i), fmt.Sprintf("p%d", i%7), fmt.Sprintf("t%d", i%5)))
			require.NoError(t, err)
		}
		if s.Dialect().IsMySQL() {
			mustExec(t, s.DB(), "ANALYZE TABLE operation")
		} else {
			mustExec(t, s.DB(), "ANALYZE")
		}
		after := store.OperationCursor{CreatedAt: time.Now(), ID: 100}
		for name, c := range map[string]struct {
			p     store.OperationFindParams
			index string
		}{
			"all":       {store.OperationFindParams{After: after}, "idx_operation_created"},
			"person":    {store.OperationFindParams{Subject: "p1", After: after}, "idx_operation_subject_created"},
			"target":    {store.OperationFindParams{TargetKey: "t1", Status: domain.BindingValidated}, "idx_operation_target_created"},
			"attention": {store.OperationFindParams{Attention: &store.OperationAttention{Stopped: []domain.StepStatus{domain.StepCreateFailed}}}, "idx_operation_created"},
		} {
			t.Run(name, func(t *testing.T) {
				q, args := s.OperationFindQuery(c.p, 20)
				plan := explain(t, s, q, args...)
				t.Logf("plan: %s", plan)
				if s.Dialect().IsMySQL() {
					require.Contains(t, plan, "key="+c.index)
					require.NotContains(t, plan, "filesort")
				} else {
					require.Contains(t, plan, "USING INDEX "+c.index)
					require.NotContains(t, plan, "TEMP B-TREE")
				}
			})
		}
	})
}
