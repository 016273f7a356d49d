package flow

import (
	"fmt"
	"strings"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// What changeflow writes into GitLab on a caller's behalf. GitLab renders
// MR descriptions as Markdown and acts on some of it — a line starting
// with "/" is a quick action, "@all" notifies everyone, "![](…)" loads an
// image from anywhere — and changeflow's own trailers match MRs to
// requests. So the one free text a caller gives (the reason) is written as
// an inline code span, where GitLab renders and acts on nothing, and the
// trailers are written only here, in a block at the very end that
// Trailers alone reads.

// InertCode renders s as a Markdown code span: a backtick fence longer
// than any run of backticks in s, with one space inside each end (which
// CommonMark strips, so s shows exactly, even when it starts or ends with
// a backtick). Runes that may not appear in a reason (domain.UnsafeTextRune)
// become U+FFFD first: submissions refuse them, but rows stored before
// that rule may hold them, and a newline would end the span's line.
func InertCode(s string) string {
	s = strings.Map(func(r rune) rune {
		if domain.UnsafeTextRune(r) {
			return '\uFFFD'
		}
		return r
	}, s)
	fence := strings.Repeat("`", longestRun(s, '`')+1)
	return fence + " " + s + " " + fence
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// CommitTrailers appends the operations' trailers to a commit message as
// its last paragraph (git's trailer convention; commit messages are not
// acted on like descriptions).
func CommitTrailers(message string, operationIDs ...string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(message, "\n"))
	b.WriteString("\n\n")
	for _, id := range operationIDs {
		b.WriteString(Trailer(id) + "\n")
	}
	return b.String()
}

// DescriptionTrailers appends the operations' trailers to an MR
// description as a fenced code block at its end: an operationId is
// printable text the caller chose ("@all" is one), so in a description it
// must be as inert as the reason. The fence is longer than any backtick
// run in the ids, so no id can close it.
func DescriptionTrailers(description string, operationIDs ...string) string {
	longest := 0
	for _, id := range operationIDs {
		longest = max(longest, longestRun(id, '`'))
	}
	fence := strings.Repeat("`", max(3, longest+1))
	var b strings.Builder
	b.WriteString(strings.TrimRight(description, "\n"))
	b.WriteString("\n\n" + fence + "\n")
	for _, id := range operationIDs {
		b.WriteString(Trailer(id) + "\n")
	}
	b.WriteString(fence + "\n")
	return b.String()
}

// Trailers returns the operationIds of text's trailer block: its last
// paragraph, or, when text ends with a fenced code block, that block's
// lines. Trailer-shaped lines anywhere else — in a reason written before
// reasons were one line, in a paragraph a person added above — are not
// trailers.
func Trailers(text string) []string {
	lines := strings.Split(strings.TrimRight(text, "\n\r\t "), "\n")
	end := len(lines)
	start := end
	if last := strings.TrimSpace(lines[end-1]); len(last) >= 3 && strings.Trim(last, "`") == "" {
		// A fenced block: back to the line that opened it.
		fence := last
		for i := end - 2; i >= 0; i-- {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), fence) {
				start, end = i+1, end-1
				break
			}
		}
		if start == len(lines) {
			return nil // an unopened fence is no trailer block
		}
	} else {
		for start > 0 && strings.TrimSpace(lines[start-1]) != "" {
			start--
		}
	}
	var ids []string
	for _, line := range lines[start:end] {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if ok && k == TrailerOperation && v != "" {
			ids = append(ids, v)
		}
	}
	return ids
}

func CommitMessage(op store.Operation) string {
	return fmt.Sprintf("changeflow: bind %s to %s until %s", op.Subject, op.TargetKey, op.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))
}

// MRDescription is a single-request MR's description: who asked, their
// reason as an inert code span (mrtext.go: no mention, image, link, quick
// action or trailer can form from it), the approval's id when the request
// has one (approve-first: approved before its MR; also inert), and the
// trailer block.
func MRDescription(op store.Operation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Requested by %s through changeflow.\n", op.Subject)
	if op.Reason != "" {
		fmt.Fprintf(&b, "\nReason: %s\n", InertCode(op.Reason))
	}
	if op.ApprovalID != "" {
		fmt.Fprintf(&b, "\nApproval: %s\n", InertCode(op.ApprovalID))
	}
	return DescriptionTrailers(b.String(), op.OperationID)
}

func RemovalMessage(op store.Operation) string {
	return fmt.Sprintf("changeflow: remove %s from %s (%s)", op.Subject, op.TargetKey, RevokeWhy(op.RevokeReason))
}

// RevokeWhy is a revocation reason in words.
func RevokeWhy(r domain.RevokeReason) string {
	switch r {
	case domain.RevokeExpired:
		return "expired"
	case domain.RevokeGivenBack:
		return "given back"
	case domain.RevokeOperator:
		return "revoked by an operator"
	}
	return "revoked"
}

// RemovalDescription is a single-request removal MR's description; an
// operator's reason is caller text and appears as an inert code span. The
// removal of an entry changeflow did not write (an access review's,
// ReviewItemID set) names the entry's own operationId instead of a grant.
func RemovalDescription(op store.Operation) string {
	var b strings.Builder
	if op.ReviewItemID != 0 {
		fmt.Fprintf(&b, "Removes the access of %s to %s: an entry changeflow did not write (operationId %s in the file), revoked by an access review.\n",
			op.Subject, op.TargetKey, InertCode(op.GrantOperationID))
	} else {
		fmt.Fprintf(&b, "Removes the access of %s to %s granted by request %s: %s.\n", op.Subject, op.TargetKey,
			InertCode(op.GrantOperationID), RevokeWhy(op.RevokeReason))
	}
	if op.RevokeReason == domain.RevokeOperator && op.Reason != "" {
		fmt.Fprintf(&b, "\nReason: %s\n", InertCode(op.Reason))
	}
	return DescriptionTrailers(b.String(), op.OperationID)
}

// BatchText is the title, commit message and MR description of a batch:
// one Changeflow-Operation trailer per member (mrtext.go), plain at the end
// of the commit message, in the fenced trailer block of the description.
// The commit message's member lines carry no caller text; the
// description's add each member's reason and approval id as inert code
// spans (mrtext.go). The operationIds go in the trailer block only.
func BatchText(batchID int64, ops []store.Operation) (title, message, description string) {
	title = fmt.Sprintf("changeflow: batch %d (%d request(s))", batchID, len(ops))
	var b, d strings.Builder
	fmt.Fprintf(&b, "Batch %d of changeflow:\n\n", batchID)
	fmt.Fprintf(&d, "Batch %d of changeflow:\n\n", batchID)
	ids := make([]string, 0, len(ops))
	for _, op := range ops {
		var line string
		if op.Kind == domain.OperationRevoke {
			line = fmt.Sprintf("- remove %s from %s (%s)", op.Subject, op.TargetKey, RevokeWhy(op.RevokeReason))
		} else {
			line = fmt.Sprintf("- bind %s to %s until %s", op.Subject, op.TargetKey, op.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))
		}
		b.WriteString(line + "\n")
		d.WriteString(line)
		if op.Reason != "" && (op.Kind != domain.OperationRevoke || op.RevokeReason == domain.RevokeOperator) {
			d.WriteString("; reason: " + InertCode(op.Reason))
		}
		if op.ApprovalID != "" {
			d.WriteString("; approval: " + InertCode(op.ApprovalID))
		}
		d.WriteString("\n")
		ids = append(ids, op.OperationID)
	}
	return title, CommitTrailers(title+"\n\n"+b.String(), ids...), DescriptionTrailers(d.String(), ids...)
}
