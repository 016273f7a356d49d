package store

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// Instance heartbeats: each running instance upserts its row in
// instance_heartbeat every instance.heartbeatInterval, and the global rate
// limit divides a limit by the number of rows beaten within
// instance.liveAfter. Both the write and the comparison use the database
// clock, so skew between application hosts cannot make an instance look
// dead or alive.

// maxInstanceIDLen is instance_heartbeat.instance_id's VARCHAR(128).
const maxInstanceIDLen = 128

// InstanceHeartbeat records that instance id is alive now, by the database
// clock: the first beat inserts its row (started_at = heartbeat_at = now),
// later ones move heartbeat_at.
func (s *Store) InstanceHeartbeat(ctx context.Context, id string) error {
	if id == "" || utf8.RuneCountInString(id) > maxInstanceIDLen || !utf8.ValidString(id) {
		return fmt.Errorf("instance heartbeat: instance id %q is empty, invalid or longer than %d characters", id, maxInstanceIDLen)
	}
	q := "INSERT INTO instance_heartbeat (instance_id) VALUES (?) "
	if s.dialect.IsMySQL() {
		q += "ON DUPLICATE KEY UPDATE heartbeat_at = " + s.dialect.Now()
	} else {
		q += "ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = " + s.dialect.Now()
	}
	if _, err := s.db.ExecContext(ctx, q, id); err != nil {
		return fmt.Errorf("instance heartbeat %q: %w", id, translate(err))
	}
	return nil
}

// InstanceCountLive returns how many instances beat within liveAfter of
// the database clock (idx_instance_heartbeat_at). It can be 0, e.g. before
// the caller's own first beat; callers dividing by it clamp to 1.
func (s *Store) InstanceCountLive(ctx context.Context, liveAfter time.Duration) (int, error) {
	expr, arg := s.dialect.NowMinus(liveAfter)
	var n int
	if err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM instance_heartbeat WHERE heartbeat_at > "+expr, arg).Scan(&n); err != nil {
		return 0, fmt.Errorf("count live instances: %w", translate(err))
	}
	return n, nil
}

// InstancePrune deletes the rows of instances silent for longer than
// olderThan (each restart gets a new id, so dead rows would otherwise
// accumulate) and returns how many it deleted. olderThan should be far
// above liveAfter, so pruning never races with counting a live instance.
func (s *Store) InstancePrune(ctx context.Context, olderThan time.Duration) (int64, error) {
	expr, arg := s.dialect.NowMinus(olderThan)
	res, err := s.db.ExecContext(ctx, "DELETE FROM instance_heartbeat WHERE heartbeat_at < "+expr, arg)
	if err != nil {
		return 0, fmt.Errorf("prune instance heartbeats: %w", translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune instance heartbeats: %w", err)
	}
	return n, nil
}
