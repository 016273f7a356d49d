package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/notify"
)

// The transactional outbox (docs/notifications.md, "Delivery"): the
// transaction that records a notable change inserts the event telling of
// it, so the event exists exactly when the change does. This file writes
// events; outbox_claim.go hands them to the deliverer.

// OutboxNew is an event to write.
type OutboxNew struct {
	Kind notify.Kind
	// OrderKey groups the events delivered one after another: a request's
	// operationId, "batch:<id>", "review:<id>".
	OrderKey string
	// DedupeKey, when set, makes the event exist once however many writers
	// try: an expiry reminder's "expiring:<operationId>:<threshold>".
	DedupeKey string
	Data      OutboxData
}

// OutboxData is what an event tells as the store knows it when the event
// is written: the facts of notify.Data, and the kind of request they are
// about (a removal's failure is told in other words than a grant's). The
// words and links are the deliverer's (notify.Describe), from the
// configuration of the moment it delivers.
type OutboxData struct {
	notify.Data
	Request domain.OperationKind `json:"request,omitempty"`
}

// outboxAdd inserts events in tx, one multi-row INSERT per chunk. An event
// with a DedupeKey that exists already is left as it is: the insert of
// such an event goes alone, through insertOnce, so its duplicate does not
// fail the transaction of the change.
func outboxAdd(ctx context.Context, tx queryer, evs []OutboxNew) error {
	const cols = 6
	var plain []OutboxNew
	for _, e := range evs {
		if e.DedupeKey == "" {
			plain = append(plain, e)
			continue
		}
		vals, err := outboxValues(e)
		if err != nil {
			return err
		}
		if _, err := insertOnce(ctx, tx,
			"INSERT INTO outbox_event (event_id, dedupe_key, kind, order_key, operation_id, data) VALUES (?, ?, ?, ?, ?, ?)", vals...); err != nil {
			return fmt.Errorf("write event %s: %w", e.Kind, err)
		}
	}
	for _, part := range chunk(plain, InChunkSize) {
		vals := make([]any, 0, cols*len(part))
		for _, e := range part {
			v, err := outboxValues(e)
			if err != nil {
				return err
			}
			vals = append(vals, v...)
		}
		if _, err := tx.ExecContext(ctx,
			"INSERT INTO outbox_event (event_id, dedupe_key, kind, order_key, operation_id, data) VALUES "+valuesRows(len(part), cols), vals...); err != nil {
			return fmt.Errorf("write events: %w", translate(err))
		}
	}
	return nil
}

// outboxValues are e's six column values.
func outboxValues(e OutboxNew) ([]any, error) {
	if !e.Kind.Valid() {
		return nil, fmt.Errorf("write event: unknown kind %q", e.Kind)
	}
	if e.OrderKey == "" {
		return nil, fmt.Errorf("write event %s: an order key is required", e.Kind)
	}
	e.Data.Kind = e.Kind
	data, err := json.Marshal(e.Data)
	if err != nil {
		return nil, fmt.Errorf("write event %s: %w", e.Kind, err)
	}
	return []any{newEventID(), nullString(e.DedupeKey), string(e.Kind), clipRunes(e.OrderKey, 128),
		nullString(e.Data.OperationID), string(data)}, nil
}

// newEventID is a fresh CloudEvents id: "evt_" and 128 random bits. It is
// written once with the event and read back on every attempt, so every
// retry carries the same id.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "evt_" + hex.EncodeToString(b[:])
}

// OutboxAdd writes events outside any other change: the events of a
// change recorded elsewhere (a security event's audit record, which is
// itself written once). Prefer the transaction of the change.
func (s *Store) OutboxAdd(ctx context.Context, evs ...OutboxNew) error {
	if len(evs) == 0 {
		return nil
	}
	return s.InTx(ctx, nil, func(tx *sql.Tx) error { return outboxAdd(ctx, tx, evs) })
}

