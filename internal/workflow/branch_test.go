package workflow_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/workflow"
)

func TestBranchName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, opID, want string
	}{
		{"a plain id is kept", "op-123_abc", "changeflow/op-op-123_abc"},
		{"a UUID is kept", "5f0c1c9e-8d2a-4c57-9a1e-2b7f3a9d0e11", "changeflow/op-5f0c1c9e-8d2a-4c57-9a1e-2b7f3a9d0e11"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, workflow.BranchName(tc.opID))
			require.Equal(t, tc.want, workflow.BranchName(tc.opID), "deterministic")
		})
	}
	t.Run("characters Git refuses become dashes plus a hash", func(t *testing.T) {
		a, b := workflow.BranchName("a..b"), workflow.BranchName("a~:b")
		for _, n := range []string{a, b} {
			require.True(t, strings.HasPrefix(n, "changeflow/op-a--b-"), n)
			require.NotContains(t, n, "..")
		}
		require.NotEqual(t, a, b, "ids that clean up alike stay distinct")
	})
}

func TestTrailer(t *testing.T) {
	t.Parallel()
	text := "Requested by alice.\n\n" + workflow.Trailer("op-1") + "\n"
	require.True(t, workflow.HasTrailer(text, "op-1"))
	require.False(t, workflow.HasTrailer(text, "op-"), "whole line only")
}
