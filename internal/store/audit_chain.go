package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"changeflow/internal/auditchain"
	"changeflow/internal/domain"
)

// The sources the audit chain copies (docs/audit.md, "What is chained"):
// the step history of every request, every approval decision received
// (the callback inbox, applied or not) and the audit log.
const (
	ChainSourceStep     = "step"
	ChainSourceApproval = "approval"
	ChainSourceAudit    = "audit"
)

// AuditChainParams bounds one chaining transaction.
type AuditChainParams struct {
	// Grace leaves out records younger than it by the database clock, so
	// a transaction that wrote a record a moment ago has committed before
	// the record is looked for.
	Grace time.Duration
	// Lookback is how far before the newest record chained the next look
	// starts: a record whose transaction committed up to Lookback after it
	// was written is still chained (later, with a higher seq) rather than
	// missed. Each look re-reads that window, checking each record against
	// audit_chain's unique key (NOT EXISTS).
	Lookback time.Duration
	// Limit is the most records one transaction chains (≤ 0: InChunkSize).
	Limit int
}

// chainCandidate is one record not yet chained.
type chainCandidate struct {
	source     string
	sourceID   int64
	kind       string
	occurredAt time.Time
	fields     auditchain.Fields
}

// AuditChainAppend chains the oldest records not yet chained, up to
// p.Limit, in (occurred_at, source, id) order, in one transaction, and
// returns how many it chained (0: nothing new). It reads the head, then
// moves it with a guarded write (WHERE seq = the seq read) before reading
// the records: when another instance chained first, that write matches no
// row and the call returns domain.ErrPreempted having written nothing (the
// caller tries again at its next tick). The guarded write is also the row
// lock that orders concurrent chainers on MariaDB: the loser waits for the
// winner's commit and then finds the head moved.
func (s *Store) AuditChainAppend(ctx context.Context, p AuditChainParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = InChunkSize
	}
	var n int
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		n = 0
		var (
			seq       int64
			hash      string
			chainedTo dbTime
		)
		if err := tx.QueryRowContext(ctx, "SELECT seq, hash, chained_to FROM audit_chain_head WHERE id = 1").Scan(&seq, &hash, &chainedTo); err != nil {
			return fmt.Errorf("read audit chain head: %w", translate(err))
		}
		if err := guardHead(ctx, tx, seq); err != nil {
			return err
		}
		from := time.Unix(0, 0)
		if chainedTo.valid {
			from = chainedTo.t.Add(-p.Lookback)
		}
		cands, err := s.chainCandidates(ctx, tx, from, p.Grace, limit)
		if err != nil || len(cands) == 0 {
			return err
		}
		newTo, lastHash, err := s.insertChain(ctx, tx, seq, hash, cands)
		if err != nil {
			return err
		}
		if chainedTo.valid && chainedTo.t.After(newTo) {
			newTo = chainedTo.t
		}
		last := seq + int64(len(cands))
		res, err := tx.ExecContext(ctx, "UPDATE audit_chain_head SET seq = ?, hash = ?, chained_to = ?, updated_at = "+s.dialect.Now()+
			" WHERE id = 1 AND seq = ?", last, lastHash, s.dialect.Time(newTo), seq)
		if err != nil {
			return fmt.Errorf("move audit chain head: %w", translate(err))
		}
		if k, err := res.RowsAffected(); err != nil || k != 1 {
			return fmt.Errorf("move audit chain head from seq %d: %w", seq, domain.ErrPreempted)
		}
		n = len(cands)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("chain audit records: %w", err)
	}
	return n, nil
}

// guardHead is the chainer's claim: a write that changes nothing but
// matches the head only while it is still at seq (clientFoundRows counts
// a matched row on MariaDB; SQLite counts every row an UPDATE visits).
func guardHead(ctx context.Context, tx *sql.Tx, seq int64) error {
	res, err := tx.ExecContext(ctx, "UPDATE audit_chain_head SET seq = seq WHERE id = 1 AND seq = ?", seq)
	if err != nil {
		return fmt.Errorf("claim audit chain head: %w", translate(err))
	}
	if k, err := res.RowsAffected(); err != nil || k != 1 {
		return fmt.Errorf("claim audit chain head at seq %d: %w", seq, domain.ErrPreempted)
	}
	return nil
}

// candidateReader reads up to limit records of one source written at or
// after from and before the expression before (one argument) that are
// not chained yet, oldest first.
type candidateReader func(ctx context.Context, tx *sql.Tx, from time.Time, before string, beforeArg any, limit int) ([]chainCandidate, error)

