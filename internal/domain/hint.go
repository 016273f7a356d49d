package domain

// Hint tells a user what to do about a request (docs/api.md, "User endpoints" `hint`).
type Hint string

// The hints.
const (
	// HintNone: nothing to do — the request is progressing or finished.
	HintNone Hint = "NONE"
	// HintKeepWaiting: it stopped at a step that can be retried on the
	// original MR, or at an unknown outcome such as a pipeline timeout.
	HintKeepWaiting Hint = "KEEP_WAITING"
	// HintContactMaintainers: a deterministic external failure; retrying the
	// same MR fails again.
	HintContactMaintainers Hint = "CONTACT_MAINTAINERS"
)

// deterministicFailures is the one constant set of steps whose failure
// repeats on a retry with the same MR, so the API says CONTACT_MAINTAINERS
// (docs/api.md, "User endpoints"). Every other stopped step says KEEP_WAITING.
var deterministicFailures = map[StepStatus]bool{
	StepCreatePipelineFailed:   true,
	StepHandleRebaseConflict:   true,
	StepHandleApproveForbidden: true,
	StepHandlePipelineFailed:   true,
}

// HintFor returns the hint for an operation at step whose binding is in
// binding:
//   - a step in deterministicFailures → CONTACT_MAINTAINERS;
//   - any other failed or pending step, or a failed binding (CREATE_FAILED,
//     HANDLE_FAILED, REVOKE_FAILED) whatever its step says → KEEP_WAITING;
//   - anything else (in progress, merged, validated, rejected, closed) →
//     NONE.
//
// A closing step that failed (CLOSE_FAILED) with a re-appliable binding is
// NONE: the user may re-apply; the open MR is the operators' business.
func HintFor(step StepStatus, binding BindingStatus) Hint {
	switch {
	case deterministicFailures[step]:
		return HintContactMaintainers
	case binding.Reappliable():
		return HintNone
	case step.Stopped(), binding == BindingCreateFailed, binding == BindingHandleFailed, binding == BindingRevokeFailed:
		return HintKeepWaiting
	}
	return HintNone
}

// IsDeterministicFailure reports whether s is in the deterministic-failure
// set (CONTACT_MAINTAINERS).
func IsDeterministicFailure(s StepStatus) bool { return deterministicFailures[s] }

// DeterministicFailureSteps returns the deterministic-failure set in code
// order.
func DeterministicFailureSteps() []StepStatus {
	var out []StepStatus
	for _, s := range Steps() {
		if deterministicFailures[s] {
			out = append(out, s)
		}
	}
	return out
}
