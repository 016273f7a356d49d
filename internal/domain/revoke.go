package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// OperationKind says what an operation does to its binding: a grant adds
// (or replaces) the subject's entry in the binding file, a revocation
// removes it. Stored by name in operation.kind (CHECK constraint).
//
// A revocation is its own operation — its own operationId, step history
// and MR work — on the same binding row as the grant it ends (I5). It
// goes through the grant's machinery: the same create/handle steps, the
// same batch rounds, the same deploy callback and reconciliation. Only
// its external layer differs: while a grant's binding moves through
// MR_CREATING … MERGED, VALIDATED, a revocation's shows REVOKING until
// the deployment confirms the removal (REVOKED) or a failure stops it
// (REVOKE_FAILED). The steps are written in the grant's vocabulary and
// mapped once, here (Binding), at the store edge where a binding status is
// written, so no step needs to know which kind it runs. A renewal is one
// more kind on a VALIDATED binding (OperationRenew).
type OperationKind string

// Operation kinds.
const (
	// OperationGrant: a request for access (every operation before
	// revocations existed).
	OperationGrant OperationKind = "GRANT"
	// OperationRevoke: the removal of a grant's entry.
	OperationRevoke OperationKind = "REVOKE"
	// OperationRenew: a grant that renews the grant in effect on the same
	// binding (docs/flows/lifecycle.md, "Renewal"). It writes the file exactly as
	// a grant does — its own entry replaces the subject's — so it is
	// stored as GRANT with grant_operation_id naming the grant it renews,
	// and read back as RENEW (the store derives it): the CHECK on
	// operation.kind stays as it is. Its binding shows RENEWING while it
	// runs, so the access in effect stays exactly as it was.
	OperationRenew OperationKind = "RENEW"
)

// OperationKinds lists every kind an operation reads back as (the API's
// kind enum; RENEW is derived, never stored).
var OperationKinds = []OperationKind{OperationGrant, OperationRevoke, OperationRenew}

// Valid reports whether k is a known kind.
func (k OperationKind) Valid() bool {
	return slices.Contains(OperationKinds, k)
}

// EndsWithoutEffect reports whether the grant-lifecycle status s, written
// by a step of an operation of kind k, ends a renewal without effect
// (rejected, withdrawn, closed): the binding goes back to the grant it
// renews, VALIDATED with its own expiry, as if the renewal had never been
// asked for. The store's writers hand the row back (grant_operation_id).
func (k OperationKind) EndsWithoutEffect(s BindingStatus) bool {
	return k == OperationRenew && (s == BindingRejected || s == BindingClosed)
}

// Binding is the binding status an operation of kind k shows for the
// grant-lifecycle status s a step wrote: the identity for a grant; for a
// revocation every in-flight status is REVOKING, every failure
// REVOKE_FAILED and "in effect" REVOKED. Statuses outside the grant's
// MR lifecycle are returned unchanged.
func (k OperationKind) Binding(s BindingStatus) BindingStatus {
	if k == OperationRenew {
		return renewBinding(s)
	}
	if k != OperationRevoke {
		return s
	}
	switch s {
	case BindingMRCreating, BindingMRCreated, BindingMerging, BindingMerged:
		return BindingRevoking
	case BindingCreateFailed, BindingHandleFailed:
		return BindingRevokeFailed
	case BindingValidated:
		return BindingRevoked
	}
	return s
}

// renewBinding is Binding for a renewal: the access in effect stays
// visible while the renewal runs (its failures included — a failed
// renewal changes nothing of the access), VALIDATED once it is deployed,
// and VALIDATED again — the grant's, EndsWithoutEffect — when it ends
// without effect.
func renewBinding(s BindingStatus) BindingStatus {
	switch s {
	case BindingApprovalSending, BindingApprovalSent, BindingMRCreating, BindingMRCreated,
		BindingMerging, BindingMerged, BindingCreateFailed, BindingHandleFailed:
		return BindingRenewing
	case BindingValidated, BindingRejected, BindingClosed:
		return BindingValidated
	}
	return s
}

// Step is the step an operation of kind k writes for the grant's
// "in effect" steps: a revocation's deploy callback is REVOKE_CALLED_BACK
// and its reconciliation REVOKE_RECONCILED; everything else is shared.
func (k OperationKind) Step(s StepStatus) StepStatus {
	if k != OperationRevoke {
		return s
	}
	switch s {
	case StepCalledBack:
		return StepRevokeCalledBack
	case StepReconciled:
		return StepRevokeReconciled
	}
	return s
}

