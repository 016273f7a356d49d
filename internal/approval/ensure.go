package approval

import "context"

// EnsureSubmitted is "intent before side effect" for the approval submit:
// it looks up an approval for f.OperationID first and submits only when
// there is none; when the submit's answer is lost (OutcomeUnknown) it
// looks up again, so a crash or a dropped connection between the remote
// call and the local write never leads to a second approval — even
// against an upstream without the operationId dedupe. A lookup failure
// before submitting is returned (the caller retries the step later);
// submitting blind would be the unsafe direction.
func EnsureSubmitted(ctx context.Context, s Service, f Form) (Approval, error) {
	if a, ok, err := s.FindByOperationID(ctx, f.OperationID); err != nil {
		return Approval{}, err
	} else if ok {
		return a, nil
	}
	a, err := s.Submit(ctx, f)
	if err == nil || !OutcomeUnknown(err) {
		return a, err
	}
	if found, ok, lerr := s.FindByOperationID(ctx, f.OperationID); lerr == nil && ok {
		return found, nil
	}
	return Approval{}, err
}
