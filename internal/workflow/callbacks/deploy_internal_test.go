package callbacks

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
)

// TestDeployDispositions: a deploy callback comes to one disposition,
// noted once on its inbox row, and only a flip tells the observer.
func TestDeployDispositions(t *testing.T) {
	errDB := errors.New("database down")
	flip := func(id string) *store.Flip {
		return &store.Flip{OperationID: id, From: domain.BindingMerged, To: domain.BindingValidated}
	}
	two := []store.Operation{{OperationID: "a"}, {OperationID: "b"}}
	for _, c := range []struct {
		name   string
		ev     DeployEvent
		st     fakeStore
		want   Result
		err    error
		noted  string // "" when nothing is noted
		events []string
	}{
		{
			name: "a status other than SUCCESS is no evidence of a deployment",
			ev:   DeployEvent{RowID: 7, Status: "FAILED"},
			want: Stale, noted: `7 IGNORED: status "FAILED" is not SUCCESS`,
		},
		{
			name: "success in any case counts",
			ev:   DeployEvent{RowID: 7, Status: "success", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMR: two, flips: map[string]*store.Flip{"a": flip("a")}},
			want: Applied, noted: "7 APPLIED: validated 1 request(s) of MR !3 of project 1",
			events: []string{"validated a"},
		},
		{
			name: "an MR no request has is an unknown MR",
			ev:   DeployEvent{RowID: 7, Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			want: Stale, noted: "7 UNKNOWN_MR: no request of changeflow has MR !3 of project 1",
		},
		{
			name: "every request of the MR flipped is counted",
			ev:   DeployEvent{RowID: 7, Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMR: two, flips: map[string]*store.Flip{"a": flip("a"), "b": flip("b")}},
			want: Applied, noted: "7 APPLIED: validated 2 request(s)",
			events: []string{"validated a", "validated b"},
		},
		{
			name: "merged and validated already is a duplicate",
			ev:   DeployEvent{RowID: 7, Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMR: two, merge: store.MRMergeState{Requests: 2, Merged: 1}},
			want: Stale, noted: "7 DUPLICATE: changeflow merged MR !3 of project 1",
		},
		{
			name: "still merging is early",
			ev:   DeployEvent{RowID: 7, Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMR: two, merge: store.MRMergeState{Requests: 2, Merging: 1}},
			want: Stale, noted: "7 EARLY: MR !3 of project 1 is being merged",
		},
		{
			name: "an MR changeflow did not merge changes nothing",
			ev:   DeployEvent{RowID: 7, Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMR: two, merge: store.MRMergeState{Requests: 2}},
			want: Stale, noted: "7 NOT_MERGED: changeflow has not merged MR !3 of project 1",
		},
		{
			name: "no inbox row: nothing is noted",
			ev:   DeployEvent{Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMR: two, flips: map[string]*store.Flip{"b": flip("b")}},
			want: Applied, events: []string{"validated b"},
		},
		{
			name: "a failing note changes nothing about the answer",
			ev:   DeployEvent{RowID: 7, Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMR: two, flips: map[string]*store.Flip{"a": flip("a")}, classifyErr: errDB},
			want: Applied, noted: "7 APPLIED", events: []string{"validated a"},
		},
		{
			name: "the requests cannot be listed",
			ev:   DeployEvent{RowID: 7, Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMRErr: errDB},
			err:  errDB,
		},
		{
			name: "a flip that fails stops before the note",
			ev:   DeployEvent{RowID: 7, Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMR: two, markErr: errDB},
			err:  errDB,
		},
		{
			name: "the merge state cannot be read",
			ev:   DeployEvent{RowID: 7, Status: "SUCCESS", ProjectID: 1, MRIID: 3},
			st:   fakeStore{byMR: two, mergeErr: errDB},
			err:  errDB,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs := &flowtest.Observer{}
			st := c.st
			cb := New(flow.Env{Observer: obs}, &st, nil)
			got, err := cb.Deploy(t.Context(), c.ev)
			if c.err != nil {
				require.ErrorIs(t, err, c.err)
				require.Empty(t, st.classified, "an error notes nothing")
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			if c.noted == "" {
				require.Empty(t, st.classified)
			} else {
				require.Len(t, st.classified, 1, "noted once")
				require.True(t, strings.HasPrefix(st.classified[0], c.noted), "noted %q, want it to start %q", st.classified[0], c.noted)
			}
			require.Equal(t, c.events, obs.Events)
			for _, m := range st.marked {
				require.Equal(t, "deploy-callback", m.Actor)
				require.Equal(t, int(domain.StepCalledBack), m.CalledBackStep)
			}
		})
	}
}

// TestMarkValidatedTellsTheObserverOnlyOnAFlip: the success side effect
// follows the store's flip — none, none told; a grant in effect is
// Validated, a removal confirmed Revoked; a renewal in effect also ends
// the renewal.
func TestMarkValidatedTellsTheObserverOnlyOnAFlip(t *testing.T) {
	errDB := errors.New("database down")
	for _, c := range []struct {
		name    string
		flip    *store.Flip
		err     error
		flipped bool
		events  []string
	}{
		{name: "no flip (a duplicate, or reconciliation was first)"},
		{name: "the flip fails", err: errDB},
		{
			name: "a grant in effect", flipped: true, events: []string{"validated op"},
			flip: &store.Flip{OperationID: "op", From: domain.BindingMerged, To: domain.BindingValidated},
		},
		{
			name: "a removal confirmed", flipped: true, events: []string{"revoked op"},
			flip: &store.Flip{OperationID: "op", From: domain.BindingRevoking, To: domain.BindingRevoked},
		},
		{
			name: "a renewal in effect", flipped: true, events: []string{"renewal ended op IN_EFFECT", "validated op"},
			flip: &store.Flip{OperationID: "op", From: domain.BindingRenewing, To: domain.BindingValidated, ToStep: int(domain.StepCalledBack)},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs := &flowtest.Observer{}
			st := &fakeStore{flips: map[string]*store.Flip{"op": c.flip}, markErr: c.err}
			d := Applier{Env: flow.Env{Observer: obs}, Store: st}
			flipped, err := d.MarkValidated(t.Context(), "op", "actor", "note")
			require.ErrorIs(t, err, c.err)
			require.Equal(t, c.flipped, flipped)
			require.Equal(t, c.events, obs.Events)
			require.Equal(t, []store.BindingMarkValidatedParams{{
				OperationID: "op", CalledBackStep: int(domain.StepCalledBack), Actor: "actor", Note: "note",
			}}, st.marked)
		})
	}
}

