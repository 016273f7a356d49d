package flowtest

import (
	"context"
	"fmt"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// Store answers the store operations several flows' Store interfaces
// share, from what the test scripted, and records every call in Calls. A
// package's fake embeds it next to its own Store interface one level
// deeper (a struct embedding the interface), so Store's methods win over
// the nil interface's while any method neither has panics on it; a method
// the package's fake defines itself wins over both.
//
// A missing key answers domain.ErrNotFound, as the real store does; an
// Err field, when set, is answered before the map is read.
type Store struct {
	// Calls is every call made, one line each ("OperationGet op-1").
	Calls []string

	// Ops answers OperationGet by operation id; OpErr instead of it.
	Ops   map[string]store.Operation
	OpErr error

	// ByKey answers BindingGet by "subject/target"; ByKeyErr instead.
	ByKey    map[string]store.Binding
	ByKeyErr error

	// ByOperation answers BindingGetByOperation by operation id;
	// ByOperationErr instead.
	ByOperation    map[string]store.Binding
	ByOperationErr error

	// Batch and BatchErr answer BatchGet, whatever the id.
	Batch    store.Batch
	BatchErr error

	// Apply and ApplyErr answer WorkCallbackApply; Applied is every
	// write it was asked for, in order.
	Apply    store.WorkCallbackResult
	ApplyErr error
	Applied  []store.WorkCallbackParams
}

// Call records a call as one line of Calls.
func (f *Store) Call(format string, args ...any) {
	f.Calls = append(f.Calls, fmt.Sprintf(format, args...))
}

// OperationGet answers Ops[id].
func (f *Store) OperationGet(_ context.Context, id string) (store.Operation, error) {
	f.Call("OperationGet %s", id)
	return answer(f.Ops, id, f.OpErr, "operation %s", id)
}

// BindingGet answers ByKey[subject/target].
func (f *Store) BindingGet(_ context.Context, subject, target string) (store.Binding, error) {
	f.Call("BindingGet %s/%s", subject, target)
	return answer(f.ByKey, subject+"/"+target, f.ByKeyErr, "binding %s/%s", subject, target)
}

// BindingGetByOperation answers ByOperation[id].
func (f *Store) BindingGetByOperation(_ context.Context, id string) (store.Binding, error) {
	f.Call("BindingGetByOperation %s", id)
	return answer(f.ByOperation, id, f.ByOperationErr, "binding of %s", id)
}

// answer is err when set, else m[key], else the real store's not-found:
// what (formatted with args) wrapping domain.ErrNotFound.
func answer[V any](m map[string]V, key string, err error, what string, args ...any) (V, error) {
	var zero V
	if err != nil {
		return zero, err
	}
	v, ok := m[key]
	if !ok {
		return zero, fmt.Errorf(what+": %w", append(args, domain.ErrNotFound)...)
	}
	return v, nil
}

// BatchGet answers Batch and BatchErr.
func (f *Store) BatchGet(_ context.Context, id int64) (store.Batch, error) {
	f.Call("BatchGet %d", id)
	return f.Batch, f.BatchErr
}

// WorkCallbackApply records p in Applied and answers Apply and ApplyErr.
func (f *Store) WorkCallbackApply(_ context.Context, p store.WorkCallbackParams) (store.WorkCallbackResult, error) {
	f.Call("WorkCallbackApply %s", p.OperationID)
	f.Applied = append(f.Applied, p)
	return f.Apply, f.ApplyErr
}
