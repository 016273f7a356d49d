package domain

import (
	"strings"
	"testing"
)

func TestStartRepoRemoval(t *testing.T) {
	for _, c := range []struct {
		name     string
		exists   bool
		status   BindingStatus
		batching bool
		action   RepoRemovalAction
		step     StepStatus
		noteHas  string
	}{
		{"no row: a new one, REVOKING", false, "", false, RepoRemovalInsert, StepRevokeStarted, ""},
		{"no row, batching target: admitted to the batch set", false, "", true, RepoRemovalInsert, StepCreateAdmitted, ""},
		{"a row revoked before is taken", true, BindingRevoked, true, RepoRemovalTake, StepCreateAdmitted, ""},
		{"a rejected request's row is taken", true, BindingRejected, false, RepoRemovalTake, StepRevokeStarted, ""},
		{"a closed request's row is taken", true, BindingClosed, false, RepoRemovalTake, StepRevokeStarted, ""},
		{"a request under way: wait for it", true, BindingApprovalSent, true, RepoRemovalWait, 0, ""},
		{"a request being merged: wait", true, BindingMerging, true, RepoRemovalWait, 0, ""},
		{"a failed request waiting for an operator: wait", true, BindingCreateFailed, true, RepoRemovalWait, 0, ""},
		{"changeflow's grant in effect: a note", true, BindingValidated, true, RepoRemovalNote, 0, "changeflow's own grant"},
		{"changeflow's grant being renewed: a note", true, BindingRenewing, true, RepoRemovalNote, 0, "changeflow's own grant"},
		{"a removal under way: a note", true, BindingRevoking, true, RepoRemovalNote, 0, "already under way"},
		{"a stopped removal: a note", true, BindingRevokeFailed, true, RepoRemovalNote, 0, "already under way"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := StartRepoRemoval(c.exists, c.status, c.batching)
			if got.Action != c.action {
				t.Fatalf("action = %d, want %d (%+v)", got.Action, c.action, got)
			}
			if c.noteHas != "" && !strings.Contains(got.Note, c.noteHas) {
				t.Fatalf("note %q lacks %q", got.Note, c.noteHas)
			}
			if c.step == 0 {
				if len(got.Revocation.History) != 0 {
					t.Fatalf("no removal starts, yet history %+v", got.Revocation.History)
				}
				return
			}
			r := got.Revocation
			if r.Step != c.step || r.Admit != c.batching || len(r.History) == 0 {
				t.Fatalf("revocation start = %+v", r)
			}
			first := r.History[0]
			if first.FromBinding != c.status || first.ToBinding != BindingRevoking || first.To != StepRevokeStarted {
				t.Fatalf("first move = %+v", first)
			}
			if err := CheckBinding(first.FromBinding, first.ToBinding); err != nil {
				t.Fatal(err)
			}
			for _, h := range r.History {
				if err := CheckStep(h.From, h.To); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if err := CheckRepoRemovalStart(); err != nil {
		t.Fatal(err)
	}
	if a, b := RepoRemovalID(7), RepoRemovalID(8); a == b || !strings.HasPrefix(a, "review-item-7") || len(a) > 64 {
		t.Fatalf("ids %q %q", a, b)
	}
	if !IsRevocationID(RepoRemovalID(7)) || IsRevocationID("review-item-7") {
		t.Fatal("a repo entry removal's id is reserved like a revocation's")
	}
}
