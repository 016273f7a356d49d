package store

// Test-only hooks of the transition and binding operations, for the
// external store_test package.

// BindingApplyAfterRead returns p with fn run between each attempt's read
// and write, so a test can make a concurrent writer win the race.
func BindingApplyAfterRead(p BindingApplyParams, fn func()) BindingApplyParams {
	p.afterRead = fn
	return p
}

// TransitionManyBeforeCommit returns p with fn run after the transition's
// writes, on its still open transaction.
func TransitionManyBeforeCommit(p TransitionManyParams, fn func()) TransitionManyParams {
	p.beforeCommit = fn
	return p
}
