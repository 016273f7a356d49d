package store

import (
	"context"
	"database/sql"
)

// Test-only access to the claim's and the settlement's hooks, for the
// external store_test package.

// ClaimAfterRead returns p with a hook that runs between the claim's read
// of the waiting set and its guarded UPDATE, on the open transaction.
func ClaimAfterRead(p BatchClaimParams, fn func(ctx context.Context, tx *sql.Tx, batchID int64, read []BatchMember) error) BatchClaimParams {
	p.afterRead = fn
	return p
}

// ClaimLockingRead returns p with the claim's read turned into
// "… FOR UPDATE", the variant the claim avoids.
func ClaimLockingRead(p BatchClaimParams) BatchClaimParams {
	p.lockingRead = true
	return p
}

// ApplyBeforeCommit returns p with a hook that runs after BatchApply's
// writes (a settlement's guarded write, release, moves, re-admissions),
// before its commit.
func ApplyBeforeCommit(p BatchApplyParams, fn func(ctx context.Context, tx *sql.Tx) error) BatchApplyParams {
	p.beforeCommit = fn
	return p
}
