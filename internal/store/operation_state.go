package store

import (
	"context"
	"fmt"
)

// OperationVersions are the change counters of one operation: its own
// version (every write of its step, I6) and the version of the binding it
// holds (every write of the binding's status; 0 while it holds none). A
// change of either is a change of what GET /api/requests/{id} shows.
type OperationVersions struct {
	OperationID    string
	Version        int64
	BindingVersion int64
}

// operationVersionsChunk bounds the ids of one statement (placeholders),
// well below every driver's limit.
const operationVersionsChunk = 500

// OperationVersionsOf returns the change counters of ids (unknown ids are
// absent), in one statement per 500 ids, on the operation_id unique key
// and the binding's operation index. The live-status feed reads it once per
// interval for every request someone is watching on this instance, so its
// cost grows with the watched requests, not with the watchers, nor with
// the traffic of requests nobody watches.
func (s *Store) OperationVersionsOf(ctx context.Context, ids []string) ([]OperationVersions, error) {
	var out []OperationVersions
	for start := 0; start < len(ids); start += operationVersionsChunk {
		chunk := ids[start:min(start+operationVersionsChunk, len(ids))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx,
			"SELECT o.operation_id, o.version, COALESCE(MAX(b.version), 0) FROM operation o "+
				"LEFT JOIN binding b ON b.operation_id = o.operation_id "+
				"WHERE o.operation_id IN ("+placeholders(len(chunk))+") GROUP BY o.operation_id, o.version", args...)
		if err != nil {
			return nil, fmt.Errorf("read operation versions: %w", translate(err))
		}
		for rows.Next() {
			var v OperationVersions
			if err := rows.Scan(&v.OperationID, &v.Version, &v.BindingVersion); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read operation versions: %w", err)
			}
			out = append(out, v)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read operation versions: %w", translate(err))
		}
	}
	return out, nil
}
