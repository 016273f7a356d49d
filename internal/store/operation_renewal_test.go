package store_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// renewalOf stores operationID as a renewal of grant (kind GRANT naming
// it, as OperationSubmit writes one) without a binding.
func renewalOf(t *testing.T, s *store.Store, operationID, grant string) {
	t.Helper()
	_, err := s.OperationCreate(t.Context(), opParams(operationID, "alice", "renewed"))
	require.NoError(t, err)
	mustExec(t, s.DB(), "UPDATE operation SET grant_operation_id = ? WHERE operation_id = ?", grant, operationID)
}

func TestOperationRenewalsOf(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSubmit(t, s, "ren-g", "alice", "renewed", domain.BindingValidated)
		renewalOf(t, s, "ren-1", "ren-g")
		renewalOf(t, s, "ren-2", "ren-g")
		renewalOf(t, s, "ren-3", "ren-g")
		renewalOf(t, s, "ren-other", "ren-x") // another grant's
		renewalOf(t, s, "ren-1-1", "ren-1")   // the next link: a renewal of a renewal
		// The grant's revocation names it too, as kind REVOKE.
		_, err := s.OperationCreate(ctx, opParams(domain.RevocationID("ren-g"), "alice", "renewed"))
		require.NoError(t, err)
		mustExec(t, s.DB(), "UPDATE operation SET kind = 'REVOKE', grant_operation_id = 'ren-g', revoke_reason = 'GIVEN_BACK' WHERE operation_id = ?",
			domain.RevocationID("ren-g"))

		ids := func(ops []store.Operation) []string {
			var out []string
			for _, o := range ops {
				require.Equal(t, domain.OperationRenew, o.Kind, o.OperationID)
				out = append(out, o.OperationID)
			}
			return out
		}
		t.Run("newest first, the revocation and other grants' renewals left out", func(t *testing.T) {
			got, err := s.OperationRenewalsOf(ctx, store.OperationRenewalsOfParams{GrantOperationID: "ren-g", Limit: 10})
			require.NoError(t, err)
			require.Equal(t, []string{"ren-3", "ren-2", "ren-1"}, ids(got))
			require.Equal(t, "ren-g", got[0].GrantOperationID)
			require.Equal(t, mustOperation(t, s, "ren-3"), got[0], "the whole row, as OperationGet reads it")
		})
		t.Run("the limit keeps the newest", func(t *testing.T) {
			got, err := s.OperationRenewalsOf(ctx, store.OperationRenewalsOfParams{GrantOperationID: "ren-g", Limit: 1})
			require.NoError(t, err)
			require.Equal(t, []string{"ren-3"}, ids(got))
			got, err = s.OperationRenewalsOf(ctx, store.OperationRenewalsOfParams{GrantOperationID: "ren-g"})
			require.NoError(t, err)
			require.Equal(t, []string{"ren-3"}, ids(got), "a limit below 1 reads one")
		})
		t.Run("a renewal's own renewals", func(t *testing.T) {
			got, err := s.OperationRenewalsOf(ctx, store.OperationRenewalsOfParams{GrantOperationID: "ren-1", Limit: 10})
			require.NoError(t, err)
			require.Equal(t, []string{"ren-1-1"}, ids(got))
		})
		t.Run("none is not an error", func(t *testing.T) {
			got, err := s.OperationRenewalsOf(ctx, store.OperationRenewalsOfParams{GrantOperationID: "ren-3", Limit: 10})
			require.NoError(t, err)
			require.Empty(t, got)
		})
	})
}

// The renewals read is one range of idx_operation_grant, in the index's
// order: no table scan and no sort, on either database, as the planner
// reports it for the statement the store sends.
func TestOperationRenewalsOfUsesItsIndex(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// Rows enough that a scan would not be free: grants without
		// renewals (NULL), and renewals of other grants.
		for i := range 200 {
			id := fmt.Sprintf("plan-%d", i)
			_, err := s.OperationCreate(t.Context(), opParams(id, "alice", fmt.Sprintf("plan-t-%d", i)))
			require.NoError(t, err)
			if i%4 == 0 {
				mustExec(t, s.DB(), "UPDATE operation SET grant_operation_id = ? WHERE operation_id = ?", fmt.Sprintf("plan-%d", i+1), id)
			}
		}
		if s.Dialect().IsMySQL() {
			mustExec(t, s.DB(), "ANALYZE TABLE operation")
		} else {
			mustExec(t, s.DB(), "ANALYZE")
		}
		plan := explain(t, s, s.OperationRenewalsOfQuery(), "plan-1", 1)
		t.Logf("plan: %s", plan)
		if s.Dialect().IsMySQL() {
			// EXPLAIN's key column names the index; a filesort would say
			// the order does not come from it.
			require.Contains(t, plan, "key=idx_operation_grant")
			require.NotContains(t, plan, "filesort")
			require.NotContains(t, plan, "type=ALL")
		} else {
			require.Contains(t, plan, "USING INDEX idx_operation_grant (grant_operation_id=?)")
			require.NotContains(t, plan, "TEMP B-TREE")
			require.NotContains(t, plan, "SCAN operation")
		}
	})
}

// explain is the planner's report of q with args, one "column=value"
// list per row on MariaDB (EXPLAIN), the detail column per row on SQLite
// (EXPLAIN QUERY PLAN), rows joined by " | ".
func explain(t *testing.T, s *store.Store, q string, args ...any) string {
	t.Helper()
	prefix := "EXPLAIN QUERY PLAN "
	if s.Dialect().IsMySQL() {
		prefix = "EXPLAIN "
	}
	rows, err := s.DB().QueryContext(t.Context(), prefix+q, args...)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		var parts []string
		for i, c := range cols {
			if s.Dialect().IsMySQL() {
				parts = append(parts, c+"="+vals[i].String)
			} else if c == "detail" {
				parts = append(parts, vals[i].String)
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	require.NoError(t, rows.Err())
	return strings.Join(out, " | ")
}
