package flow_test

import (
	"changeflow/internal/workflow/flow"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
			require.Equal(t, tc.want, flow.BranchName(tc.opID))
			require.Equal(t, tc.want, flow.BranchName(tc.opID), "deterministic")
		})
	}
	t.Run("characters Git refuses become dashes plus a hash", func(t *testing.T) {
		a, b := flow.BranchName("a..b"), flow.BranchName("a~:b")
		for _, n := range []string{a, b} {
			require.True(t, strings.HasPrefix(n, "changeflow/op-a--b-"), n)
			require.NotContains(t, n, "..")
		}
		require.NotEqual(t, a, b, "ids that clean up alike stay distinct")
	})
}

func TestTrailer(t *testing.T) {
	t.Parallel()
	text := "Requested by alice.\n\n" + flow.Trailer("op-1") + "\n"
	require.True(t, flow.HasTrailer(text, "op-1"))
	require.False(t, flow.HasTrailer(text, "op-"), "whole line only")
}
