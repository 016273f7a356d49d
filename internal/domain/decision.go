package domain

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxApproverCommentRunes bounds the approver's comment changeflow keeps:
// it is the approval system's text, shown to the requester and operators.
const MaxApproverCommentRunes = 500

// approverCommentMark introduces the approver's comment at the end of a
// decision's step-history note.
const approverCommentMark = "; the approver wrote: "

var approverCommentRe = regexp.MustCompile(regexp.QuoteMeta(approverCommentMark) + `("(?:[^"\\]|\\.)*")$`)

// ApproverCommentNote is the suffix of a decision's step-history note that
// records the approver's comment ("" for none). The step history is the
// one record of a decision kept per request, so the comment lives there
// rather than in a column of its own: written once, by the workflow, in
// this form only, and read back by ApproverCommentFrom. Untrusted text:
// unsafe runes (UnsafeTextRune) become spaces and it is clipped to
// MaxApproverCommentRunes, then quoted, so it can neither break the note
// nor forge its end.
func ApproverCommentNote(comment string) string {
	comment = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || UnsafeTextRune(r) {
			return ' '
		}
		return r
	}, comment)
	comment = strings.TrimSpace(comment)
	if comment == "" {
		return ""
	}
	if utf8.RuneCountInString(comment) > MaxApproverCommentRunes {
		comment = string([]rune(comment)[:MaxApproverCommentRunes]) + "…"
	}
	return approverCommentMark + strconv.Quote(comment)
}

// ApproverCommentFrom returns the approver's comment a decision's note
// records (ApproverCommentNote), and whether it records one.
func ApproverCommentFrom(note string) (string, bool) {
	m := approverCommentRe.FindStringSubmatch(note)
	if m == nil {
		return "", false
	}
	c, err := strconv.Unquote(m[1])
	if err != nil {
		return "", false
	}
	return c, true
}
