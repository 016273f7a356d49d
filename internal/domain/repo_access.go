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
