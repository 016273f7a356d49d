package workflow

import (
	"changeflow/internal/bindingfile"
	"changeflow/internal/gitlab"
)

// The single-request steps (create_mr, rebuild, merge, regenerate) each
// read GitLab, choose, then write. The choices are here, as pure functions
// of what was read, so a table shows every case without a simulated world;
// the steps keep the calls around them.

// changedEntries are the entries of the binding file that differ between
// before and after: each removed or replaced entry of before (the removed
// one must be explained too) and each added or replacing entry of after.
// Empty: the files differ in nothing but formatting, or not at all.
func changedEntries(before, after bindingfile.File) []bindingfile.Entry {
	var changed []bindingfile.Entry
	for _, e := range before.Entries {
		if a, ok := after.Entry(e.Subject); !ok || !sameEntry(a, e) {
			changed = append(changed, e)
		}
	}
	for _, a := range after.Entries {
		if e, ok := before.Entry(a.Subject); !ok || !sameEntry(e, a) {
			changed = append(changed, a)
		}
	}
	return changed
}

// mergeAnswer is what merge does with GitLab's answer to the merge call.
type mergeAnswer int

const (
	// mergeMerged: the MR is merged; finish as merged.
	mergeMerged mergeAnswer = iota
	// mergeOtherState: GitLab answered without error but not merged; read
	// again at once.
	mergeOtherState
	// mergeHeadMoved: the head moved since the read (409); read again at
	// once and merge the new head.
	mergeHeadMoved
	// mergeTransient: a passing failure; retry later.
	mergeTransient
	// mergeFailed: a refusal no rebase helps; the request fails.
	mergeFailed
	// mergeRefused: not mergeable as is (405/406/422); a rebase may help.
	mergeRefused
)

// chooseMergeAnswer classifies the answer of the merge call: got and err.
func chooseMergeAnswer(got gitlab.MR, err error) mergeAnswer {
	switch {
	case err == nil && got.State == gitlab.MRStateMerged:
		return mergeMerged
	case err == nil:
		return mergeOtherState
	case gitlab.IsConflict(err):
		return mergeHeadMoved
	case transient(err):
		return mergeTransient
	case !gitlab.IsMethodNotAllowed(err) && !gitlab.IsMergeFailed(err):
		return mergeFailed
	}
	return mergeRefused
}
