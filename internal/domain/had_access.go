package domain

// HadAccessChange is what one recorded binding move does to "had access"
// (docs/api.md, "Access history"): an entry in the target's binding
// file on the default branch, from the moment its change was in effect
// until its removal was in effect. The store applies it in the
// transaction of the move (store.accessRecord) and the migration that
// created access_interval applied the same rule to the step history
// already stored, so the two can never disagree.
type HadAccessChange int

// The changes a binding move makes to the access history.
const (
	// HadAccessUnchanged: the move changes nothing of the access — a
	// request still on its way, a renewal or removal under way (the
	// access lasts), a renewal ending without effect (the row goes back
	// to its grant, VALIDATED as before).
	HadAccessUnchanged HadAccessChange = iota
	// HadAccessOpens: a grant or a renewal is in effect (deploy callback
	// or reconciliation: MERGED or RENEWING → VALIDATED at CALLED_BACK or
	// RECONCILED). A new period starts; a period still open for the same
	// subject and target (the grant a renewal replaces) ends at the same
	// instant.
	HadAccessOpens
	// HadAccessEnds: a removal is in effect (REVOKED: deployed,
	// reconciled, or nothing was left to remove) or the access lapsed
	// (VALIDATED → CLOSED). The open period ends.
	HadAccessEnds
)

// HadAccessChangeOf classifies one step-history row: the binding move
// from → to written with the operation's step. The step tells a renewal
// in effect (RENEWING → VALIDATED at a confirmation step) from one that
// ended without effect (the same binding move at a closing step).
func HadAccessChangeOf(from, to BindingStatus, step StepStatus) HadAccessChange {
	switch {
	case to == BindingValidated && (from == BindingMerged || from == BindingRenewing) &&
		(step == StepCalledBack || step == StepReconciled):
		return HadAccessOpens
	case to == BindingRevoked:
		return HadAccessEnds
	case from == BindingValidated && to == BindingClosed:
		return HadAccessEnds
	}
	return HadAccessUnchanged
}