// outboxOfSteps writes the events rows tell of (notify.KindOf), in the
// transaction that appends them to the step history. The operations of
// the rows that may tell of one are read in one statement; the steps on
// the way read nothing.
func outboxOfSteps(ctx context.Context, tx *sql.Tx, rows []operationStepRow) error {
	var ids []string
	seen := map[string]bool{}
	for _, r := range rows {
		if notify.MayTell(r.move("")) && !seen[r.operationID] {
			seen[r.operationID] = true
			ids = append(ids, r.operationID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	facts := make(map[string]OutboxData, len(ids))
	for _, part := range chunk(ids, InChunkSize) {
		if err := outboxFacts(ctx, tx, part, facts); err != nil {
			return err
		}
	}
	var evs []OutboxNew
	for _, r := range rows {
		f, ok := facts[r.operationID]
		if !ok {
			continue
		}
		m := r.move(f.Request)
		m.Batched = f.BatchID != 0
		k := notify.KindOf(m)
		if k == "" {
			continue
		}
		d := f
		if k == notify.KindRequestRejected {
			c, err := rejectionComment(ctx, tx, r.operationID)
			if err != nil {
				return err
			}
			d.Comment = c
		}
		evs = append(evs, OutboxNew{Kind: k, OrderKey: r.operationID, Data: d})
	}
	return outboxAdd(ctx, tx, evs)
}

// move is r as notify.KindOf reads it, for a request of kind op.
func (r operationStepRow) move(op domain.OperationKind) notify.Move {
	return notify.Move{Op: op, FromStep: domain.StepStatus(r.fromStep), ToStep: domain.StepStatus(r.toStep),
		From: r.fromBinding, To: r.toBinding, Approval: r.approval}
}

// outboxFacts reads what the events of ids tell into facts.
func outboxFacts(ctx context.Context, tx *sql.Tx, ids []string, facts map[string]OutboxData) error {
	q, err := tx.QueryContext(ctx,
		"SELECT o.operation_id, "+kindOf("o")+", o.subject, o.target_key, o.expires_at, COALESCE(o.batch_id, 0), COALESCE(o.mr_iid, mb.mr_iid, 0)"+
			" FROM operation o LEFT JOIN merge_batch mb ON mb.id = o.batch_id"+
			" WHERE o.operation_id IN ("+placeholders(len(ids))+")", args(ids)...)
	if err != nil {
		return fmt.Errorf("read the events' requests: %w", translate(err))
	}
	defer q.Close()
	for q.Next() {
		var (
			f       OutboxData
			expires dbTime
		)
		if err := q.Scan(&f.OperationID, &f.Request, &f.Subject, &f.TargetKey, &expires, &f.BatchID, &f.MRIID); err != nil {
			return fmt.Errorf("read the events' requests: %w", err)
		}
		// Self-service: a request's subject is the person who asked.
		f.Requester = f.Subject
		if expires.valid {
			u := expires.t.UTC()
			f.Until = &u
		}
		facts[f.OperationID] = f
	}
	return translate(q.Err())
}

// rejectionComment is the approver's comment on the latest rejection of
// operationID, "" when none was given.
func rejectionComment(ctx context.Context, tx *sql.Tx, operationID string) (string, error) {
	var c sql.NullString
	err := tx.QueryRowContext(ctx,
		"SELECT comment FROM approval_callback WHERE operation_id = ? AND result = 'REJECTED' ORDER BY id DESC LIMIT 1",
		operationID).Scan(&c)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("read the rejection's comment: %w", translate(err))
	}
	return c.String, nil
}

// OutboxRemindExpiring writes one access.expiring event per access in
// effect that ends within a threshold of thresholds (notify.expiryReminders)
// and has not had that threshold's reminder: the dedupe key
// "expiring:<operationId>:<threshold>" makes it exactly once, however many
// instances scan at once. A renewal in effect is a new operationId with
// its own expiry, so it is reminded afresh; an access that ended (or is
// being removed or renewed) is not VALIDATED and gets none. An access that
// ends within the smaller threshold when first seen gets that one only:
// the larger one is past; and a threshold longer than the access was in
// effect before its end (its open period in access_interval) is skipped,
// so a short grant is not reminded of its end as it starts. It returns
// the number written.
func (s *Store) OutboxRemindExpiring(ctx context.Context, thresholds []time.Duration, limit int) (int, error) {
	d := s.dialect
	written := 0
	for i, th := range thresholds {
		within, arg := d.NowAdd(th)
		cond, condArgs := "b.expires_at <= "+within, []any{arg}
		// Leave to a smaller threshold what is already inside it, so a
		// grant of two days gets "24h" once rather than "72h" and "24h"
		// within the same minute.
		for _, smaller := range thresholds[i+1:] {
			expr, a := d.NowAdd(smaller)
			cond += " AND b.expires_at > " + expr
			condArgs = append(condArgs, a)
		}
		// Only an access that was in effect for more than th before its
		// end: a grant of three days does not hear "less than 72 hours
		// left" the moment it takes effect.
		startedBy, startedArg := d.TimeAdd("b.expires_at", -th)
		rows, err := s.db.QueryContext(ctx,
			"SELECT b.operation_id FROM binding b"+
				" WHERE b.status = 'VALIDATED' AND b.expires_at > "+d.Now()+" AND "+cond+
				" AND EXISTS (SELECT 1 FROM access_interval a WHERE a.operation_id = b.operation_id AND a.until_at IS NULL AND a.from_at <= "+startedBy+")"+
				" AND NOT EXISTS (SELECT 1 FROM outbox_event e WHERE e.dedupe_key = "+concat(d, "'expiring:'", "b.operation_id", "':"+thresholdName(th)+"'")+")"+
				" ORDER BY b.expires_at LIMIT ?", append(condArgs, startedArg, max(limit, 1))...)
		if err != nil {
			return written, fmt.Errorf("find accesses to remind of: %w", translate(err))
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return written, fmt.Errorf("find accesses to remind of: %w", err)
			}
			ids = append(ids, id)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return written, fmt.Errorf("find accesses to remind of: %w", translate(err))
		}
		for _, id := range ids {
			ok, err := s.remindOne(ctx, id, th)
			if err != nil {
				return written, err
			}
			if ok {
				written++
			}
		}
	}
	return written, nil
}

// remindOne writes the reminder of threshold th for the access of
// operationID, read again under the binding's lock so a removal or
// renewal committed since the scan is seen; false when it was written
// before or the access is no longer in effect.
func (s *Store) remindOne(ctx context.Context, operationID string, th time.Duration) (bool, error) {
	var wrote bool
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		wrote = false
		facts := map[string]OutboxData{}
		if err := outboxFacts(ctx, tx, []string{operationID}, facts); err != nil {
			return err
		}
		f, ok := facts[operationID]
		if !ok {
			return nil
		}
		b, err := bindingGet(ctx, tx, s.dialect, f.Subject, f.TargetKey, s.dialect.forUpdate())
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock binding: %w", translate(err))
		}
		if b.Status != domain.BindingValidated || b.OperationID != operationID || b.ExpiresAt.IsZero() {
			return nil
		}
		u := b.ExpiresAt.UTC()
		f.Until, f.Threshold = &u, thresholdName(th)
		key := "expiring:" + operationID + ":" + f.Threshold
		vals, err := outboxValues(OutboxNew{Kind: notify.KindAccessExpiring, OrderKey: operationID, DedupeKey: key, Data: f})
		if err != nil {
			return err
		}
		wrote, err = insertOnce(ctx, tx,
			"INSERT INTO outbox_event (event_id, dedupe_key, kind, order_key, operation_id, data) VALUES (?, ?, ?, ?, ?, ?)", vals...)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("remind of the expiry of %s: %w", operationID, err)
	}
	return wrote, nil
}

// thresholdName is th as the reminder names it: "72h", "24h", "90m".
func thresholdName(th time.Duration) string {
	switch {
	case th%time.Hour == 0:
		return strconv.FormatInt(int64(th/time.Hour), 10) + "h"
	case th%time.Minute == 0:
		return strconv.FormatInt(int64(th/time.Minute), 10) + "m"
	}
	return th.String()
}

// concat is the SQL concatenation of parts in d's dialect.
func concat(d Dialect, parts ...string) string {
	if d.IsMySQL() {
		s := "CONCAT("
		for i, p := range parts {
			if i > 0 {
				s += ", "
			}
			s += p
		}
		return s + ")"
	}
	s := ""
	for i, p := range parts {
		if i > 0 {
			s += " || "
		}
		s += p
	}
	return s
}
