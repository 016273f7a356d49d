// Package filecheck checks the invariant every test that drives the
// workflow ends with: the config repository is the truth. Each target's
// binding file on the default branch holds exactly one entry per request
// the database says is in effect — its subject, its operationId, its
// expiry to the second — and no entry for any other request. A request
// that is VALIDATED while its entry is gone from the file (another commit
// reverted it), or an entry left behind by a request that failed, is a
// mismatch the database alone would never show.
//
// It is a package of its own, not a test helper, so the workflow's
// in-process tests and the multi-process tests of cmd/changeflow share one
// definition of "exact".
package filecheck

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Bindings is what Check reads from the database (*store.Store has it).
type Bindings interface {
	BindingGetByOperation(ctx context.Context, operationID string) (store.Binding, error)
	OperationGet(ctx context.Context, operationID string) (store.Operation, error)
}

// Check compares target's binding file content (as read from the default
// branch; empty when the file does not exist) with the database, over the
// requests operationIDs (every request the caller submitted, any target):
// a request whose binding is target's, currently owned by it and
// VALIDATED wants exactly its entry; every other entry in the file is
// extra. The error lists every difference.
//
// A grant that was revoked no longer owns its binding; its revocation
// (domain.RevocationID) does. While the removal is not merged — REVOKING
// before HANDLE_MERGED, or REVOKE_FAILED — the access is still granted and
// the grant's entry is wanted; once merged (REVOKING at HANDLE_MERGED, or
// REVOKED) it must be gone.
//
// A renewal owns its grant's binding while it runs (RENEWING): until it
// is merged the file holds the grant's entry, unchanged (the grant's
// operationId and expiry, which the binding still carries); once merged,
// the renewal's own entry with its new expiry — and after the deploy the
// binding is VALIDATED with that expiry. A renewal that ended without
// effect gave the row back to the grant, which wants its entry as
// before.
//
// foreign lists entries changeflow did not write (added by hand) that the
// file must still hold, unchanged: changeflow never removes them.
func Check(ctx context.Context, db Bindings, target string, content []byte, operationIDs []string, foreign ...bindingfile.Entry) error {
	f, err := bindingfile.Parse(content)
	if err != nil {
		return fmt.Errorf("binding file of %s: %w", target, err)
	}
	want, err := wantedEntries(ctx, db, target, operationIDs, foreign)
	if err != nil {
		return err
	}
	problems := differences(f.Entries, want)
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("binding file of %s on the default branch (%d entries, %d VALIDATED requests): %s",
		target, len(f.Entries), len(want), strings.Join(problems, "; "))
}

// wantedEntries is the file target must hold, by subject: every foreign
// entry, and the entry each of operationIDs wants (wantedEntry).
func wantedEntries(ctx context.Context, db Bindings, target string, operationIDs []string, foreign []bindingfile.Entry) (map[string]bindingfile.Entry, error) {
	want := map[string]bindingfile.Entry{} // subject → entry
	for _, e := range foreign {
		want[e.Subject] = entryOf(e.Subject, e.OperationID, e.ExpiresAt)
	}
	for _, id := range operationIDs {
		e, ok, err := wantedEntry(ctx, db, target, id)
		if err != nil {
			return nil, err
		}
		if ok {
			want[e.Subject] = e
		}
	}
	return want, nil
}

// wantedEntry is the entry request id wants in target's file; ok is false
// when it wants none there: never applied, removed, another target's, or
// its binding moved on to a newer request.
func wantedEntry(ctx context.Context, db Bindings, target, id string) (e bindingfile.Entry, ok bool, err error) {
	b, err := db.BindingGetByOperation(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		granted, err := stillGranted(ctx, db, id)
		if err != nil || granted.Subject == "" || granted.TargetKey != target {
			return bindingfile.Entry{}, false, err
		}
		return entryOf(granted.Subject, id, granted.ExpiresAt), true, nil
	}
	if err != nil {
		return bindingfile.Entry{}, false, fmt.Errorf("binding of %s: %w", id, err)
	}
	if b.TargetKey != target {
		return bindingfile.Entry{}, false, nil
	}
	switch b.Status {
	case domain.BindingRenewing:
		e, err := renewing(ctx, db, id, b)
		return e, err == nil, err
	case domain.BindingValidated:
		return entryOf(b.Subject, id, b.ExpiresAt), true, nil
	}
	return bindingfile.Entry{}, false, nil
}

