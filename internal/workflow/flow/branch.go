package flow

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"changeflow/internal/store"
)

// BranchPrefix starts every branch the workflow creates.
const BranchPrefix = "changeflow/op-"

// TrailerOperation is the trailer key carrying an operationId in the MR
// description and the commit message, so a deploy callback, an operator
// or a later run can match the MR to its requests exactly.
const TrailerOperation = "Changeflow-Operation"

// BranchName is the deterministic branch of a single-request MR:
// "changeflow/op-<operationId>". Being derived from the operationId, every
// run of create_mr (a retry, a crash, a lost answer) looks up the same
// branch and MR before creating anything ("intent before side effect").
// Characters Git refuses in a ref name (and dots, to avoid "..", ".lock")
// become "-"; when that changed the id, a short hash of the original is
// appended, so two ids that clean up alike still get distinct branches.
func BranchName(operationID string) string {
	var b strings.Builder
	changed := false
	for _, r := range operationID {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
			changed = true
		}
	}
	name := b.String()
	if changed || name == "" {
		sum := sha256.Sum256([]byte(operationID))
		name += "-" + hex.EncodeToString(sum[:4])
	}
	return BranchPrefix + name
}

// Trailer is the "Changeflow-Operation: <id>" line.
func Trailer(operationID string) string { return TrailerOperation + ": " + operationID }

// HasTrailer reports whether text's trailer block (Trailers) carries
// operationID's trailer.
func HasTrailer(text, operationID string) bool {
	return slices.Contains(Trailers(text), operationID)
}

// MaxBranchAttempts bounds the branches one request (or batch) is built
// on: its deterministic branch, then a fresh one after each foreign head,
// foreign branch or foreign MR. Someone who pre-creates the next names
// cannot make changeflow loop: past the bound the request stops for a
// person with the reason (docs/flows/single.md, "The head check").
const MaxBranchAttempts = 5

// FreshPrefix starts a fresh branch: changeflow/r<n>/<name>, where name
// is the deterministic branch without "changeflow/". It is a namespace of
// its own, so it can never be an operationId's or a batch's deterministic
// branch, nor a directory of one (Git cannot hold refs a/b and a/b/c).
const FreshPrefix = "changeflow/r"

// FreshBranchName is the n-th branch (n ≥ 2) of what is built on
// deterministic first (BranchName, BatchBranchName); n ≤ 1 is first
// itself. Being derived from the attempt number, which is recorded on the
// row before the branch is used, a crash or a lost answer finds the same
// name again.
func FreshBranchName(first string, n int) string {
	if n <= 1 {
		return first
	}
	return FreshPrefix + strconv.Itoa(n) + "/" + strings.TrimPrefix(first, "changeflow/")
}

// BranchAttempt is which attempt branch is of first (1: first itself);
// ok is false when branch is neither first nor one of its fresh branches.
func BranchAttempt(branch, first string) (n int, ok bool) {
	if branch == first {
		return 1, true
	}
	rest, found := strings.CutPrefix(branch, FreshPrefix)
	if !found {
		return 0, false
	}
	num, name, found := strings.Cut(rest, "/")
	if !found || "changeflow/"+name != first {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 2 || strconv.Itoa(n) != num {
		return 0, false
	}
	return n, true
}

// SingleBranch is the branch a request's single-request MR is built on:
// the fresh branch recorded on the row after a foreign head, else the
// deterministic one.
func SingleBranch(op store.Operation) string {
	first := BranchName(op.OperationID)
	if _, ok := BranchAttempt(op.Branch, first); ok {
		return op.Branch
	}
	return first
}

// BatchBranchPrefix starts every batch branch; the stray sweep knows a
// batch MR by it (round_stray.go).
const BatchBranchPrefix = "changeflow/batch-"

// BatchBranchName is the deterministic source branch of a batch's MR.
func BatchBranchName(batchID int64) string {
	return BatchBranchPrefix + strconv.FormatInt(batchID, 10)
}