// TestValidateIfDeployed: the merged outcome's hook validates only when
// a deploy callback was recorded for the MR, and marks the callbacks
// applied only when it flipped.
func TestValidateIfDeployed(t *testing.T) {
	flip := &store.Flip{OperationID: "op", From: domain.BindingMerged, To: domain.BindingValidated}
	for _, c := range []struct {
		name   string
		st     fakeStore
		calls  []string
		events []string
	}{
		{name: "no callback recorded yet", calls: []string{"DeployCallbackSeen 1/3"}},
		{name: "the look fails", st: fakeStore{seenErr: errors.New("down")}, calls: []string{"DeployCallbackSeen 1/3"}},
		{
			name: "recorded: validated and marked applied", st: fakeStore{seen: true, flips: map[string]*store.Flip{"op": flip}},
			calls:  []string{"DeployCallbackSeen 1/3", "BindingMarkValidated op", "DeployCallbackMarkApplied 1/3"},
			events: []string{"validated op"},
		},
		{
			name: "recorded, but something else flipped it first", st: fakeStore{seen: true},
			calls: []string{"DeployCallbackSeen 1/3", "BindingMarkValidated op"},
		},
		{
			name: "recorded, the flip fails", st: fakeStore{seen: true, markErr: errors.New("down")},
			calls: []string{"DeployCallbackSeen 1/3", "BindingMarkValidated op"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs := &flowtest.Observer{}
			st := c.st
			d := Applier{Env: flow.Env{Observer: obs}, Store: &st}
			d.ValidateIfDeployed(1, 3)(t.Context(), store.Flip{OperationID: "op"})
			require.Equal(t, c.calls, st.Calls)
			require.Equal(t, c.events, obs.Events)
		})
	}
}

