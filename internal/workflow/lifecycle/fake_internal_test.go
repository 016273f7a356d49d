package lifecycle

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// fakeStore is a Store in memory for the lifecycle's unit tests: it
// records every call and answers what the test scripted, in order where a
// method is called more than once. It decides nothing — which requests a
// revocation takes, the renewal's cut under its guards, the one
// revocation per grant are the store's, proven on both databases by its
// conformance suite; these tests prove what the lifecycle does with each
// answer.
type fakeStore struct {
	calls []string

	ops     map[string]store.Operation
	byOp    map[string]store.Binding // BindingGetByOperation
	byOpErr error

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

func (f *fakeStore) call(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeStore) BindingGet(_ context.Context, subject, target string) (store.Binding, error) {
	f.call("BindingGet %s/%s", subject, target)
	a := f.bindingGets[0]
	if len(f.bindingGets) > 1 {
		f.bindingGets = f.bindingGets[1:]
	}
	return a.b, a.err
}

func (f *fakeStore) BindingGetByOperation(_ context.Context, id string) (store.Binding, error) {
	f.call("BindingGetByOperation %s", id)
	if f.byOpErr != nil {
		return store.Binding{}, f.byOpErr
	}
	b, ok := f.byOp[id]
	if !ok {
		return store.Binding{}, fmt.Errorf("binding of %s: %w", id, domain.ErrNotFound)
	}
	return b, nil
}

func (f *fakeStore) OperationGet(_ context.Context, id string) (store.Operation, error) {
	f.call("OperationGet %s", id)
	op, ok := f.ops[id]
	if !ok {
		return store.Operation{}, fmt.Errorf("operation %s: %w", id, domain.ErrNotFound)
	}
	return op, nil
}

func (f *fakeStore) RevocationCandidateOf(_ context.Context, grant string) (store.RevocationCandidate, domain.BindingStatus, error) {
	f.call("RevocationCandidateOf %s", grant)
	return f.cand, f.candStatus, f.candErr
}

func (f *fakeStore) RevocationCreate(_ context.Context, p store.RevocationCreateParams) ([]store.RevocationCreated, error) {
	f.call("RevocationCreate")
	f.created = append(f.created, p)
	a := f.creates[0]
	if len(f.creates) > 1 {
		f.creates = f.creates[1:]
	}
	return a.created, a.err
}

func (f *fakeStore) RevocationCandidatesExpired(_ context.Context, after store.ExpiredCursor, _ int) ([]store.RevocationCandidate, store.ExpiredCursor, error) {
	f.call("RevocationCandidatesExpired")
	f.cursors = append(f.cursors, after)
	if len(f.expired) == 0 {
		return nil, after, nil
	}
	a := f.expired[0]
	f.expired = f.expired[1:]
	return a.cands, a.next, a.err
}

func (f *fakeStore) ExpiredRenewals(context.Context, int) ([]store.ExpiredRenewal, error) {
	f.call("ExpiredRenewals")
	return f.renewals, f.renewalErr
}

func (f *fakeStore) RenewalLapse(_ context.Context, p store.RenewalLapseParams) error {
	f.call("RenewalLapse")
	f.lapses = append(f.lapses, p)
	return f.lapseErr
}

// observed records what the lifecycle told the observer, in order.
type observed struct {
	flow.NopObserver
	events []string
}

func (o *observed) RevocationCreated(_ context.Context, r store.RevocationCreated, reason domain.RevokeReason) {
	o.events = append(o.events, fmt.Sprintf("revocation created %s %s", r.OperationID, reason))
}

func (o *observed) RenewalEnded(_ context.Context, id string, outcome domain.RenewalOutcome) {
	o.events = append(o.events, fmt.Sprintf("renewal ended %s %s", id, outcome))
}

// testEnv is an Env over a configuration with the target "t" without
// batching and "tb" with it, telling obs.
func testEnv(t *testing.T, obs flow.Observer) flow.Env {
	t.Helper()
	mgr, err := config.Load(t.Context(), config.Options{Overlay: map[string]any{
		"gitlab.projects":  []any{"1"},
		"expiry.chunkSize": 2,
		"targets": map[string]any{
			"t":  map[string]any{"accessMode": "OPEN", "batching": false, "maxDays": 30},
			"tb": map[string]any{"accessMode": "OPEN", "batching": true, "maxDays": 30},
		},
	}})
	require.NoError(t, err)
	snap := mgr.Current()
	require.NoError(t, mgr.Close())
	return flow.Env{Config: func() *config.Snapshot { return snap }, Observer: obs}
}
