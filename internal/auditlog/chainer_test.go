package auditlog

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"testing"
	"time"

	"changeflow/internal/auditchain"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// fakeStore answers the chain's calls from scripted values.
type fakeStore struct {
	appends []error // AuditChainAppend's answers in turn (nil: 0 chained)
	chained []int
	calls   int
	entries []auditchain.Entry
	state   store.AuditChainState
	first   int64
	last    int64
}

func (f *fakeStore) AuditChainAppend(context.Context, store.AuditChainParams) (int, error) {
	i := f.calls
	f.calls++
	if i < len(f.appends) {
		return f.chained[i], f.appends[i]
	}
	return 0, nil
}

func (f *fakeStore) AuditChainRetain(context.Context, time.Duration, int) (int, error) { return 0, nil }

func (f *fakeStore) AuditChainState(context.Context) (store.AuditChainState, error) {
	return f.state, nil
}

func (f *fakeStore) AuditChainRange(context.Context, time.Time, time.Time) (int64, int64, error) {
	return f.first, f.last, nil
}

func (f *fakeStore) AuditChainPage(_ context.Context, from, to int64, limit int) ([]auditchain.Entry, error) {
	var out []auditchain.Entry
	for _, e := range f.entries {
		if e.Seq >= from && e.Seq <= to && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func chainOf(f *fakeStore, key ed25519.PrivateKey) *Chain {
	return New(Options{Store: f, Settings: func() Settings { return Settings{SigningKey: key} }})
}

// entries builds a valid run seq from..to after prev.
func entries(t *testing.T, from, to int64, prev string) []auditchain.Entry {
	t.Helper()
	var out []auditchain.Entry
	for seq := from; seq <= to; seq++ {
		rec, err := auditchain.Canonical(auditchain.Fields{"source": "audit", "sourceId": seq})
		if err != nil {
			t.Fatal(err)
		}
		e := auditchain.Entry{Seq: seq, PrevHash: prev, Hash: auditchain.Hash(prev, seq, rec), Record: rec}
		out, prev = append(out, e), e.Hash
	}
	return out
}

func TestChainAllTriesAgainWhenPreemptedAndStopsWhenNothingIsLeft(t *testing.T) {
	preempted := errors.Join(errors.New("move audit chain head"), domain.ErrPreempted)
	busy := errors.Join(errors.New("commit"), domain.ErrBusy)
	f := &fakeStore{appends: []error{nil, preempted, busy, nil, nil}, chained: []int{500, 0, 0, 7, 0}}
	n, err := chainOf(f, nil).ChainAll(t.Context())
	if err != nil || n != 507 || f.calls != 5 {
		t.Fatalf("chained %d in %d calls (%v), want 507 in 5", n, f.calls, err)
	}
	f = &fakeStore{appends: []error{errors.New("disk full")}, chained: []int{0}}
	if _, err := chainOf(f, nil).ChainAll(t.Context()); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("a failure is returned: %v", err)
	}
}

func TestExportStartsAfterTheAnchorAndStopsWithoutAManifestOnAGap(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{2}, 32))
	all := entries(t, 1, 6, auditchain.GenesisHash)
	// Retention removed 1..3; the range's first record is seq 2.
	f := &fakeStore{entries: all[3:], first: 2, last: 6,
		state: store.AuditChainState{HeadSeq: 6, HeadHash: all[5].Hash, AnchorSeq: 3, AnchorHash: all[2].Hash}}
	var out bytes.Buffer
	if err := chainOf(f, key).Export(t.Context(), &out, ExportParams{From: time.Unix(0, 0), To: time.Unix(10, 0), Format: "jsonl"}); err != nil {
		t.Fatal(err)
	}
	sum, err := auditchain.Verify(bytes.NewReader(out.Bytes()), key.Public().(ed25519.PublicKey))
	if err != nil || sum.FirstSeq != 4 || sum.Count != 3 {
		t.Fatalf("starts at the anchor + 1 and verifies: %+v %v\n%s", sum, err, out.String())
	}

	// seq 5 vanished mid-export: no manifest is written.
	f.entries = []auditchain.Entry{all[3], all[5]}
	out.Reset()
	err = chainOf(f, key).Export(t.Context(), &out, ExportParams{From: time.Unix(0, 0), To: time.Unix(10, 0), Format: "jsonl"})
	if err == nil || !strings.Contains(err.Error(), "seq 5 is gone") || strings.Contains(out.String(), "manifest") {
		t.Fatalf("a gap ends the export without a manifest: %v\n%s", err, out.String())
	}

	if err := chainOf(f, nil).Export(t.Context(), &out, ExportParams{Format: "jsonl"}); !errors.Is(err, ErrNoSigningKey) {
		t.Fatalf("no key: %v", err)
	}
}