// TestGitLabEventExpedites: a pipeline or merge request event makes only
// the waiting polls of its MR's requests due; anything unexpected in the
// event is stale and reads nothing.
func TestGitLabEventExpedites(t *testing.T) {
	ops := []store.Operation{
		{OperationID: "pipe", NextAction: flow.ActionPollPipeline},
		{OperationID: "rebase", NextAction: flow.ActionPollRebase},
		{OperationID: "merge", NextAction: flow.ActionMerge},
		{OperationID: "bpipe", NextAction: flow.ActionBatchPollPipeline},
		{OperationID: "brebase", NextAction: flow.ActionBatchPollRebase},
		{OperationID: "bmerge", NextAction: flow.ActionBatchMerge},
		{OperationID: "approve", NextAction: flow.ActionApprove},
		{OperationID: "idle"},
	}
	polls := []string{
		"pipe " + flow.ActionPollPipeline, "rebase " + flow.ActionPollRebase, "merge " + flow.ActionMerge,
		"bpipe " + flow.ActionBatchPollPipeline, "brebase " + flow.ActionBatchPollRebase, "bmerge " + flow.ActionBatchMerge,
	}
	errDB := errors.New("database down")
	for _, c := range []struct {
		name      string
		kind      string
		body      string
		st        fakeStore
		want      Result
		err       error
		listed    string // the MR listed, "" for none
		expedited []string
	}{
		{name: "not JSON", kind: "merge_request", body: "{", want: Stale},
		{name: "a pipeline of no MR", kind: "pipeline", body: `{"project":{"id":1},"object_attributes":{"iid":9}}`, want: Stale},
		{name: "no project", kind: "merge_request", body: `{"object_attributes":{"iid":3}}`, want: Stale},
		{name: "no MR iid", kind: "merge_request", body: `{"project":{"id":1}}`, want: Stale},
		{
			name: "a merge request event moves the waiting polls", kind: "merge_request",
			body: `{"project":{"id":1},"object_attributes":{"iid":3}}`,
			st:   fakeStore{byMR: ops, expedite: map[string]bool{"rebase": true}},
			want: Applied, listed: "OperationListByMR 1/3", expedited: polls,
		},
		{
			name: "a pipeline event names its MR in merge_request", kind: "pipeline",
			body: `{"project":{"id":1},"object_attributes":{"iid":99},"merge_request":{"iid":3}}`,
			st:   fakeStore{byMR: ops, expedite: map[string]bool{"pipe": true}},
			want: Applied, listed: "OperationListByMR 1/3", expedited: polls,
		},
		{
			name: "nothing was waiting to move", kind: "merge_request",
			body: `{"project":{"id":1},"object_attributes":{"iid":3}}`,
			st:   fakeStore{byMR: ops},
			want: Stale, listed: "OperationListByMR 1/3", expedited: polls,
		},
		{
			name: "no poll waits on the MR", kind: "merge_request",
			body: `{"project":{"id":1},"object_attributes":{"iid":3}}`,
			st:   fakeStore{byMR: ops[6:]},
			want: Stale, listed: "OperationListByMR 1/3",
		},
		{
			name: "the requests cannot be listed", kind: "merge_request",
			body: `{"project":{"id":1},"object_attributes":{"iid":3}}`,
			st:   fakeStore{byMRErr: errDB}, err: errDB, listed: "OperationListByMR 1/3",
		},
		{
			name: "the expedite fails", kind: "merge_request",
			body: `{"project":{"id":1},"object_attributes":{"iid":3}}`,
			st:   fakeStore{byMR: ops, expediteErr: errDB}, err: errDB, listed: "OperationListByMR 1/3",
			expedited: polls[:1],
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := c.st
			got, err := New(flow.Env{}, &st, nil).GitLab(t.Context(), c.kind, []byte(c.body))
			require.ErrorIs(t, err, c.err)
			if c.err == nil {
				require.Equal(t, c.want, got)
			}
			if c.listed == "" {
				require.Empty(t, st.Calls, "a stale event reads nothing")
			} else {
				require.Equal(t, c.listed, st.Calls[0])
			}
			require.Equal(t, c.expedited, st.expedited)
		})
	}
}
