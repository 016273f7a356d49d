package auditlog

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"time"

	"changeflow/internal/auditchain"
)

// ErrNoSigningKey refuses an export while audit.signingKey is unset.
var ErrNoSigningKey = errors.New("audit.signingKey is not set: an export cannot be signed")

// exportPage is how many records one read of an export fetches.
const exportPage = 500

// ExportParams is one export: the records whose occurredAt lies in
// [From, To), in Format.
type ExportParams struct {
	From, To time.Time
	Format   string
	// Page, when set, is called after each page is written (the HTTP
	// layer flushes and extends its write deadline there).
	Page func() error
}

// SigningKey is the key exports are signed with now (nil: none).
func (c *Chain) SigningKey() ed25519.PrivateKey { return c.opts.Settings().SigningKey }

// Export chains everything old enough first (so the export is complete up
// to Grace before it starts), then streams the run of the chain that
// holds the range (store.AuditChainRange) page by page in seq order, and
// ends with the signed manifest. Nothing is buffered beyond one page.
//
// A run that starts at or before the anchor (retention removed its
// beginning) starts right after it: the first record's prevHash is then
// the anchor's hash, which the manifest carries. If retention removes
// records of the run while it is being written, the export stops without
// a manifest (verification then fails: cut short) and the error says so.
func (c *Chain) Export(ctx context.Context, w io.Writer, p ExportParams) error {
	key := c.SigningKey()
	if key == nil {
		return ErrNoSigningKey
	}
	if _, err := c.ChainAll(ctx); err != nil {
		return fmt.Errorf("export: chain up to now: %w", err)
	}
	first, last, err := c.opts.Store.AuditChainRange(ctx, p.From, p.To)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	// After the range, so the head it reports is at or past the run.
	st, err := c.opts.Store.AuditChainState(ctx)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	out, err := auditchain.NewWriter(w, p.Format)
	if err != nil {
		return err
	}
	m := auditchain.Manifest{From: p.From, To: p.To, HeadSeq: st.HeadSeq, HeadHash: st.HeadHash,
		AnchorSeq: st.AnchorSeq, AnchorHash: st.AnchorHash}
	if first > 0 && first <= st.AnchorSeq {
		first = st.AnchorSeq + 1
	}
	if first > 0 && first <= last {
		if err := c.writeRun(ctx, out, first, last, &m, p.Page); err != nil {
			return err
		}
	}
	m.ExportedAt = c.opts.Now()
	if err := m.Sign(key); err != nil {
		return err
	}
	return out.Manifest(m)
}

// writeRun writes seq first..last and fills the manifest's description
// of them.
func (c *Chain) writeRun(ctx context.Context, out auditchain.Writer, first, last int64, m *auditchain.Manifest, page func() error) error {
	next := first
	for next <= last {
		entries, err := c.opts.Store.AuditChainPage(ctx, next, last, exportPage)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if len(entries) == 0 {
			return fmt.Errorf("export: seq %d..%d are gone (retention removed them during the export)", next, last)
		}
		for _, e := range entries {
			if e.Seq != next {
				return fmt.Errorf("export: seq %d is gone (retention removed it during the export)", next)
			}
			if m.Count == 0 {
				m.FirstSeq, m.StartPrevHash = e.Seq, e.PrevHash
			}
			if err := out.Record(e); err != nil {
				return fmt.Errorf("export: write seq %d: %w", e.Seq, err)
			}
			m.Count++
			m.LastSeq, m.LastHash = e.Seq, e.Hash
			next++
		}
		if page != nil {
			if err := page(); err != nil {
				return fmt.Errorf("export: %w", err)
			}
		}
	}
	return nil
}
