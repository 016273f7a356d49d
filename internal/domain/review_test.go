package domain

import (
	"strings"
	"testing"
	"time"
)

func TestMayDecide(t *testing.T) {
	owners := []string{"olivia", "Oscar"}
	for _, tc := range []struct {
		name    string
		rv      Reviewer
		subject string
		want    ReviewRefusal
	}{
		{"owner decides another's access", Reviewer{Account: "olivia"}, "alice", ReviewAllowed},
		{"owner matched in any case", Reviewer{Account: "oscar"}, "alice", ReviewAllowed},
		{"owner's own access", Reviewer{Account: "olivia"}, "olivia", ReviewOwnAccess},
		{"own access in another case", Reviewer{Account: "olivia"}, "Olivia", ReviewOwnAccess},
		{"operator acts for the owners", Reviewer{Account: "adam", Operator: true}, "alice", ReviewAllowed},
		{"operator's own access", Reviewer{Account: "adam", Operator: true}, "adam", ReviewOwnAccess},
		{"neither owner nor operator", Reviewer{Account: "bob"}, "alice", ReviewNotReviewer},
		{"no account", Reviewer{Operator: true}, "alice", ReviewOwnAccess},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MayDecide(tc.rv, owners, tc.subject); got != tc.want {
				t.Fatalf("MayDecide = %d, want %d", got, tc.want)
			}
		})
	}
	// A target without owners: operators only.
	if got := MayDecide(Reviewer{Account: "olivia"}, nil, "alice"); got != ReviewNotReviewer {
		t.Fatalf("no owners, not an operator: %d", got)
	}
	if got := MayDecide(Reviewer{Account: "adam", Operator: true}, nil, "alice"); got != ReviewAllowed {
		t.Fatalf("no owners, operator: %d", got)
	}
	for _, r := range []ReviewRefusal{ReviewOwnAccess, ReviewNotReviewer} {
		if r.Message() == "" {
			t.Fatalf("refusal %d has no words", r)
		}
	}
}

func TestParseReviewDecision(t *testing.T) {
	for in, want := range map[string]ReviewDecision{"keep": ReviewKeep, " Revoke ": ReviewRevoke, "KEEP": ReviewKeep} {
		if got, ok := ParseReviewDecision(in); !ok || got != want {
			t.Fatalf("%q → %q %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "remove", "keep!", "yes"} {
		if _, ok := ParseReviewDecision(in); ok {
			t.Fatalf("%q accepted", in)
		}
	}
}

func TestReviewOpenProblem(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		due  time.Time
		want string
	}{
		{time.Time{}, "is required"},
		{now, "must be in the future"},
		{now.Add(-time.Second), "must be in the future"},
		{now.Add(time.Second), ""},
	} {
		got := ReviewOpenProblem(now, tc.due)
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Fatalf("due %v: %q, want %q", tc.due, got, tc.want)
		}
	}
}

func TestReviewAtDue(t *testing.T) {
	for _, tc := range []struct {
		item    ReviewDecision
		def     ReviewDecision
		want    ReviewDecision
		applied bool
	}{
		{"", ReviewRevoke, ReviewRevoke, true},
		{"", ReviewKeep, ReviewKeep, true},
		{ReviewKeep, ReviewRevoke, ReviewKeep, false},
		{ReviewRevoke, ReviewKeep, ReviewRevoke, false},
	} {
		d, applied := ReviewAtDue(ReviewItemState{Decision: tc.item}, tc.def)
		if d != tc.want || applied != tc.applied {
			t.Fatalf("%q default %q → %q %v", tc.item, tc.def, d, applied)
		}
	}
}

func TestReviewScheduleDue(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name  string
		every time.Duration
		last  time.Time
		open  bool
		want  bool
	}{
		{"no schedule", 0, time.Time{}, false, false},
		{"never reviewed", 90 * day, time.Time{}, false, true},
		{"one open", 90 * day, time.Time{}, true, false},
		{"last too recent", 90 * day, now.Add(-89 * day), false, false},
		{"exactly every ago", 90 * day, now.Add(-90 * day), false, true},
		{"older", 90 * day, now.Add(-100 * day), false, true},
		{"older but one open", 90 * day, now.Add(-100 * day), true, false},
	} {
		if got := ReviewScheduleDue(tc.every, tc.last, tc.open, now); got != tc.want {
			t.Fatalf("%s: %v", tc.name, got)
		}
	}
}

func TestReviewRevokeText(t *testing.T) {
	got := ReviewRevokeText(7, "db", "olivia", false, " left the team ")
	if got != "access review 7 of db: revoked by olivia (left the team)" {
		t.Fatalf("%q", got)
	}
	if got := ReviewRevokeText(7, "db", "review:7", true, ""); !strings.Contains(got, "default") || !strings.Contains(got, "review 7") {
		t.Fatalf("%q", got)
	}
	if ReviewActor(7) != "review:7" {
		t.Fatal(ReviewActor(7))
	}
}
