package workflow

import (
	"changeflow/internal/bindingfile"
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
