package domain

import (
	"reflect"
	"testing"
)

func TestEntryIsChangeflows(t *testing.T) {
	e := RepoEntry{Subject: "alice", OperationID: "op-1"}
	grant := EntryOwner{Subject: "alice", TargetKey: "t", Kind: OperationGrant}
	tests := []struct {
		name  string
		e     RepoEntry
		owner EntryOwner
		ok    bool
		want  bool
	}{
		{"its grant", e, grant, true, true},
		{"its renewal", e, EntryOwner{Subject: "alice", TargetKey: "t", Kind: OperationRenew}, true, true},
		{"no such operation", e, EntryOwner{}, false, false},
		{"no operationId at all", RepoEntry{Subject: "alice"}, grant, true, false},
		{"another subject's id", RepoEntry{Subject: "bob", OperationID: "op-1"}, grant, true, false},
		{"another target's id", e, EntryOwner{Subject: "alice", TargetKey: "u", Kind: OperationGrant}, true, false},
		{"a revocation's id", e, EntryOwner{Subject: "alice", TargetKey: "t", Kind: OperationRevoke}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EntryIsChangeflows(tt.e, "t", tt.owner, tt.ok); got != tt.want {
				t.Fatalf("EntryIsChangeflows = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRepoAccessChanges(t *testing.T) {
	// Operation ids starting "cf-" are changeflow's.
	owned := func(e RepoEntry) bool { return len(e.OperationID) > 3 && e.OperationID[:3] == "cf-" }
	en := func(s, op string) RepoEntry { return RepoEntry{Subject: s, OperationID: op} }
	open := func(s, op string) RepoAccessChange { return RepoAccessChange{Subject: s, OperationID: op, Opens: true} }
	end := func(s, op string) RepoAccessChange { return RepoAccessChange{Subject: s, OperationID: op} }
	tests := []struct {
		name          string
		before, after []RepoEntry
		want          []RepoAccessChange
	}{
		{"nothing to nothing", nil, nil, nil},
		{"changeflow adds its entry", nil, []RepoEntry{en("alice", "cf-1")}, nil},
		{"changeflow removes its entry", []RepoEntry{en("alice", "cf-1")}, nil, nil},
		{"a renewal replaces changeflow's entry", []RepoEntry{en("alice", "cf-1")}, []RepoEntry{en("alice", "cf-2")}, nil},
		{"a hand entry added", nil, []RepoEntry{en("bob", "hand")}, []RepoAccessChange{open("bob", "hand")}},
		{"a hand entry with no id", nil, []RepoEntry{en("bob", "")}, []RepoAccessChange{open("bob", "")}},
		{"a hand entry removed", []RepoEntry{en("bob", "hand")}, nil, []RepoAccessChange{end("bob", "hand")}},
		{"a hand entry unchanged (its expiry edited)", []RepoEntry{en("bob", "hand")}, []RepoEntry{en("bob", "hand")}, nil},
		{"a hand entry replaced by another: the access lasts", []RepoEntry{en("bob", "h1")}, []RepoEntry{en("bob", "h2")}, nil},
		{"changeflow's entry replaced by hand", []RepoEntry{en("alice", "cf-1")}, []RepoEntry{en("alice", "hand")}, []RepoAccessChange{open("alice", "hand")}},
		{"a hand entry replaced by changeflow's", []RepoEntry{en("alice", "hand")}, []RepoEntry{en("alice", "cf-1")}, []RepoAccessChange{end("alice", "hand")}},
		{"several at once, by subject", []RepoEntry{en("carol", "h3"), en("dan", "cf-4")},
			[]RepoEntry{en("alice", "h1"), en("bob", "cf-2"), en("dan", "cf-4")},
			[]RepoAccessChange{open("alice", "h1"), end("carol", "h3")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RepoAccessChanges(tt.before, tt.after, owned); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("RepoAccessChanges = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAccessDiscrepancies(t *testing.T) {
	owned := func(e RepoEntry) bool { return len(e.OperationID) > 3 && e.OperationID[:3] == "cf-" }
	en := func(s, op string) RepoEntry { return RepoEntry{Subject: s, OperationID: op} }
	op := func(s, id string) OpenAccess { return OpenAccess{Subject: s, OperationID: id} }
	rest := func(busy ...string) func(string) bool {
		return func(s string) bool {
			for _, b := range busy {
				if b == s {
					return false
				}
			}
			return true
		}
	}
	onMain := func(s, id string) AccessDiscrepancy {
		return AccessDiscrepancy{Subject: s, OperationID: id, Kind: DiscrepancyOnMainNotInEffect}
	}
	notOnMain := func(s, id string) AccessDiscrepancy {
		return AccessDiscrepancy{Subject: s, OperationID: id, Kind: DiscrepancyInEffectNotOnMain}
	}
	tests := []struct {
		name   string
		main   []RepoEntry
		open   []OpenAccess
		atRest func(string) bool
		want   []AccessDiscrepancy
	}{
		{"agreement", []RepoEntry{en("amy", "cf-1")}, []OpenAccess{op("amy", "cf-1")}, rest(), nil},
		{"nothing anywhere", nil, nil, rest(), nil},
		{"a removed entry put back by hand", []RepoEntry{en("amy", "cf-1")}, nil, rest(), []AccessDiscrepancy{onMain("amy", "cf-1")}},
		{"an entry removed by hand", nil, []OpenAccess{op("amy", "cf-1")}, rest(), []AccessDiscrepancy{notOnMain("amy", "cf-1")}},
		{"replaced by a hand entry: changeflow's is not on main", []RepoEntry{en("amy", "hand")}, []OpenAccess{op("amy", "cf-1")}, rest(),
			[]AccessDiscrepancy{notOnMain("amy", "cf-1")}},
		{"hand entries are not compared", []RepoEntry{en("bob", "hand"), en("eve", "")}, nil, rest(), nil},
		{"a merged grant not yet deployed", []RepoEntry{en("amy", "cf-1")}, nil, rest("amy"), nil},
		{"a merged removal not yet deployed", nil, []OpenAccess{op("amy", "cf-1")}, rest("amy"), nil},
		{"a renewal in effect: its own entry and period", []RepoEntry{en("amy", "cf-2")}, []OpenAccess{op("amy", "cf-2")}, rest(), nil},
		{"several, by subject", []RepoEntry{en("cat", "cf-3"), en("amy", "cf-1")}, []OpenAccess{op("bob", "cf-2"), op("amy", "cf-1")}, rest(),
			[]AccessDiscrepancy{notOnMain("bob", "cf-2"), onMain("cat", "cf-3")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AccessDiscrepancies(tt.main, owned, tt.open, tt.atRest); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("AccessDiscrepancies = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestBindingAtRest(t *testing.T) {
	busy := map[BindingStatus]bool{BindingApprovalSending: true, BindingApprovalSent: true, BindingMRCreating: true, BindingMRCreated: true,
		BindingMerging: true, BindingMerged: true, BindingRevoking: true, BindingRenewing: true}
	for _, s := range BindingStatuses {
		if got := BindingAtRest(s); got == busy[s] {
			t.Errorf("BindingAtRest(%s) = %v", s, got)
		}
	}
}

// TestSubjectOnlyGivesTheSubjectsPartOfTheComparison: for each file and
// set of open periods, comparing what SubjectOnly keeps for a subject
// gives exactly that subject's discrepancies of the whole comparison —
// the by-subject answer's shortcut loses and adds nothing.
func TestSubjectOnlyGivesTheSubjectsPartOfTheComparison(t *testing.T) {
	owned := func(e RepoEntry) bool { return len(e.OperationID) > 3 && e.OperationID[:3] == "cf-" }
	en := func(s, op string) RepoEntry { return RepoEntry{Subject: s, OperationID: op} }
	op := func(s, id string) OpenAccess { return OpenAccess{Subject: s, OperationID: id} }
	atRest := func(s string) bool { return s != "busy" }
	tests := []struct {
		name    string
		subject string
		main    []RepoEntry
		open    []OpenAccess
		want    []AccessDiscrepancy
	}{
		{"a put-back entry among others", "amy",
			[]RepoEntry{en("amy", "cf-1"), en("bob", "cf-2"), en("cat", "hand")},
			[]OpenAccess{op("bob", "cf-2"), op("dan", "cf-4")},
			[]AccessDiscrepancy{{Subject: "amy", OperationID: "cf-1", Kind: DiscrepancyOnMainNotInEffect}}},
		{"an entry and a period of the subject meet whatever their ids", "amy",
			[]RepoEntry{en("amy", "cf-1"), en("bob", "cf-2")}, []OpenAccess{op("amy", "cf-3")},
			nil},
		{"agreement for the subject, not for others", "bob",
			[]RepoEntry{en("amy", "cf-1"), en("bob", "cf-2")}, []OpenAccess{op("bob", "cf-2"), op("dan", "cf-4")}, nil},
		{"only a period, removed by hand", "dan",
			[]RepoEntry{en("amy", "cf-1")}, []OpenAccess{op("dan", "cf-4")},
			[]AccessDiscrepancy{{Subject: "dan", OperationID: "cf-4", Kind: DiscrepancyInEffectNotOnMain}}},
		{"a hand entry of the subject is not compared", "cat", []RepoEntry{en("cat", "hand")}, nil, nil},
		{"not at rest", "busy", []RepoEntry{en("busy", "cf-5")}, nil, nil},
		{"absent from both", "zoe", []RepoEntry{en("amy", "cf-1")}, []OpenAccess{op("dan", "cf-4")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es, ps := SubjectOnly(tt.subject, tt.main, tt.open)
			got := AccessDiscrepancies(es, owned, ps, atRest)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("compared alone = %+v, want %+v", got, tt.want)
			}
			var whole []AccessDiscrepancy
			for _, d := range AccessDiscrepancies(tt.main, owned, tt.open, atRest) {
				if d.Subject == tt.subject {
					whole = append(whole, d)
				}
			}
			if !reflect.DeepEqual(got, whole) {
				t.Fatalf("compared alone = %+v, the whole comparison's part = %+v", got, whole)
			}
		})
	}
}

func TestSortTargetDiscrepancies(t *testing.T) {
	d := func(target, subject string, k AccessDiscrepancyKind) TargetDiscrepancy {
		return TargetDiscrepancy{TargetKey: target, AccessDiscrepancy: AccessDiscrepancy{Subject: subject, Kind: k}}
	}
	got := []TargetDiscrepancy{
		d("t2", "amy", DiscrepancyOnMainNotInEffect),
		d("t1", "amy", DiscrepancyOnMainNotInEffect),
		d("t1", "amy", DiscrepancyInEffectNotOnMain),
	}
	SortTargetDiscrepancies(got)
	want := []TargetDiscrepancy{
		d("t1", "amy", DiscrepancyInEffectNotOnMain),
		d("t1", "amy", DiscrepancyOnMainNotInEffect),
		d("t2", "amy", DiscrepancyOnMainNotInEffect),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sorted = %+v, want %+v", got, want)
	}
}
