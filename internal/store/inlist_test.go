package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChunk(t *testing.T) {
	ids := make([]int64, 1201)
	for i := range ids {
		ids[i] = int64(i)
	}
	tests := []struct {
		name  string
		items []int64
		size  int
		want  []int // chunk lengths
	}{
		{"nothing gives no chunks", nil, 500, []int{}},
		{"fewer than size gives one chunk", ids[:3], 500, []int{3}},
		{"exactly size gives one chunk", ids[:500], 500, []int{500}},
		{"remainder goes last", ids, 500, []int{500, 500, 201}},
		{"non-positive size means InChunkSize", ids, 0, []int{500, 500, 201}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chunk(tt.items, tt.size)
			lens := []int{}
			var flat []int64
			for _, c := range got {
				lens = append(lens, len(c))
				flat = append(flat, c...)
			}
			require.Equal(t, tt.want, lens)
			require.Equal(t, len(tt.items), len(flat))
			for i := range flat {
				require.Equal(t, tt.items[i], flat[i], "order kept")
			}
		})
	}
}

func TestChunkAppendDoesNotClobberNextChunk(t *testing.T) {
	c := chunk([]int{1, 2, 3, 4}, 2)
	_ = append(c[0], 99)
	require.Equal(t, []int{3, 4}, c[1])
}

func TestPlaceholders(t *testing.T) {
	require.Equal(t, "", placeholders(0))
	require.Equal(t, "?", placeholders(1))
	require.Equal(t, "?, ?, ?", placeholders(3))
	require.Equal(t, "", valuesRows(0, 3))
	require.Equal(t, "(?, ?)", valuesRows(1, 2))
	require.Equal(t, "(?, ?), (?, ?), (?, ?)", valuesRows(3, 2))
	require.Equal(t, []any{int64(1), int64(2)}, args([]int64{1, 2}))
	require.Equal(t, fmt.Sprint([]any{"a"}), fmt.Sprint(args([]string{"a"})))
}
