package flow_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/workflow/flow"
)

func TestEntryStatesAreTheTablesEntryRow(t *testing.T) {
	for _, approveFirst := range []bool{false, true} {
		e := flow.Entry(approveFirst)
		require.NoError(t, domain.CheckEntry(e.Step, e.Binding))
		require.NotEmpty(t, e.Action)
	}
}
