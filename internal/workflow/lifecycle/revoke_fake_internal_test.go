package lifecycle

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
	"changeflow/internal/workflow/flowtest"
)

// TestRevokeAnswers: giving access back (or an operator's revocation)
// answers the revocation it created, the one that already existed, or why
// there is nothing to revoke — for each answer the store can give.
func TestRevokeAnswers(t *testing.T) {
	const rev = "g~revoke"
	errDB := errors.New("database down")
	notFound := fmt.Errorf("grant: %w", domain.ErrNotFound)
	grant := store.Operation{OperationID: "g", Subject: "u", TargetKey: "t", ProjectID: 1}
	renewal := func(step domain.StepStatus, mr int64) store.Operation {
		return store.Operation{OperationID: "r", Kind: domain.OperationRenew, GrantOperationID: "g", Step: int(step), MRIID: mr, ProjectID: 1, Version: 6}
	}
	renewing := bindingAnswer{b: store.Binding{ID: 9, Version: 4, Subject: "u", TargetKey: "t", OperationID: "r", Status: domain.BindingRenewing}}
	cand := store.RevocationCandidate{BindingID: 9, BindingVersion: 3, Subject: "u", TargetKey: "t", GrantOperationID: "g", ProjectID: 1}
	made := createAnswer{created: []store.RevocationCreated{{OperationID: rev, GrantOperationID: "g"}}}
	for _, c := range []struct {
		name string
		st   fakeStore
		want RevokeResult
		// err is what the error wraps; errText a part of its message.
		err     error
		errText string
		under   domain.Reason // a *RenewalUnderWayError with this reason
		events  []string
		creates int // RevocationCreate calls
		// renewalCut: the one created row carried the renewal to cut.
		renewalCut bool
	}{
		{
			name: "an unknown grant", st: fakeStore{candErr: notFound},
			err: domain.ErrNotFound,
		},
		{
			name: "revoked already: the existing revocation is answered",
			st:   fakeStore{candErr: notFound, Store: flowtest.Store{ByOperation: map[string]store.Binding{rev: {OperationID: rev, Status: domain.BindingRevoking}}}},
			want: RevokeResult{OperationID: rev, Binding: domain.BindingRevoking},
		},
		{
			name: "the existing revocation cannot be read", st: fakeStore{candErr: notFound, Store: flowtest.Store{ByOperationErr: errDB}},
			err: errDB,
		},
		{
			name: "the candidate cannot be read", st: fakeStore{candErr: errDB},
			err: errDB,
		},
		{
			name: "not in effect: the status is in the message", st: fakeStore{cand: cand, candStatus: domain.BindingMerged},
			err: ErrNotInEffect, errText: "g is MERGED",
		},
		{
			name: "created", st: fakeStore{cand: cand, candStatus: domain.BindingValidated, creates: []createAnswer{made}},
			want:   RevokeResult{OperationID: rev, Created: true, Binding: domain.BindingRevoking},
			events: []string{"revocation created g~revoke GIVEN_BACK"}, creates: 1,
		},
		{
			name: "the race lost: the winner's revocation is answered",
			st: fakeStore{cand: cand, candStatus: domain.BindingValidated, creates: []createAnswer{{err: domain.ErrPreempted}},
				Store: flowtest.Store{ByOperation: map[string]store.Binding{rev: {OperationID: rev, Status: domain.BindingRevoked}}}},
			want: RevokeResult{OperationID: rev, Binding: domain.BindingRevoked}, creates: 1,
		},
		{
			name: "the race lost to something else: not in effect",
			st:   fakeStore{cand: cand, candStatus: domain.BindingValidated, creates: []createAnswer{{err: domain.ErrPreempted}}},
			err:  ErrNotInEffect, errText: "g changed while revoking it", creates: 1,
		},
		{
			name: "the create fails", st: fakeStore{cand: cand, candStatus: domain.BindingValidated, creates: []createAnswer{{err: errDB}}},
			err: errDB, creates: 1,
		},
		{
			name: "renewing: a renewal with its own MR under way is refused with its reason",
			st: fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant, "r": renewal(domain.StepCreatePipelineRunning, 5)}},
				bindingGets: []bindingAnswer{renewing}},
			under: domain.ReasonRenewalHasChange,
		},
		{
			name: "renewing: a renewal waiting for its approval is cut in the revocation",
			st: fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant, "r": renewal(domain.StepCreateApprovalSubmitted, 0)}},
				bindingGets: []bindingAnswer{renewing}, creates: []createAnswer{made}},
			want:   RevokeResult{OperationID: rev, Created: true, Binding: domain.BindingRevoking},
			events: []string{"revocation created g~revoke GIVEN_BACK", "renewal ended r CLOSED"}, creates: 1, renewalCut: true,
		},
		{
			name: "renewing: a round claimed the renewal first",
			st: fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant, "r": renewal(domain.StepCreateAdmitted, 0)}},
				bindingGets: []bindingAnswer{renewing}, creates: []createAnswer{{err: store.ErrRenewalClaimed}}},
			under: domain.ReasonRenewalMerging, creates: 1,
		},
		{
			name: "renewing: a race lost, then the racer's revocation is read",
			st: fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant, "r": renewal(domain.StepCreateAdmitted, 0)}},
				bindingGets: []bindingAnswer{renewing, {b: store.Binding{OperationID: rev, Status: domain.BindingRevoking}}},
				creates:     []createAnswer{{err: domain.ErrPreempted}}},
			want: RevokeResult{OperationID: rev, Binding: domain.BindingRevoking}, creates: 1,
		},
		{
			name: "renewing: the renewal kept moving",
			st: fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant, "r": renewal(domain.StepCreateAdmitted, 0)}},
				bindingGets: []bindingAnswer{renewing}, creates: []createAnswer{{err: domain.ErrPreempted}}},
			err: domain.ErrPreempted, errText: "kept moving", creates: revokeAttempts,
		},
		{
			name: "renewing: the create fails",
			st: fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant, "r": renewal(domain.StepCreateAdmitted, 0)}},
				bindingGets: []bindingAnswer{renewing}, creates: []createAnswer{{err: errDB}}},
			err: errDB, creates: 1,
		},
		{
			name: "renewing through another grant's renewal: not in effect",
			st: fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant,
				"r": {OperationID: "r", Kind: domain.OperationRenew, GrantOperationID: "other"}}},
				bindingGets: []bindingAnswer{renewing}},
			err: ErrNotInEffect, errText: "g is being renewed through r",
		},
		{
			name: "renewing: the renewal cannot be read",
			st:   fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant}}, bindingGets: []bindingAnswer{renewing}},
			err:  domain.ErrNotFound, errText: "operation r",
		},
		{
			name: "the row is not renewing: the grant is answered unknown",
			st: fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant}},
				bindingGets: []bindingAnswer{{b: store.Binding{OperationID: "newer", Status: domain.BindingValidated}}}},
			err: domain.ErrNotFound, errText: "grant",
		},
		{
			name: "the row cannot be read",
			st:   fakeStore{candErr: notFound, Store: flowtest.Store{Ops: map[string]store.Operation{"g": grant}}, bindingGets: []bindingAnswer{{err: errDB}}},
			err:  errDB,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs := &flowtest.Observer{}
			st := c.st
			rv := Revoker{Env: testEnv(t, obs), Store: &st}
			got, err := rv.Revoke(t.Context(), "g", domain.RevokeGivenBack, "given back", "u")
			var under *RenewalUnderWayError
			switch {
			case c.under != "":
				require.ErrorAs(t, err, &under)
				require.Equal(t, c.under, under.Reason)
				require.Equal(t, "g", under.Grant)
				require.Equal(t, "r", under.Renewal)
			case c.err != nil:
				require.ErrorIs(t, err, c.err)
				require.ErrorContains(t, err, c.errText)
			default:
				require.NoError(t, err)
				require.Equal(t, c.want, got)
			}
			require.Equal(t, c.events, obs.Events)
			require.Len(t, st.created, c.creates)
			for _, p := range st.created {
				require.Equal(t, domain.RevokeGivenBack, p.Reason)
				require.Equal(t, "given back", p.Text)
				require.Equal(t, "u", p.Actor)
				require.Equal(t, flow.ActionCreateMR, p.SingleAction)
				require.Equal(t, flow.ActionWithdraw, p.RenewalAction)
				require.Len(t, p.Rows, 1)
				require.False(t, p.Rows[0].Batching, "target t does not batch")
				if c.renewalCut {
					r := p.Rows[0]
					require.Equal(t, [4]any{"r", int(domain.StepCreateApprovalSubmitted), int64(6), int64(4)},
						[4]any{r.Renewal, r.RenewalStep, r.RenewalVersion, r.BindingVersion}, "cut at the renewal and the row as read")
				}
			}
		})
	}
}