// RevokeReason is why a revocation was made, stored in
// operation.revoke_reason (CHECK constraint) and used as the label of
// changeflow_revocations_total (a closed set).
type RevokeReason string

// Revocation reasons.
const (
	// RevokeExpired: the expiry scan found the grant's expiresAt passed
	// (database clock).
	RevokeExpired RevokeReason = "EXPIRED"
	// RevokeGivenBack: the owner gave the access back early.
	RevokeGivenBack RevokeReason = "GIVEN_BACK"
	// RevokeOperator: an operator revoked it (ops.write, audited).
	RevokeOperator RevokeReason = "OPERATOR"
)

// RevokeReasons lists every reason (metric labels, CHECK constraint).
var RevokeReasons = []RevokeReason{RevokeExpired, RevokeGivenBack, RevokeOperator}

// Valid reports whether r is a known reason.
func (r RevokeReason) Valid() bool {
	return r == RevokeExpired || r == RevokeGivenBack || r == RevokeOperator
}

// revocationSuffix marks a revocation's operationId. A client's
// operationId may not end with it (IsRevocationID, checked at submission),
// so no request can take a revocation's id before the revocation does —
// which would otherwise stop that access from ever being removed.
const revocationSuffix = "~revoke"

// IsRevocationID reports whether id has the shape of a removal's
// operationId, reserved for changeflow: a grant's revocation
// (RevocationID) or the removal of an entry changeflow did not write
// (RepoRemovalID).
func IsRevocationID(id string) bool {
	return strings.HasSuffix(id, revocationSuffix) || strings.HasSuffix(id, repoRemovalSuffix)
}

// maxOperationIDLen is operation.operation_id's length.
const maxOperationIDLen = 64

// RevocationID is the operationId of the revocation of grant
// grantOperationID: derived, so that every path that would create it —
// overlapping expiry scans on several instances, the owner's give-back
// racing the scan — names the same row and the operation's unique key
// lets exactly one create it. A grant has at most one revocation: once it
// is REVOKED, a new request is a new grant with its own operationId. An
// id too long for the column keeps a prefix and a hash of the whole.
func RevocationID(grantOperationID string) string {
	id := grantOperationID + revocationSuffix
	if utf8.RuneCountInString(id) <= maxOperationIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(grantOperationID))
	tail := "~" + hex.EncodeToString(sum[:6]) + revocationSuffix
	prefix := []rune(grantOperationID)[:maxOperationIDLen-utf8.RuneCountInString(tail)]
	return fmt.Sprintf("%s%s", string(prefix), tail)
}

// GrantView is the grant-lifecycle status that a revocation's (binding,
// step) stands for — the inverse of Binding, made exact by the step: the
// batch path moves its members between milestones named in the grant's
// vocabulary (CREATE_MR_CREATED with MR_CREATING, HANDLE_MERGED with
// MERGED, …), and a revocation member reads as the grant status of its
// step so that every such decision holds for both kinds unchanged. For a
// grant it is b.
func (k OperationKind) GrantView(b BindingStatus, s StepStatus) BindingStatus {
	if k == OperationRenew {
		if b != BindingRenewing {
			return b
		}
		switch {
		case s == StepCreateApprovalSubmitting:
			return BindingApprovalSending
		case s == StepCreateApprovalSubmitted:
			return BindingApprovalSent
		case s.Kind() == KindFailed && s.Phase() == int(StepCreateStarted)/100:
			return BindingCreateFailed
		case s.Kind() == KindFailed && s.Phase() == int(StepHandleStarted)/100:
			return BindingHandleFailed
		}
		return OperationRevoke.GrantView(BindingRevoking, s)
	}
	if k != OperationRevoke {
		return b
	}
	switch b {
	case BindingRevoked:
		return BindingValidated
	case BindingRevokeFailed:
		if s.Phase() == int(StepCreateStarted)/100 || s == StepCreatePipelinePending {
			return BindingCreateFailed
		}
		return BindingHandleFailed
	case BindingRevoking:
		switch {
		case s == StepCreateSucceeded:
			return BindingMRCreated
		case s == StepHandleMerged:
			return BindingMerged
		case s.Phase() == int(StepHandleStarted)/100,
			s == StepHandlePipelinePending, s == StepHandleMergeUnknown, s == StepHandleRebasePending:
			return BindingMerging
		}
		return BindingMRCreating
	}
	return b
}
