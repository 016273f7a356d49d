package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"changeflow/internal/notify"
)

// The outbox's delivery side: any instance claims due events with a lease
// (as the engine claims work), delivers them and records the outcome with
// writes guarded by its lease, so an instance whose lease ran out (it
// stalled, or died mid-delivery) cannot overwrite the work of the one that
// took the event over.

// Outbox event statuses.
const (
	OutboxPending = "PENDING"
	OutboxDone    = "DONE"
	OutboxDead    = "DEAD"
)

// Outcomes of one event on one channel.
const (
	DeliveryDelivered = "DELIVERED"
	DeliverySkipped   = "SKIPPED"
	DeliveryGone      = "GONE"
)

// OutboxEvent is one stored event.
type OutboxEvent struct {
	Row         int64
	EventID     string
	Kind        notify.Kind
	OrderKey    string
	OperationID string
	Data        OutboxData
	Status      string
	Attempts    int
	NextAt      time.Time
	LastError   string
	CreatedAt   time.Time
	DoneAt      time.Time
}

const outboxColumns = "id, event_id, kind, order_key, COALESCE(operation_id, ''), data, status, attempts, next_at, COALESCE(last_error, ''), created_at, done_at"

func scanOutboxEvent(sc interface{ Scan(...any) error }) (OutboxEvent, error) {
	var (
		e                      OutboxEvent
		data                   string
		nextAt, created, doneT dbTime
	)
	if err := sc.Scan(&e.Row, &e.EventID, &e.Kind, &e.OrderKey, &e.OperationID, &data, &e.Status, &e.Attempts,
		&nextAt, &e.LastError, &created, &doneT); err != nil {
		return OutboxEvent{}, err
	}
	if err := json.Unmarshal([]byte(data), &e.Data); err != nil {
		return OutboxEvent{}, fmt.Errorf("event %s: data: %w", e.EventID, err)
	}
	e.NextAt, e.CreatedAt, e.DoneAt = nextAt.t, created.t, doneT.t
	return e, nil
}

// outboxList runs a SELECT of outboxColumns.
func (s *Store) outboxList(ctx context.Context, what, where string, vals ...any) ([]OutboxEvent, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT "+outboxColumns+" FROM outbox_event "+where, vals...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, translate(err))
	}
	defer rows.Close()
	var out []OutboxEvent
	for rows.Next() {
		e, err := scanOutboxEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, translate(err))
	}
	return out, nil
}

// OutboxClaim claims up to limit due events for owner for lease and
// returns them, oldest first. An event is due when it is PENDING, its
// next_at has come and no lease holds it; and it is claimed only when no
// earlier PENDING event has its order key, so the events of one request
// are delivered in order (a dead letter does not hold back the ones after
// it: they are told, and the dead one is replayed by an operator). Each
// claim is a guarded UPDATE of one row: of two instances claiming at once
// exactly one gets each event. A claim counts as an attempt.
func (s *Store) OutboxClaim(ctx context.Context, owner string, lease time.Duration, limit int) ([]OutboxEvent, error) {
	if owner == "" || lease <= 0 {
		return nil, errors.New("claim events: an owner and a lease are required")
	}
	d := s.dialect
	rows, err := s.db.QueryContext(ctx,
		"SELECT e.id FROM outbox_event e WHERE e.status = 'PENDING' AND e.next_at <= "+d.Now()+
			" AND (e.lease_until IS NULL OR e.lease_until < "+d.Now()+")"+
			" AND NOT EXISTS (SELECT 1 FROM outbox_event p WHERE p.order_key = e.order_key AND p.status = 'PENDING' AND p.id < e.id)"+
			" ORDER BY e.id LIMIT ?", max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("claim events: %w", translate(err))
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("claim events: %w", err)
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("claim events: %w", translate(err))
	}
	until, arg := d.NowAdd(lease)
	var claimed []int64
	for _, id := range ids {
		res, err := s.db.ExecContext(ctx,
			"UPDATE outbox_event SET lease_owner = ?, lease_until = "+until+", attempts = attempts + 1"+
				" WHERE id = ? AND status = 'PENDING' AND (lease_until IS NULL OR lease_until < "+d.Now()+")",
			owner, arg, id)
		if err != nil {
			return nil, fmt.Errorf("claim event %d: %w", id, translate(err))
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			claimed = append(claimed, id)
		}
	}
	if len(claimed) == 0 {
		return nil, nil
	}
	return s.outboxList(ctx, "read claimed events", "WHERE id IN ("+placeholders(len(claimed))+") AND lease_owner = ? ORDER BY id",
		append(args(claimed), owner)...)
}