// chainCandidates reads up to limit records of each source written at or
// after from and more than grace ago that are not chained yet, and
// returns the first limit of them all in chain order. Each source's read
// is a range of its time index (idx_operation_step_created,
// idx_approval_callback_received, idx_audit_log_created), each row
// checked against uk_audit_chain_source.
func (s *Store) chainCandidates(ctx context.Context, tx *sql.Tx, from time.Time, grace time.Duration, limit int) ([]chainCandidate, error) {
	before, arg := s.dialect.NowMinus(grace)
	var all []chainCandidate
	for _, read := range []candidateReader{s.stepCandidates, s.approvalCandidates, s.auditCandidates} {
		got, err := read(ctx, tx, from, before, arg, limit)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	slices.SortFunc(all, func(a, b chainCandidate) int {
		return cmp.Or(a.occurredAt.Compare(b.occurredAt), cmp.Compare(a.source, b.source), cmp.Compare(a.sourceID, b.sourceID))
	})
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

func (s *Store) stepCandidates(ctx context.Context, tx *sql.Tx, from time.Time, before string, beforeArg any, limit int) ([]chainCandidate, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT s.id, s.created_at, s.operation_id, s.from_step, s.to_step, s.from_binding_status, s.to_binding_status, s.actor, s.note,"+
			" o.subject, o.target_key, o.kind, o.flow, o.project_id, o.approval_id, o.mr_iid, o.batch_id, o.grant_operation_id, o.revoke_reason"+
			" FROM operation_step s LEFT JOIN operation o ON o.operation_id = s.operation_id"+
			" WHERE s.created_at >= ? AND s.created_at < "+before+
			" AND NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.source = ? AND c.source_id = s.id)"+
			" ORDER BY s.created_at, s.id LIMIT ?", s.dialect.Time(from), beforeArg, ChainSourceStep, limit)
	if err != nil {
		return nil, fmt.Errorf("read step history to chain: %w", translate(err))
	}
	defer rows.Close()
	var out []chainCandidate
	for rows.Next() {
		c, err := scanStepCandidate(rows)
		if err != nil {
			return nil, fmt.Errorf("read step history to chain: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read step history to chain: %w", translate(err))
	}
	return out, nil
}

func scanStepCandidate(rows *sql.Rows) (chainCandidate, error) {
	var (
		id, toStep                           int64
		at                                   dbTime
		opID, actor, note                    string
		fromStep, projectID, mrIID, batchID  sql.NullInt64
		fromSt, toSt, subject, target, kind  sql.NullString
		flow, approvalID, grantOp, revokeWhy sql.NullString
	)
	if err := rows.Scan(&id, &at, &opID, &fromStep, &toStep, &fromSt, &toSt, &actor, &note,
		&subject, &target, &kind, &flow, &projectID, &approvalID, &mrIID, &batchID, &grantOp, &revokeWhy); err != nil {
		return chainCandidate{}, err
	}
	f := auditchain.Fields{"source": ChainSourceStep, "sourceId": id, "occurredAt": chainTime(at.t),
		"operationId": opID, "toStep": toStep}
	putString(f, "fromStatus", fromSt.String)
	putString(f, "toStatus", toSt.String)
	putString(f, "actor", actor)
	putString(f, "note", note)
	putString(f, "subject", subject.String)
	putString(f, "targetKey", target.String)
	putString(f, "operationKind", kind.String)
	putString(f, "flow", flow.String)
	putString(f, "approvalId", approvalID.String)
	putString(f, "grantOperationId", grantOp.String)
	putString(f, "revokeReason", revokeWhy.String)
	putInt(f, "fromStep", fromStep.Int64)
	putInt(f, "projectId", projectID.Int64)
	putInt(f, "mrIid", mrIID.Int64)
	putInt(f, "batchId", batchID.Int64)
	k := stepKind(kind.String, fromStep.Valid, toSt.String)
	f["kind"] = k
	return chainCandidate{source: ChainSourceStep, sourceID: id, kind: k, occurredAt: at.t, fields: f}, nil
}

// stepKind names a step for the chain: "<grant|revoke>.submitted" for a
// request's first step, else "<grant|revoke>.<binding status it moved
// to>" in lower case (grant.validated: in effect; grant.rejected;
// revoke.revoked: removed; grant.closed: withdrawn or closed), or
// "<…>.step" when the step did not move the binding.
func stepKind(opKind string, hasFrom bool, toStatus string) string {
	k := strings.ToLower(cmp.Or(opKind, "operation"))
	switch {
	case !hasFrom:
		return k + ".submitted"
	case toStatus == "":
		return k + ".step"
	}
	return k + "." + strings.ToLower(toStatus)
}

func (s *Store) approvalCandidates(ctx context.Context, tx *sql.Tx, from time.Time, before string, beforeArg any, limit int) ([]chainCandidate, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT a.id, a.received_at, a.delivery_key, a.operation_id, a.approval_id, a.result, a.source, a.mr_id, a.decided_by, a.comment FROM approval_callback a"+
			" WHERE a.received_at >= ? AND a.received_at < "+before+
			" AND NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.source = ? AND c.source_id = a.id)"+
			" ORDER BY a.received_at, a.id LIMIT ?", s.dialect.Time(from), beforeArg, ChainSourceApproval, limit)
	if err != nil {
		return nil, fmt.Errorf("read approval decisions to chain: %w", translate(err))
	}
	defer rows.Close()
	var out []chainCandidate
	for rows.Next() {
		var (
			id                           int64
			at                           dbTime
			key, opID, apID, result, via string
			mrID, by, comment            sql.NullString
		)
		if err := rows.Scan(&id, &at, &key, &opID, &apID, &result, &via, &mrID, &by, &comment); err != nil {
			return nil, fmt.Errorf("read approval decisions to chain: %w", err)
		}
		kind := "approval." + strings.ToLower(result)
		f := auditchain.Fields{"source": ChainSourceApproval, "sourceId": id, "occurredAt": chainTime(at.t),
			"kind": kind, "deliveryKey": key, "operationId": opID, "result": result, "via": via}
		putString(f, "approvalId", apID)
		putString(f, "claimedMrId", mrID.String)
		putString(f, "decidedBy", by.String)
		putString(f, "comment", comment.String)
		out = append(out, chainCandidate{source: ChainSourceApproval, sourceID: id, kind: kind, occurredAt: at.t, fields: f})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read approval decisions to chain: %w", translate(err))
	}
	return out, nil
}

func (s *Store) auditCandidates(ctx context.Context, tx *sql.Tx, from time.Time, before string, beforeArg any, limit int) ([]chainCandidate, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT a.id, a.created_at, a.audit_key, a.actor, a.action, a.resource, a.params, a.outcome FROM audit_log a"+
			" WHERE a.created_at >= ? AND a.created_at < "+before+
			" AND NOT EXISTS (SELECT 1 FROM audit_chain c WHERE c.source = ? AND c.source_id = a.id)"+
			" ORDER BY a.created_at, a.id LIMIT ?", s.dialect.Time(from), beforeArg, ChainSourceAudit, limit)
	if err != nil {
		return nil, fmt.Errorf("read audit log to chain: %w", translate(err))
	}
	defer rows.Close()
	var out []chainCandidate
	for rows.Next() {
		var (
			id                                   int64
			at                                   dbTime
			key, actor, action, resource, outcom string
			params                               sql.NullString
		)
		if err := rows.Scan(&id, &at, &key, &actor, &action, &resource, &params, &outcom); err != nil {
			return nil, fmt.Errorf("read audit log to chain: %w", err)
		}
		f := auditchain.Fields{"source": ChainSourceAudit, "sourceId": id, "occurredAt": chainTime(at.t),
			"kind": action, "auditKey": key, "actor": actor, "outcome": outcom}
		putString(f, "resource", resource)
		putString(f, "params", params.String)
		out = append(out, chainCandidate{source: ChainSourceAudit, sourceID: id, kind: action, occurredAt: at.t, fields: f})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit log to chain: %w", translate(err))
	}
	return out, nil
}

