package store

import "strings"

// chunk splits items into consecutive slices of at most size elements (the
// last may be shorter), sharing items' backing array. Callers run one
// statement per chunk so no IN list exceeds InChunkSize.
func chunk[T any](items []T, size int) [][]T {
	if size <= 0 {
		size = InChunkSize
	}
	out := make([][]T, 0, (len(items)+size-1)/size)
	for len(items) > size {
		out = append(out, items[:size:size])
		items = items[size:]
	}
	if len(items) > 0 {
		out = append(out, items)
	}
	return out
}

// placeholders returns n comma-separated "?" for an IN list or a VALUES
// row: placeholders(3) == "?, ?, ?".
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// valuesRows returns rows copies of "(?, …, ?)" with cols placeholders
// each, comma-separated, for a multi-row INSERT (batch inserts, no N+1).
func valuesRows(rows, cols int) string {
	if rows <= 0 {
		return ""
	}
	row := "(" + placeholders(cols) + ")"
	return strings.Repeat(row+", ", rows-1) + row
}

// args converts items to the []any that database/sql takes.
func args[T any](items []T) []any {
	out := make([]any, len(items))
	for i, v := range items {
		out[i] = v
	}
	return out
}
