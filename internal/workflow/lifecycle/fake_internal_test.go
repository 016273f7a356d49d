package lifecycle

import (
	"context"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
)

// fakeStore is a Store in memory for the lifecycle's unit tests: it
// records every call and answers what the test scripted, in order where a
// method is called more than once. It decides nothing — which requests a
// revocation takes, the renewal's cut under its guards, the one
// revocation per grant are the store's, proven on both databases by its
// conformance suite; these tests prove what the lifecycle does with each
// answer. flowtest.Store answers OperationGet and BindingGetByOperation;
// BindingGet is the lifecycle's own, scripted call by call.
type fakeStore struct {
	flowtest.Store

	// bindingGets answers BindingGet, one per call; the last repeats.
	bindingGets []bindingAnswer

	cand       store.RevocationCandidate
	candStatus domain.BindingStatus
	candErr    error

	// creates answers RevocationCreate, one per call; the last repeats.
	creates []createAnswer
	created []store.RevocationCreateParams

	// expired answers RevocationCandidatesExpired, one chunk per call;
	// past the end, no more candidates.
	expired    []expiredAnswer
	cursors    []store.ExpiredCursor
	renewals   []store.ExpiredRenewal
	renewalErr error
	lapses     []store.RenewalLapseParams
	lapseErr   error
}

type bindingAnswer struct {
	b   store.Binding
	err error
}

type createAnswer struct {
	created []store.RevocationCreated
	err     error
}

type expiredAnswer struct {
	cands []store.RevocationCandidate
	next  store.ExpiredCursor
	err   error
}

func (f *fakeStore) BindingGet(_ context.Context, subject, target string) (store.Binding, error) {
	f.Call("BindingGet %s/%s", subject, target)
	a := f.bindingGets[0]
	if len(f.bindingGets) > 1 {
		f.bindingGets = f.bindingGets[1:]
	}
	return a.b, a.err
}

func (f *fakeStore) RevocationCandidateOf(_ context.Context, grant string) (store.RevocationCandidate, domain.BindingStatus, error) {
	f.Call("RevocationCandidateOf %s", grant)
	return f.cand, f.candStatus, f.candErr
}

func (f *fakeStore) RevocationCreate(_ context.Context, p store.RevocationCreateParams) ([]store.RevocationCreated, error) {
	f.Call("RevocationCreate")
	f.created = append(f.created, p)
	a := f.creates[0]
	if len(f.creates) > 1 {
		f.creates = f.creates[1:]
	}
	return a.created, a.err
}

func (f *fakeStore) RevocationCandidatesExpired(_ context.Context, after store.ExpiredCursor, _ int) ([]store.RevocationCandidate, store.ExpiredCursor, error) {
	f.Call("RevocationCandidatesExpired")
	f.cursors = append(f.cursors, after)
	if len(f.expired) == 0 {
		return nil, after, nil
	}
	a := f.expired[0]
	f.expired = f.expired[1:]
	return a.cands, a.next, a.err
}

func (f *fakeStore) ExpiredRenewals(context.Context, int) ([]store.ExpiredRenewal, error) {
	f.Call("ExpiredRenewals")
	return f.renewals, f.renewalErr
}

func (f *fakeStore) RenewalLapse(_ context.Context, p store.RenewalLapseParams) error {
	f.Call("RenewalLapse")
	f.lapses = append(f.lapses, p)
	return f.lapseErr
}

// testEnv is an Env over a configuration with the target "t" without
// batching and "tb" with it, telling obs.
func testEnv(t *testing.T, obs flow.Observer) flow.Env {
	t.Helper()
	targets := flowtest.Targets(map[string]bool{"t": false, "tb": true})
	return flow.Env{Config: flowtest.Config(t, targets, map[string]any{"expiry.chunkSize": 2}), Observer: obs}
}