// TestExpiryScanCounts: the scan reads chunk after chunk from the cursor
// it was given, counts what it read and what it created, skips a chunk
// that lost a race, stops at any other error, cuts the expired renewals
// and wakes the engine only for work it made due.
func TestExpiryScanCounts(t *testing.T) {
	errDB := errors.New("database down")
	cands := func(ids ...string) []store.RevocationCandidate {
		var out []store.RevocationCandidate
		for _, id := range ids {
			target := "t"
			if id[0] == 'b' {
				target = "tb"
			}
			out = append(out, store.RevocationCandidate{GrantOperationID: id, TargetKey: target})
		}
		return out
	}
	created := func(batching bool, ids ...string) createAnswer {
		var out []store.RevocationCreated
		for _, id := range ids {
			out = append(out, store.RevocationCreated{OperationID: id + "~revoke", GrantOperationID: id, Batching: batching})
		}
		return createAnswer{created: out}
	}
	c1, c2 := store.ExpiredCursor{ID: 1}, store.ExpiredCursor{ID: 2}
	for _, c := range []struct {
		name     string
		st       fakeStore
		want     ExpiryResult
		err      error
		woke     bool
		batching []bool // per created row asked, in order
		// renewalsEnded: renewals cut off in a revocation this scan made.
		renewalsEnded int
	}{
		{name: "nothing expired", want: ExpiryResult{}},
		{
			name: "two chunks",
			st: fakeStore{
				expired: []expiredAnswer{{cands: cands("a", "b"), next: c1}, {cands: cands("c"), next: c2}},
				creates: []createAnswer{created(false, "a", "b"), created(false, "c")},
			},
			want: ExpiryResult{Scanned: 3, Revoked: 3, Chunks: 2}, woke: true, batching: []bool{false, true, false},
		},
		{
			name: "only batching revocations: no wake, the rounds take them",
			st: fakeStore{
				expired: []expiredAnswer{{cands: cands("b1"), next: c1}},
				creates: []createAnswer{created(true, "b1")},
			},
			want: ExpiryResult{Scanned: 1, Revoked: 1, Chunks: 1}, batching: []bool{true},
		},
		{
			name: "a chunk that lost a race is skipped",
			st: fakeStore{
				expired: []expiredAnswer{{cands: cands("a", "b"), next: c1}, {cands: cands("c"), next: c2}},
				creates: []createAnswer{{err: domain.ErrPreempted}, created(false, "c")},
			},
			want: ExpiryResult{Scanned: 3, Revoked: 1, Chunks: 2}, woke: true, batching: []bool{false, true, false},
		},
		{
			name: "any other error stops the scan",
			st: fakeStore{
				expired: []expiredAnswer{{cands: cands("a"), next: c1}, {cands: cands("c"), next: c2}},
				creates: []createAnswer{{err: errDB}},
			},
			want: ExpiryResult{Scanned: 1, Chunks: 1}, err: errDB, batching: []bool{false},
		},
		{
			name: "the read fails", st: fakeStore{expired: []expiredAnswer{{err: errDB}}}, err: errDB,
		},
		{
			name: "expired renewals: cut with a revocation, lapsed, or left",
			st: fakeStore{
				renewals: []store.ExpiredRenewal{
					{RevocationCandidate: store.RevocationCandidate{GrantOperationID: "g1", TargetKey: "t", Renewal: "r1", RenewalStep: int(domain.StepCreateApprovalSubmitted)}},
					{RevocationCandidate: store.RevocationCandidate{GrantOperationID: "g2", TargetKey: "t", Renewal: "r2", RenewalStep: int(domain.StepCreatePipelineRunning)}, MRIID: 4},
					{RevocationCandidate: store.RevocationCandidate{GrantOperationID: "g3", TargetKey: "t", Renewal: "r3", RenewalStep: int(domain.StepCalledBack)}},
				},
				creates: []createAnswer{created(false, "g1")},
			},
			want: ExpiryResult{Scanned: 1, Revoked: 1, Chunks: 2, Lapsed: 1}, woke: true, batching: []bool{false}, renewalsEnded: 1,
		},
		{
			name: "a lapse that lost a race counts nothing",
			st: fakeStore{
				renewals: []store.ExpiredRenewal{
					{RevocationCandidate: store.RevocationCandidate{GrantOperationID: "g2", TargetKey: "t", Renewal: "r2", RenewalStep: int(domain.StepCreatePipelineRunning)}, MRIID: 4},
				},
				lapseErr: domain.ErrPreempted,
			},
			want: ExpiryResult{Chunks: 1},
		},
		{
			name: "a lapse that fails",
			st: fakeStore{
				renewals: []store.ExpiredRenewal{
					{RevocationCandidate: store.RevocationCandidate{GrantOperationID: "g2", TargetKey: "t", Renewal: "r2", RenewalStep: int(domain.StepCreatePipelineRunning)}, MRIID: 4},
				},
				lapseErr: errDB,
			},
			want: ExpiryResult{Chunks: 1}, err: errDB,
		},
		{
			name: "the renewals cannot be read", st: fakeStore{renewalErr: errDB}, err: errDB,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			obs := &flowtest.Observer{}
			st := c.st
			if st.creates == nil {
				st.creates = []createAnswer{{}}
			}
			x := NewExpiry(testEnv(t, obs), &st)
			woke := 0
			x.Wake = func() { woke++ }
			got, err := x.ScanOnce(t.Context())
			require.ErrorIs(t, err, c.err)
			require.Equal(t, c.want, got)
			require.Equal(t, c.woke, woke == 1, "woken %d times", woke)
			require.LessOrEqual(t, woke, 1)
			var batching []bool
			for _, p := range st.created {
				require.Equal(t, domain.RevokeExpired, p.Reason)
				require.Equal(t, ExpiryActor, p.Actor)
				for _, r := range p.Rows {
					batching = append(batching, r.Batching)
				}
			}
			require.Equal(t, c.batching, batching)
			// Each chunk is read from the cursor the one before returned.
			for i := 1; i < len(st.cursors); i++ {
				require.Equal(t, int64(i), st.cursors[i].ID)
			}
			for _, l := range st.lapses {
				require.Equal(t, flow.ActionWithdraw, l.Action)
				require.Equal(t, ExpiryActor, l.Actor)
				require.Len(t, l.Rows, 1)
				require.Equal(t, "r2", l.Rows[0].Renewal)
			}
			var counted []string
			for _, e := range obs.Events {
				if strings.HasPrefix(e, "revocation created ") {
					counted = append(counted, e)
				}
			}
			require.Len(t, counted, c.want.Revoked, "each revocation counted once: %v", obs.Events)
			require.Equal(t, c.renewalsEnded, len(obs.Events)-len(counted), "renewals ended: %v", obs.Events)
		})
	}
}
