package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"changeflow/internal/auditchain"
	"changeflow/internal/domain"
)

// AuditChainState is the chain's two ends: the head (the last record
// chained) and the anchor (the last record retention removed).
type AuditChainState struct {
	HeadSeq    int64
	HeadHash   string
	AnchorSeq  int64
	AnchorHash string
	// AnchorOccurredAt is the removed record's occurred_at (zero while
	// nothing was removed).
	AnchorOccurredAt time.Time
}

// AuditChainState reads the head and the anchor.
func (s *Store) AuditChainState(ctx context.Context) (AuditChainState, error) {
	var (
		st AuditChainState
		at dbTime
	)
	err := s.db.QueryRowContext(ctx,
		"SELECT h.seq, h.hash, a.seq, a.hash, a.occurred_at FROM audit_chain_head h JOIN audit_chain_anchor a ON a.id = h.id WHERE h.id = 1").
		Scan(&st.HeadSeq, &st.HeadHash, &st.AnchorSeq, &st.AnchorHash, &at)
	if err != nil {
		return AuditChainState{}, fmt.Errorf("read audit chain state: %w", translate(err))
	}
	st.AnchorOccurredAt = at.t
	return st, nil
}

// AuditChainRange returns the first and the last seq of the records whose
// occurred_at lies in [from, to) (0, 0 when none): the run an export of
// that range holds. It is one range of idx_audit_chain_occurred. A record
// chained late (its transaction committed after newer ones were chained)
// has a higher seq than its occurred_at suggests; the run from first to
// last holds it with its neighbours, so the run stays one unbroken piece
// of the chain (docs/audit.md, "Export").
func (s *Store) AuditChainRange(ctx context.Context, from, to time.Time) (first, last int64, err error) {
	var lo, hi sql.NullInt64
	err = s.db.QueryRowContext(ctx, "SELECT MIN(seq), MAX(seq) FROM audit_chain WHERE occurred_at >= ? AND occurred_at < ?",
		s.dialect.Time(from), s.dialect.Time(to)).Scan(&lo, &hi)
	if err != nil {
		return 0, 0, fmt.Errorf("audit chain range: %w", translate(err))
	}
	return lo.Int64, hi.Int64, nil
}

// AuditChainPage returns up to limit chained records with fromSeq ≤ seq ≤
// toSeq, in seq order: one page of an export, on the primary key.
func (s *Store) AuditChainPage(ctx context.Context, fromSeq, toSeq int64, limit int) ([]auditchain.Entry, error) {
	rows, err := s.db.QueryContext(ctx,
		"SELECT seq, prev_hash, hash, record FROM audit_chain WHERE seq >= ? AND seq <= ? ORDER BY seq LIMIT ?",
		fromSeq, toSeq, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("audit chain page: %w", translate(err))
	}
	defer rows.Close()
	var out []auditchain.Entry
	for rows.Next() {
		var (
			e   auditchain.Entry
			rec string
		)
		if err := rows.Scan(&e.Seq, &e.PrevHash, &e.Hash, &rec); err != nil {
			return nil, fmt.Errorf("audit chain page: %w", err)
		}
		e.Record = []byte(rec)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit chain page: %w", translate(err))
	}
	return out, nil
}

// AuditChainRetain removes, in one transaction, up to limit of the oldest
// chained records (lowest seq first) whose occurred_at is more than
// retention before the database clock, and moves the anchor to the last
// one removed, so the chain from the anchor on still verifies: the first
// remaining record's prevHash is the anchor's hash. It stops at the first
// record too young to go, so what remains is always a run starting right
// after the anchor. It returns how many it removed; domain.ErrPreempted
// when another instance moved the anchor first (the guarded write
// WHERE seq = the anchor read).
func (s *Store) AuditChainRetain(ctx context.Context, retention time.Duration, limit int) (int, error) {
	if limit <= 0 {
		limit = InChunkSize
	}
	cutoff, arg := s.dialect.NowMinus(retention)
	var n int
	err := s.InTx(ctx, nil, func(tx *sql.Tx) error {
		n = 0
		var anchor int64
		if err := tx.QueryRowContext(ctx, "SELECT seq FROM audit_chain_anchor WHERE id = 1").Scan(&anchor); err != nil {
			return fmt.Errorf("read audit chain anchor: %w", translate(err))
		}
		rows, err := tx.QueryContext(ctx, "SELECT seq, hash, occurred_at, CASE WHEN occurred_at < "+cutoff+" THEN 1 ELSE 0 END"+
			" FROM audit_chain WHERE seq > ? ORDER BY seq LIMIT ?", arg, anchor, limit)
		if err != nil {
			return fmt.Errorf("read audit chain to retain: %w", translate(err))
		}
		last, count, err := retainable(rows)
		if err != nil || count == 0 {
			return err
		}
		res, err := tx.ExecContext(ctx, "UPDATE audit_chain_anchor SET seq = ?, hash = ?, occurred_at = ?, moved_at = "+s.dialect.Now()+
			" WHERE id = 1 AND seq = ?", last.seq, last.hash, s.dialect.Time(last.at), anchor)
		if err != nil {
			return fmt.Errorf("move audit chain anchor: %w", translate(err))
		}
		if k, err := res.RowsAffected(); err != nil || k != 1 {
			return fmt.Errorf("move audit chain anchor from seq %d: %w", anchor, domain.ErrPreempted)
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM audit_chain WHERE seq > ? AND seq <= ?", anchor, last.seq); err != nil {
			return fmt.Errorf("remove retained audit chain: %w", translate(err))
		}
		n = count
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("audit chain retention: %w", err)
	}
	return n, nil
}

type retainedRecord struct {
	seq  int64
	hash string
	at   time.Time
}

// retainable reads rows (seq order) up to the first record too young to
// remove and returns the last removable one and how many there are.
func retainable(rows *sql.Rows) (retainedRecord, int, error) {
	defer rows.Close()
	var (
		last  retainedRecord
		count int
	)
	for rows.Next() {
		var (
			r   retainedRecord
			at  dbTime
			old int
		)
		if err := rows.Scan(&r.seq, &r.hash, &at, &old); err != nil {
			return retainedRecord{}, 0, fmt.Errorf("read audit chain to retain: %w", err)
		}
		if old != 1 {
			break
		}
		r.at = at.t
		last, count = r, count+1
	}
	if err := rows.Err(); err != nil {
		return retainedRecord{}, 0, fmt.Errorf("read audit chain to retain: %w", translate(err))
	}
	return last, count, nil
}
