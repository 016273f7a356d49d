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
	comment = safeNoteText(comment, MaxApproverCommentRunes)
	if comment == "" {
		return ""
	}
	return approverCommentMark + strconv.Quote(comment)
}

// deciderMark introduces who decided, before any approver's comment.
const deciderMark = "; decided by "

var deciderRe = regexp.MustCompile(regexp.QuoteMeta(deciderMark) + `("(?:[^"\\]|\\.)*")(?:` + regexp.QuoteMeta(approverCommentMark) + `|$)`)

// MaxDeciderRunes bounds the approver's name changeflow keeps.
const MaxDeciderRunes = 128

// DeciderNote is the part of a decision's step-history note that records
// who decided, as the approval system names them ("" for nobody named);
// it goes before ApproverCommentNote. Like the comment it is the approval
// system's text: unsafe runes become spaces, it is clipped and quoted, so
// it can neither break the note nor forge the comment after it.
func DeciderNote(by string) string {
	by = safeNoteText(by, MaxDeciderRunes)
	if by == "" {
		return ""
	}
	return deciderMark + strconv.Quote(by)
}

// DeciderFrom returns who decided, as a decision's note records it
// (DeciderNote), and whether it records anyone.
func DeciderFrom(note string) (string, bool) {
	m := deciderRe.FindStringSubmatch(note)
	if m == nil {
		return "", false
	}
	by, err := strconv.Unquote(m[1])
	if err != nil {
		return "", false
	}
	return by, true
}

// safeNoteText is untrusted text made fit for a note: unsafe runes
// (UnsafeTextRune) become spaces, it is trimmed and clipped to max runes
// (an ellipsis marks the cut).
func safeNoteText(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || UnsafeTextRune(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
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
