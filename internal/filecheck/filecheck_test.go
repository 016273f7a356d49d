package filecheck_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/filecheck"
	"changeflow/internal/store"
)

// fakeBindings answers BindingGetByOperation from a map.
type fakeBindings map[string]store.Binding

func (f fakeBindings) BindingGetByOperation(_ context.Context, id string) (store.Binding, error) {
	b, ok := f[id]
	if !ok {
		return store.Binding{}, fmt.Errorf("binding of %s: %w", id, domain.ErrNotFound)
	}
	return b, nil
}

// OperationGet answers a revocation's step from the binding's Version
// field, which these tests use for nothing else.
func (f fakeBindings) OperationGet(_ context.Context, id string) (store.Operation, error) {
	b, ok := f[id]
	if !ok {
		return store.Operation{}, fmt.Errorf("operation %s: %w", id, domain.ErrNotFound)
	}
	return store.Operation{OperationID: id, Step: int(b.Version)}, nil
}

func TestCheckRevocations(t *testing.T) {
	exp := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	revoking := func(subject string, step domain.StepStatus, status domain.BindingStatus) store.Binding {
		return store.Binding{Subject: subject, TargetKey: "t", Status: status, ExpiresAt: exp, Version: int64(step)}
	}
	db := fakeBindings{
		domain.RevocationID("op-a"): revoking("amy", domain.StepCreateMRCreated, domain.BindingRevoking),           // not merged: still granted
		domain.RevocationID("op-b"): revoking("ben", domain.StepHandleMerged, domain.BindingRevoking),              // merged: gone
		domain.RevocationID("op-c"): revoking("cleo", domain.StepRevokeCalledBack, domain.BindingRevoked),          // gone
		domain.RevocationID("op-d"): revoking("dora", domain.StepCreatePipelineFailed, domain.BindingRevokeFailed), // still granted
	}
	ops := []string{"op-a", "op-b", "op-c", "op-d"}
	hand := bindingfile.Entry{Subject: "hal", ExpiresAt: exp.Add(-48 * time.Hour), OperationID: "by-hand"}
	file := func(es ...bindingfile.Entry) []byte {
		var f bindingfile.File
		for _, e := range es {
			f = f.With(e)
		}
		return f.Marshal()
	}
	amy := bindingfile.Entry{Subject: "amy", ExpiresAt: exp, OperationID: "op-a"}
	dora := bindingfile.Entry{Subject: "dora", ExpiresAt: exp, OperationID: "op-d"}
	ben := bindingfile.Entry{Subject: "ben", ExpiresAt: exp, OperationID: "op-b"}
	if err := filecheck.Check(t.Context(), db, "t", file(amy, dora, hand), ops, hand); err != nil {
		t.Fatalf("exact file refused: %v", err)
	}
	for name, c := range map[string][]byte{
		"merged removal still in the file": file(amy, dora, ben, hand),
		"unmerged removal already gone":    file(dora, hand),
		"a hand-added entry removed":       file(amy, dora),
		"a hand-added entry rewritten":     file(amy, dora, bindingfile.Entry{Subject: "hal", ExpiresAt: exp, OperationID: "op-x"}),
	} {
		if err := filecheck.Check(t.Context(), db, "t", c, ops, hand); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestCheck(t *testing.T) {
	exp := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	db := fakeBindings{
		"op-a": {Subject: "amy", TargetKey: "t", Status: domain.BindingValidated, OperationID: "op-a", ExpiresAt: exp.Add(300 * time.Millisecond)},
		"op-b": {Subject: "ben", TargetKey: "t", Status: domain.BindingValidated, OperationID: "op-b", ExpiresAt: exp},
		"op-c": {Subject: "cleo", TargetKey: "t", Status: domain.BindingHandleFailed, OperationID: "op-c", ExpiresAt: exp},
		"op-d": {Subject: "dora", TargetKey: "other", Status: domain.BindingValidated, OperationID: "op-d", ExpiresAt: exp},
	}
	ops := []string{"op-a", "op-b", "op-c", "op-d", "op-never"}
	file := func(es ...bindingfile.Entry) []byte {
		var f bindingfile.File
		for _, e := range es {
			f = f.With(e)
		}
		return f.Marshal()
	}
	amy := bindingfile.Entry{Subject: "amy", OperationID: "op-a", ExpiresAt: exp}
	ben := bindingfile.Entry{Subject: "ben", OperationID: "op-b", ExpiresAt: exp}
	for _, tc := range []struct {
		name    string
		content []byte
		want    string // "" = no mismatch; else a part of the error
	}{
		{"exactly the VALIDATED requests, expiry to the second", file(amy, ben), ""},
		{"a VALIDATED request's entry reverted", file(ben), "missing entry amy/op-a"},
		{"no file at all", nil, "missing entry amy/op-a"},
		{"a failed request's entry", file(amy, ben, bindingfile.Entry{Subject: "cleo", OperationID: "op-c", ExpiresAt: exp}), "extra entry cleo/op-c"},
		{"another target's request", file(amy, ben, bindingfile.Entry{Subject: "dora", OperationID: "op-d", ExpiresAt: exp}), "extra entry dora/op-d"},
		{"an older request of the subject", file(bindingfile.Entry{Subject: "amy", OperationID: "op-old", ExpiresAt: exp}, ben), "is operation op-old"},
		{"the wrong expiry", file(amy, bindingfile.Entry{Subject: "ben", OperationID: "op-b", ExpiresAt: exp.Add(time.Second)}), "entry of ben/op-b expires"},
		{"a file that does not parse", []byte("- subject: a\n- subject: a\n"), "binding file of t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := filecheck.Check(t.Context(), db, "t", tc.content, ops)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
