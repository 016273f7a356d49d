package batch

import (
	"slices"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// TestPlanAbsentSettlement: the revocations with nothing to remove that
// are still as claimed leave the batch in one guarded transaction; one
// that moved since stays; a batch left with no member ends SUCCEEDED in
// the same transaction.
func TestPlanAbsentSettlement(t *testing.T) {
	b := store.Batch{ID: 9, Version: 4, Status: domain.BatchRunning}
	op := func(id string) store.Operation {
		return store.Operation{OperationID: id, Kind: domain.OperationRevoke, Step: int(domain.StepCreateAdmitted), Subject: "s-" + id, TargetKey: "t"}
	}
	claimed := func(id string) store.BatchMemberState {
		return store.BatchMemberState{OperationID: id, Step: int(domain.StepCreateAdmitted), Binding: domain.BindingMRCreating, Version: 2, BindingVersion: 3}
	}
	moved := func(id string) store.BatchMemberState {
		m := claimed(id)
		m.Step = int(domain.StepCreateStarted)
		return m
	}
	for _, c := range []struct {
		name    string
		ops     []store.Operation
		states  []store.BatchMemberState
		absent  map[string]string
		moved   []string // members settled, in order
		rest    []string
		settles bool // the batch ends SUCCEEDED in the same transaction
	}{
		{"one of two has nothing to remove", []store.Operation{op("a"), op("b")},
			[]store.BatchMemberState{claimed("a"), claimed("b")}, map[string]string{"a": "note a"}, []string{"a"}, []string{"b"}, false},
		{"every member has nothing to remove", []store.Operation{op("a"), op("b")},
			[]store.BatchMemberState{claimed("a"), claimed("b")}, map[string]string{"a": "note a", "b": "note b"}, []string{"a", "b"}, nil, true},
		{"a member that moved since is its mover's", []store.Operation{op("a"), op("b")},
			[]store.BatchMemberState{moved("a"), claimed("b")}, map[string]string{"a": "note a"}, nil, []string{"a", "b"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := planAbsentSettlement(b, c.ops, c.states, c.absent)
			var got []string
			for _, m := range plan.apply.Moves {
				if len(m.Rows) != 1 {
					t.Fatalf("one statement per member (its own note), got %d rows", len(m.Rows))
				}
				r := m.Rows[0]
				if m.FromStep != int(domain.StepCreateAdmitted) || m.ToStep != int(domain.StepRevokeAbsent) ||
					m.BindingFrom != domain.BindingRevoking || m.BindingTo != domain.BindingRevoked {
					t.Fatalf("move %+v: want CREATE_ADMITTED → REVOKE_ABSENT, REVOKING → REVOKED", m)
				}
				if m.Note != c.absent[r.OperationID] || m.Actor != "batch-9" || r.Version != 2 || r.BindingVersion != 3 {
					t.Fatalf("move %+v: note, actor or versions wrong", m)
				}
				got = append(got, r.OperationID)
			}
			if !slices.Equal(got, c.moved) {
				t.Fatalf("moved %v, want %v", got, c.moved)
			}
			var flipped []string
			for _, f := range plan.flips {
				flipped = append(flipped, f.OperationID)
			}
			if !slices.Equal(flipped, c.moved) {
				t.Fatalf("flips %v, want one per settled member %v", flipped, c.moved)
			}
			var rest []string
			for _, o := range plan.rest {
				rest = append(rest, o.OperationID)
			}
			if !slices.Equal(rest, c.rest) {
				t.Fatalf("rest %v, want %v", rest, c.rest)
			}
			p := plan.apply
			if c.settles {
				if p.SettleTo != domain.BatchSucceeded || p.From != domain.BatchRunning || p.Version != b.Version || p.OnlyIf != 0 {
					t.Fatalf("apply %+v: want the batch settled SUCCEEDED from RUNNING at version %d", p, b.Version)
				}
			} else if p.SettleTo != 0 || p.OnlyIf != domain.BatchRunning {
				t.Fatalf("apply %+v: want only the members moved, guarded on RUNNING", p)
			}
		})
	}
}
