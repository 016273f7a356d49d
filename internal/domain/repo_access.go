package domain

import (
	"slices"
	"strings"
)

// The repository part of the access history (docs/api.md, "Access
// history"): entries of a binding file on the default branch that
// changeflow did not write get periods of their own (source "repo"),
// read from the file's commits. These are the pure rules; the periodic
// reader (package repoaccess) reads the commits and the store
// writes the periods.

// RepoEntry is one entry of a binding file as one commit shows it.
type RepoEntry struct {
	Subject     string
	OperationID string
}

// EntryOwner is the operation an entry's operationId names, as the
// store knows it.
type EntryOwner struct {
	Subject   string
	TargetKey string
	Kind      OperationKind
}

// EntryIsChangeflows reports whether the entry of target's file is one
// changeflow wrote: its operationId is a grant or renewal of changeflow's
// for the same subject and target — the rule by which changeflow removes
// only its own entries, and by which GET /ops/targets/unowned-expired
// tells the ones it does not own. owner is the operation the entry
// names (ok false: no operation of changeflow's has the id — a hand
// edit, an older release, or no id at all). An id copied by hand onto
// another subject or target, or a revocation's id, is not changeflow's.
func EntryIsChangeflows(e RepoEntry, target string, owner EntryOwner, ok bool) bool {
	return ok && e.OperationID != "" && owner.Subject == e.Subject && owner.TargetKey == target && owner.Kind != OperationRevoke
}

// RepoAccessChange is what one commit does to a subject's repo period.
type RepoAccessChange struct {
	Subject string
	// OperationID is the entry's operationId ("" when it has none).
	OperationID string
	// Opens: the commit added an entry changeflow did not write; else it
	// removed one (or replaced it by changeflow's own).
	Opens bool
}

// RepoAccessChanges compares one commit's version of a file (after) with
// the previous one (before) and returns, by subject, what it does to the
// repo periods; changeflow's own entries, which its records already
// account for, change nothing. owned tells changeflow's entries
// (EntryIsChangeflows). A subject's entry counts as its operationId: an
// entry whose expiry alone changed is the same entry, and one replaced
// under another operationId is the old one removed and the new one added
// — so a hand entry replaced by changeflow's ends the hand period, and
// changeflow's replaced by hand opens one. Files hold one entry per
// subject (bindingfile.Parse), so there is at most one change a subject,
// sorted by subject.
func RepoAccessChanges(before, after []RepoEntry, owned func(RepoEntry) bool) []RepoAccessChange {
	was := make(map[string]RepoEntry, len(before))
	for _, e := range before {
		was[e.Subject] = e
	}
	is := make(map[string]RepoEntry, len(after))
	for _, e := range after {
		is[e.Subject] = e
	}
	var out []RepoAccessChange
	for _, e := range after {
		old, had := was[e.Subject]
		if had && old.OperationID == e.OperationID {
			continue
		}
		hand, handBefore := !owned(e), had && !owned(old)
		switch {
		case hand && !handBefore:
			out = append(out, RepoAccessChange{Subject: e.Subject, OperationID: e.OperationID, Opens: true})
		case !hand && handBefore:
			out = append(out, RepoAccessChange{Subject: e.Subject, OperationID: old.OperationID})
		case hand && handBefore:
			// One hand entry replaced by another: the access lasts, the
			// period with it (its operationId is the first one's).
		}
	}
	for _, e := range before {
		if _, still := is[e.Subject]; !still && !owned(e) {
			out = append(out, RepoAccessChange{Subject: e.Subject, OperationID: e.OperationID})
		}
	}
	slices.SortFunc(out, func(a, b RepoAccessChange) int { return strings.Compare(a.Subject, b.Subject) })
	return out
}

// AccessDiscrepancyKind says how changeflow's records and the binding
// file on the default branch disagree.
type AccessDiscrepancyKind string

// The discrepancies.
const (
	// DiscrepancyOnMainNotInEffect: an entry changeflow wrote is on the
	// default branch, but its records say the access is not in effect (no
	// open period) — typically an entry it removed, put back by hand (a
	// revert). The access history then shows no access the file grants.
	DiscrepancyOnMainNotInEffect AccessDiscrepancyKind = "ON_MAIN_NOT_IN_EFFECT"
	// DiscrepancyInEffectNotOnMain: changeflow's records say the access is
	// in effect (an open period), but the default branch holds no entry of
	// changeflow's for the subject — removed or replaced by hand.
	DiscrepancyInEffectNotOnMain AccessDiscrepancyKind = "IN_EFFECT_NOT_ON_MAIN"
)

