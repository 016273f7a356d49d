package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
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