// OutboxDeliveries are the channels that already have an outcome for the
// event at row: a retry skips them.
func (s *Store) OutboxDeliveries(ctx context.Context, row int64) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT channel, outcome FROM outbox_delivery WHERE event_row = ?", row)
	if err != nil {
		return nil, fmt.Errorf("read deliveries of event %d: %w", row, translate(err))
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var ch, oc string
		if err := rows.Scan(&ch, &oc); err != nil {
			return nil, fmt.Errorf("read deliveries of event %d: %w", row, err)
		}
		out[ch] = oc
	}
	return out, translate(rows.Err())
}

// OutboxRecordDelivery records the outcome of the event at row on
// channel, once: a second record (a re-delivery after a lost lease) keeps
// the first.
func (s *Store) OutboxRecordDelivery(ctx context.Context, row int64, channel, outcome string) error {
	if _, err := insertOnce(ctx, s.db, "INSERT INTO outbox_delivery (event_row, channel, outcome) VALUES (?, ?, ?)",
		row, clipRunes(channel, 96), outcome); err != nil {
		return fmt.Errorf("record delivery of event %d on %s: %w", row, channel, err)
	}
	return nil
}

// OutboxFinish ends owner's claim of the event at row: DONE when every
// channel has its outcome; otherwise, with lastErr, PENDING again after
// retryIn, or DEAD when dead. It reports false when owner no longer holds
// the claim (its lease ran out and another instance took the event).
func (s *Store) OutboxFinish(ctx context.Context, row int64, owner string, done, dead bool, retryIn time.Duration, lastErr string) (bool, error) {
	d := s.dialect
	var (
		q    string
		vals []any
	)
	switch {
	case done:
		q, vals = "UPDATE outbox_event SET status = 'DONE', done_at = "+d.Now()+", lease_owner = NULL, lease_until = NULL, last_error = NULL", nil
	case dead:
		q, vals = "UPDATE outbox_event SET status = 'DEAD', lease_owner = NULL, lease_until = NULL, last_error = ?", []any{clipRunes(lastErr, 512)}
	default:
		at, arg := d.NowAdd(retryIn)
		q, vals = "UPDATE outbox_event SET next_at = "+at+", lease_owner = NULL, lease_until = NULL, last_error = ?", []any{arg, clipRunes(lastErr, 512)}
	}
	res, err := s.db.ExecContext(ctx, q+" WHERE id = ? AND status = 'PENDING' AND lease_owner = ?", append(vals, row, owner)...)
	if err != nil {
		return false, fmt.Errorf("finish event %d: %w", row, translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("finish event %d: %w", row, err)
	}
	return n == 1, nil
}

// OutboxDeadLetters are the dead events, newest first.
func (s *Store) OutboxDeadLetters(ctx context.Context, limit int) ([]OutboxEvent, error) {
	return s.outboxList(ctx, "list dead letters", "WHERE status = 'DEAD' ORDER BY id DESC LIMIT ?", max(limit, 1))
}

// OutboxEventsOf are the events of operationID, in the order written.
func (s *Store) OutboxEventsOf(ctx context.Context, operationID string) ([]OutboxEvent, error) {
	return s.outboxList(ctx, "list events of "+operationID, "WHERE operation_id = ? ORDER BY id", operationID)
}

// OutboxReplay makes the dead event eventID PENDING again with its
// attempts reset, due now: the channels that took it keep their outcome
// and do not hear of it twice. It reports false when no dead event has
// that id.
func (s *Store) OutboxReplay(ctx context.Context, eventID string) (bool, error) {
	res, err := s.db.ExecContext(ctx,
		"UPDATE outbox_event SET status = 'PENDING', attempts = 0, next_at = "+s.dialect.Now()+", lease_owner = NULL, lease_until = NULL"+
			" WHERE event_id = ? AND status = 'DEAD'", eventID)
	if err != nil {
		return false, fmt.Errorf("replay event %s: %w", eventID, translate(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("replay event %s: %w", eventID, err)
	}
	return n == 1, nil
}

// OutboxStats is the outbox at a glance, for the metrics and the console.
type OutboxStats struct {
	// Pending is the number of events not yet delivered; Dead the number
	// of dead letters.
	Pending, Dead int
	// OldestPending is the age of the oldest undelivered event by the
	// database clock; 0 when none.
	OldestPending time.Duration
}

// OutboxStats reads the outbox's depth and the age of its oldest
// undelivered event.
func (s *Store) OutboxStats(ctx context.Context) (OutboxStats, error) {
	var (
		st     OutboxStats
		oldest dbTime
		now    dbTime
	)
	err := s.db.QueryRowContext(ctx,
		"SELECT (SELECT COUNT(*) FROM outbox_event WHERE status = 'PENDING'), (SELECT COUNT(*) FROM outbox_event WHERE status = 'DEAD'),"+
			" (SELECT MIN(created_at) FROM outbox_event WHERE status = 'PENDING'), "+s.dialect.Now()).
		Scan(&st.Pending, &st.Dead, &oldest, &now)
	if err != nil {
		return OutboxStats{}, fmt.Errorf("read outbox stats: %w", translate(err))
	}
	if oldest.valid && now.valid {
		st.OldestPending = max(now.t.Sub(oldest.t), 0)
	}
	return st, nil
}

// DisabledChannel is a channel whose destination said it is gone.
type DisabledChannel struct {
	Channel    string
	DisabledAt time.Time
	Reason     string
}

// OutboxDisableChannel records channel as gone, once (the first reason
// stays).
func (s *Store) OutboxDisableChannel(ctx context.Context, channel, reason string) error {
	if _, err := insertOnce(ctx, s.db, "INSERT INTO outbox_channel (channel, reason) VALUES (?, ?)",
		clipRunes(channel, 96), clipRunes(reason, 512)); err != nil {
		return fmt.Errorf("disable channel %s: %w", channel, err)
	}
	return nil
}

// OutboxEnableChannel turns channel back on; false when it was not off.
func (s *Store) OutboxEnableChannel(ctx context.Context, channel string) (bool, error) {
	res, err := s.db.ExecContext(ctx, "DELETE FROM outbox_channel WHERE channel = ?", channel)
	if err != nil {
		return false, fmt.Errorf("enable channel %s: %w", channel, translate(err))
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// OutboxDisabledChannels lists the channels turned off, by name.
func (s *Store) OutboxDisabledChannels(ctx context.Context) (map[string]DisabledChannel, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT channel, disabled_at, reason FROM outbox_channel")
	if err != nil {
		return nil, fmt.Errorf("list disabled channels: %w", translate(err))
	}
	defer rows.Close()
	out := map[string]DisabledChannel{}
	for rows.Next() {
		var (
			c  DisabledChannel
			at dbTime
		)
		if err := rows.Scan(&c.Channel, &at, &c.Reason); err != nil {
			return nil, fmt.Errorf("list disabled channels: %w", err)
		}
		c.DisabledAt = at.t
		out[c.Channel] = c
	}
	return out, translate(rows.Err())
}