// AccessDiscrepancy is one disagreement, for a person to resolve.
type AccessDiscrepancy struct {
	Subject string
	// OperationID is the entry's operationId (ON_MAIN_NOT_IN_EFFECT) or
	// the open period's operation (IN_EFFECT_NOT_ON_MAIN).
	OperationID string
	Kind        AccessDiscrepancyKind
}

// OpenAccess is an open period of changeflow's: who, and the operation
// that opened it.
type OpenAccess struct {
	Subject     string
	OperationID string
}

// BindingAtRest reports whether a binding is in a state where the file
// and the records must agree: nothing of its is on its way to the
// default branch or to its deployment. A request still running (approval,
// MR, merge, a merged change not yet deployed, a renewal or removal under
// way) is not: its entry and its period legitimately differ until it
// settles.
func BindingAtRest(s BindingStatus) bool {
	switch s {
	case BindingValidated, BindingRevoked, BindingClosed, BindingRejected,
		BindingCreateFailed, BindingHandleFailed, BindingRevokeFailed:
		return true
	}
	return false
}

// AccessDiscrepancies compares target's file on the default branch
// (onMain; owned tells changeflow's entries, EntryIsChangeflows) with
// changeflow's open periods of the target (open), for the subjects whose
// binding is at rest (atRest; a subject never applied for is at rest).
// Entries changeflow did not write are not compared: they have repo
// periods of their own. Sorted by subject, then kind.
func AccessDiscrepancies(onMain []RepoEntry, owned func(RepoEntry) bool, open []OpenAccess, atRest func(subject string) bool) []AccessDiscrepancy {
	isOpen := make(map[string]bool, len(open))
	for _, p := range open {
		isOpen[p.Subject] = true
	}
	onMainOwned := map[string]bool{}
	var out []AccessDiscrepancy
	for _, e := range onMain {
		if !owned(e) {
			continue
		}
		onMainOwned[e.Subject] = true
		if !isOpen[e.Subject] && atRest(e.Subject) {
			out = append(out, AccessDiscrepancy{Subject: e.Subject, OperationID: e.OperationID, Kind: DiscrepancyOnMainNotInEffect})
		}
	}
	for _, p := range open {
		if !onMainOwned[p.Subject] && atRest(p.Subject) {
			out = append(out, AccessDiscrepancy{Subject: p.Subject, OperationID: p.OperationID, Kind: DiscrepancyInEffectNotOnMain})
		}
	}
	slices.SortFunc(out, func(a, b AccessDiscrepancy) int {
		if c := strings.Compare(a.Subject, b.Subject); c != 0 {
			return c
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
	return out
}

// TargetDiscrepancy is an AccessDiscrepancy with the target whose file
// it is in: the by-subject answer spans targets.
type TargetDiscrepancy struct {
	TargetKey string
	AccessDiscrepancy
}

// SubjectOnly keeps, of one target's entries on the default branch and
// changeflow's open periods, those of subject. AccessDiscrepancies
// compares each subject on its own (an entry and a period meet only
// when their subjects are equal), so comparing what SubjectOnly keeps
// gives exactly subject's part of the whole comparison — at the cost of
// one subject's ownership and binding reads instead of the whole file's.
func SubjectOnly(subject string, onMain []RepoEntry, open []OpenAccess) ([]RepoEntry, []OpenAccess) {
	var es []RepoEntry
	for _, e := range onMain {
		if e.Subject == subject {
			es = append(es, e)
		}
	}
	var ps []OpenAccess
	for _, p := range open {
		if p.Subject == subject {
			ps = append(ps, p)
		}
	}
	return es, ps
}

// SortTargetDiscrepancies orders a by-subject answer by target, then as
// AccessDiscrepancies orders one target's (subject, then kind).
func SortTargetDiscrepancies(ds []TargetDiscrepancy) {
	slices.SortStableFunc(ds, func(a, b TargetDiscrepancy) int {
		if c := strings.Compare(a.TargetKey, b.TargetKey); c != 0 {
			return c
		}
		if c := strings.Compare(a.Subject, b.Subject); c != 0 {
			return c
		}
		return strings.Compare(string(a.Kind), string(b.Kind))
	})
}
