package domain

import (
	"errors"
	"fmt"
)

// The removal of an entry changeflow did not write (docs/reviews.md,
// "Entries changeflow did not write"): an access review revoked a
// repository entry, which no grant owns. It is an ordinary removal — an
// operation of kind REVOKE, batched, checked, approved, merged and
// confirmed like a grant's — whose grant_operation_id is the operationId
// the entry carries in the file (maybe blank), so the batch builder's
// WithoutEntryOf removes exactly that entry and nothing else. It takes
// the subject's binding row on the target (one row per subject and
// target): a new row, or one at rest that a new request could reuse —
// so of two removals of the same (target, subject), or a removal and a
// new request, one wins the row.

// repoRemovalSuffix marks a repo entry removal's operationId; like a
// revocation's, a client's operationId may not end with it
// (IsRevocationID, checked at submission), so no request takes the id
// before the removal does.
const repoRemovalSuffix = "~remove"

// RepoRemovalID is the operationId of the removal review item itemID
// started: derived, so a second start of the same item (another
// instance, a retry after a crash) collides on uk_operation_operation_id.
func RepoRemovalID(itemID int64) string {
	return fmt.Sprintf("review-item-%d%s", itemID, repoRemovalSuffix)
}

// RepoRemovalAction is what starting a repo entry's removal does, by the
// subject's binding on the target.
type RepoRemovalAction int

// Repo removal actions.
const (
	// RepoRemovalInsert: no binding row yet; the removal inserts one,
	// REVOKING, owned by it.
	RepoRemovalInsert RepoRemovalAction = iota + 1
	// RepoRemovalTake: a row at rest (REJECTED, CLOSED, REVOKED); the
	// removal takes it, REVOKING, by a guarded update at the version read.
	RepoRemovalTake
	// RepoRemovalWait: a request of the subject is under way on the target
	// (its entry will replace the hand one, or it fails); nothing is
	// written, the review pass looks again.
	RepoRemovalWait
	// RepoRemovalNote: nothing to remove through this item — changeflow's
	// own grant holds the subject's access now, or a removal of the
	// subject's entry is already under way; the item gets Note instead.
	RepoRemovalNote
)

// RepoRemovalStart is how a repo entry's removal begins.
type RepoRemovalStart struct {
	Action RepoRemovalAction
	// Note is the item's note for RepoRemovalNote.
	Note string
	// Revocation is the removal's first step and history, as a grant's
	// revocation begins (StartRevocation), from the row's status; set for
	// Insert and Take.
	Revocation RevocationStart
}

// StartRepoRemoval decides how the removal of a repo entry begins, given
// the subject's binding on the target (exists false: no row) and whether
// the target batches.
func StartRepoRemoval(exists bool, status BindingStatus, batching bool) RepoRemovalStart {
	switch {
	case !exists:
		return RepoRemovalStart{Action: RepoRemovalInsert, Revocation: repoRevocation("", batching)}
	case status.Reappliable():
		return RepoRemovalStart{Action: RepoRemovalTake, Revocation: repoRevocation(status, batching)}
	case status == BindingValidated || status == BindingRenewing:
		return RepoRemovalStart{Action: RepoRemovalNote, Note: fmt.Sprintf(
			"changeflow's own grant holds this subject's access now (binding %s): the entry is no longer one changeflow did not write; review that grant instead", status)}
	case status == BindingRevoking || status == BindingRevokeFailed:
		return RepoRemovalStart{Action: RepoRemovalNote, Note: fmt.Sprintf(
			"a removal of this subject's entry is already under way (binding %s)", status)}
	}
	return RepoRemovalStart{Action: RepoRemovalWait}
}

// repoRevocation is StartRevocation's beginning for a row in from ("" for
// a new row).
func repoRevocation(from BindingStatus, batching bool) RevocationStart {
	s := StartRevocation("", RevokeOperator, batching, "")
	s.History[0].FromBinding = from
	s.History[0].Note = "removal of an entry changeflow did not write, revoked by an access review"
	return s
}

// CheckRepoRemovalStart checks StartRepoRemoval's moves against the tables.
func CheckRepoRemovalStart() error {
	errs := []error{CheckRevocationStart()}
	for _, from := range []BindingStatus{"", BindingRejected, BindingClosed, BindingRevoked} {
		errs = append(errs, CheckBinding(from, BindingRevoking))
	}
	return errors.Join(errs...)
}