// entryOf is an entry as the file holds it: the expiry in UTC, to the
// second.
func entryOf(subject, operationID string, expiresAt time.Time) bindingfile.Entry {
	return bindingfile.Entry{Subject: subject, OperationID: operationID, ExpiresAt: expiresAt.UTC().Truncate(time.Second)}
}

// differences lists, sorted, every way the file's entries differ from
// want: an extra entry, an entry of another operation or expiry, a
// missing entry.
func differences(entries []bindingfile.Entry, want map[string]bindingfile.Entry) []string {
	var problems []string
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.Subject] = true
		w, ok := want[e.Subject]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("extra entry %s/%s (no VALIDATED request of it)", e.Subject, e.OperationID))
		case e.OperationID != w.OperationID:
			problems = append(problems, fmt.Sprintf("entry of %s is operation %s, the VALIDATED request is %s", e.Subject, e.OperationID, w.OperationID))
		case !e.ExpiresAt.Equal(w.ExpiresAt):
			problems = append(problems, fmt.Sprintf("entry of %s/%s expires %s, the database says %s", e.Subject, e.OperationID,
				e.ExpiresAt.UTC().Format(time.RFC3339), w.ExpiresAt.Format(time.RFC3339)))
		}
	}
	for s, w := range want {
		if !seen[s] {
			problems = append(problems, fmt.Sprintf("missing entry %s/%s (VALIDATED in the database)", s, w.OperationID))
		}
	}
	slices.Sort(problems)
	return problems
}

// renewing is the entry the file must hold for binding b, owned by the
// renewal id: the grant's, until the renewal is merged; the renewal's own
// after.
func renewing(ctx context.Context, db Bindings, id string, b store.Binding) (bindingfile.Entry, error) {
	op, err := db.OperationGet(ctx, id)
	if err != nil {
		return bindingfile.Entry{}, fmt.Errorf("renewal %s: %w", id, err)
	}
	if op.GrantOperationID == "" {
		return bindingfile.Entry{}, fmt.Errorf("renewal %s owns a RENEWING binding but names no grant", id)
	}
	if domain.StepStatus(op.Step) == domain.StepHandleMerged {
		return bindingfile.Entry{Subject: b.Subject, OperationID: id, ExpiresAt: op.ExpiresAt.UTC().Truncate(time.Second)}, nil
	}
	return bindingfile.Entry{Subject: b.Subject, OperationID: op.GrantOperationID, ExpiresAt: b.ExpiresAt.UTC().Truncate(time.Second)}, nil
}

// stillGranted returns the binding of grant id when a revocation owns it
// and has not merged its removal yet (the grant's entry must still be on
// the default branch); the zero Binding otherwise.
func stillGranted(ctx context.Context, db Bindings, id string) (store.Binding, error) {
	rev := domain.RevocationID(id)
	b, err := db.BindingGetByOperation(ctx, rev)
	if errors.Is(err, domain.ErrNotFound) {
		return store.Binding{}, nil
	}
	if err != nil {
		return store.Binding{}, fmt.Errorf("binding of %s: %w", rev, err)
	}
	op, err := db.OperationGet(ctx, rev)
	if err != nil {
		return store.Binding{}, fmt.Errorf("revocation %s: %w", rev, err)
	}
	merged := domain.StepStatus(op.Step) == domain.StepHandleMerged
	if b.Status == domain.BindingRevokeFailed || b.Status == domain.BindingRevoking && !merged {
		return b, nil
	}
	return store.Binding{}, nil
}
