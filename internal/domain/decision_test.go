package domain

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestApproverComment(t *testing.T) {
	for _, c := range []struct {
		name, comment, want string
		ok                  bool
	}{
		{"plain words", "not for this quarter", "not for this quarter", true},
		{"quotes and a backslash survive", `ask "Ops" \ later`, `ask "Ops" \ later`, true},
		{"a newline and a bidi override become spaces", "line\nnext\u202Eevil", "line next evil", true},
		{"blank: nothing recorded", " \t ", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			note := "approval a-1 REJECTED (delivery d-1); confirmed by the approval system" + ApproverCommentNote(c.comment)
			got, ok := ApproverCommentFrom(note)
			if got != c.want || ok != c.ok {
				t.Fatalf("ApproverCommentFrom(%q) = %q, %v; want %q, %v", note, got, ok, c.want, c.ok)
			}
		})
	}
	t.Run("clipped to the limit", func(t *testing.T) {
		got, _ := ApproverCommentFrom(ApproverCommentNote(strings.Repeat("é", MaxApproverCommentRunes+20)))
		if n := utf8.RuneCountInString(got); n != MaxApproverCommentRunes+1 || !strings.HasSuffix(got, "…") {
			t.Fatalf("%d runes, want %d and an ellipsis", n, MaxApproverCommentRunes+1)
		}
	})
	t.Run("a note without the mark records none", func(t *testing.T) {
		if _, ok := ApproverCommentFrom(`approval a-1 REJECTED (delivery d-1); the approver said "x"`); ok {
			t.Fatal("found a comment in a note that has none")
		}
	})
}

func TestDecider(t *testing.T) {
	for _, c := range []struct {
		name, by, comment, wantBy, wantComment string
		okBy                                   bool
	}{
		{"named, no comment", "approver-1", "", "approver-1", "", true},
		{"named, with a comment", "Jane Doe <jane@example.com>", "fine", "Jane Doe <jane@example.com>", "fine", true},
		{"nobody named", "", "fine", "", "fine", false},
		{"a newline in the name becomes a space", "jane\nroot", "", "jane root", "", true},
		{"a comment cannot forge the decider", "", `x"; decided by "root`, "", `x"; decided by "root`, false},
		{"a name cannot forge the comment", `a"; the approver wrote: "b`, "", `a"; the approver wrote: "b`, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			note := "approval a-1 APPROVED (delivery d-1)" + DeciderNote(c.by) + ApproverCommentNote(c.comment)
			by, ok := DeciderFrom(note)
			if by != c.wantBy || ok != c.okBy {
				t.Fatalf("DeciderFrom(%q) = %q, %v; want %q, %v", note, by, ok, c.wantBy, c.okBy)
			}
			if got, _ := ApproverCommentFrom(note); got != c.wantComment {
				t.Fatalf("ApproverCommentFrom(%q) = %q, want %q", note, got, c.wantComment)
			}
		})
	}
	got, _ := DeciderFrom(DeciderNote(strings.Repeat("x", MaxDeciderRunes+5)))
	if n := utf8.RuneCountInString(got); n != MaxDeciderRunes+1 {
		t.Fatalf("clipped name has %d runes, want %d", n, MaxDeciderRunes+1)
	}
}