// insertChain appends cands after (seq, hash) with one multi-row INSERT
// and returns the newest occurred_at among them and the last hash.
func (s *Store) insertChain(ctx context.Context, tx *sql.Tx, seq int64, hash string, cands []chainCandidate) (time.Time, string, error) {
	const cols = 8
	vals := make([]any, 0, len(cands)*cols)
	var newest time.Time
	for i, c := range cands {
		canon, err := auditchain.Canonical(c.fields)
		if err != nil {
			return time.Time{}, "", fmt.Errorf("chain %s %d: %w", c.source, c.sourceID, err)
		}
		next := seq + int64(i) + 1
		h := auditchain.Hash(hash, next, canon)
		vals = append(vals, next, c.source, c.sourceID, clipRunes(c.kind, 64), s.dialect.Time(c.occurredAt), string(canon), hash, h)
		hash = h
		if c.occurredAt.After(newest) {
			newest = c.occurredAt
		}
	}
	_, err := tx.ExecContext(ctx,
		"INSERT INTO audit_chain (seq, source, source_id, kind, occurred_at, record, prev_hash, hash) VALUES "+
			valuesRows(len(cands), cols), vals...)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("append to audit chain: %w", translate(err))
	}
	return newest, hash, nil
}

// chainTime is a time as the chain's records carry it: RFC 3339 in UTC.
func chainTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func putString(f auditchain.Fields, k, v string) {
	if v != "" {
		f[k] = v
	}
}

func putInt(f auditchain.Fields, k string, v int64) {
	if v != 0 {
		f[k] = v
	}
}
