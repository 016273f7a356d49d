package store

import (
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
)

// Driver errors of SQLite cannot be built outside its package; the
// conformance tests (schema_test.go, tx_test.go) get real ones from both
// databases. These cover the MySQL numbers the local MariaDB cannot easily
// produce and the wrapping rules.
func TestTranslate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want error // nil: returned unchanged
	}{
		{"no rows is not found", sql.ErrNoRows, domain.ErrNotFound},
		{"wrapped no rows is not found", fmt.Errorf("load: %w", sql.ErrNoRows), domain.ErrNotFound},
		{"1062 is duplicate", &mysql.MySQLError{Number: 1062}, domain.ErrDuplicate},
		{"1586 is duplicate", &mysql.MySQLError{Number: 1586}, domain.ErrDuplicate},
		{"1022 is duplicate", &mysql.MySQLError{Number: 1022}, domain.ErrDuplicate},
		{"1020 record changed is preempted", &mysql.MySQLError{Number: 1020}, domain.ErrPreempted},
		{"1205 lock wait timeout is busy", &mysql.MySQLError{Number: 1205}, domain.ErrBusy},
		{"1213 deadlock is busy", &mysql.MySQLError{Number: 1213}, domain.ErrBusy},
		{"other server errors pass through", &mysql.MySQLError{Number: 1146}, nil},
		{"plain errors pass through", errors.New("boom"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := translate(tt.err)
			require.ErrorIs(t, got, tt.err, "the cause stays in the chain")
			if tt.want == nil {
				require.Same(t, tt.err, got)
				return
			}
			require.ErrorIs(t, got, tt.want)
			require.Contains(t, got.Error(), tt.err.Error(), "the cause stays in the message")
			var me *mysql.MySQLError
			if errors.As(tt.err, &me) {
				require.ErrorAs(t, got, &me, "the driver error is still reachable")
			}
			require.Same(t, got, translate(got), "translating twice changes nothing")
		})
	}
	require.NoError(t, translate(nil))
}

func TestIsCheckViolation(t *testing.T) {
	require.True(t, IsCheckViolation(&mysql.MySQLError{Number: 4025}))
	require.True(t, IsCheckViolation(fmt.Errorf("x: %w", &mysql.MySQLError{Number: 3819})))
	require.False(t, IsCheckViolation(&mysql.MySQLError{Number: 1062}))
	require.False(t, IsCheckViolation(errors.New("CHECK constraint failed")))
}
