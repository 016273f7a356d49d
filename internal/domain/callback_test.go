package domain

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPlanCallback(t *testing.T) {
	approvedAt := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	waiting := []BindingStatus{BindingApprovalSending, BindingApprovalSent}
	approve := Callback{Waiting: waiting, Step: StepCreateStarted, Binding: BindingMRCreating}
	waitingGrant := CallbackState{Kind: OperationGrant, Step: StepCreateApprovalSubmitted, Binding: BindingApprovalSent, BindingOwned: true, ApprovalID: "APR-1", Days: 7}
	with := func(c Callback, f func(*Callback)) Callback { f(&c); return c }
	state := func(s CallbackState, f func(*CallbackState)) CallbackState { f(&s); return s }
	for _, c := range []struct {
		name    string
		state   CallbackState
		cb      Callback
		want    CallbackPlan
		refused string
		err     error
	}{
		{"an approval moves a waiting grant on", waitingGrant, approve,
			CallbackPlan{Apply: true, Step: StepCreateStarted, StepWritten: true, Move: BindingMRCreating}, "", nil},
		{"a request past the waiting set: stale, nothing written", state(waitingGrant, func(s *CallbackState) { s.Binding = BindingMRCreating; s.Step = StepCreateStarted }),
			approve, CallbackPlan{}, "", nil},
		{"a binding a re-apply gave to a newer request: stale", state(waitingGrant, func(s *CallbackState) { s.BindingOwned = false }),
			approve, CallbackPlan{}, "", nil},
		{"another approval id: refused", waitingGrant, with(approve, func(c *Callback) { c.Approval = &ApprovalBinding{ApprovalID: "APR-666"} }),
			CallbackPlan{}, "not the approval changeflow submitted", nil},
		{"the approval system's own id adopted while none is recorded", state(waitingGrant, func(s *CallbackState) { s.ApprovalID = "" }),
			with(approve, func(c *Callback) { c.Approval = &ApprovalBinding{ApprovalID: "APR-1", Adopt: true} }),
			CallbackPlan{Apply: true, Step: StepCreateStarted, StepWritten: true, Move: BindingMRCreating, AdoptApproval: true}, "", nil},
		{"a bare claim on an unrecorded approval: refused", state(waitingGrant, func(s *CallbackState) { s.ApprovalID = "" }),
			with(approve, func(c *Callback) { c.Approval = &ApprovalBinding{ApprovalID: "APR-1"} }),
			CallbackPlan{}, "no approval id is recorded", nil},
		{"approve-first: the days count from the approval", waitingGrant, with(approve, func(c *Callback) { c.ApprovedAt, c.MaxDays = approvedAt, 30 }),
			CallbackPlan{Apply: true, Step: StepCreateStarted, StepWritten: true, Move: BindingMRCreating, Expiry: ApprovedExpiry(approvedAt, 7, 30)}, "", nil},
		{"a row without days keeps its expiry", state(waitingGrant, func(s *CallbackState) { s.Days = 0 }),
			with(approve, func(c *Callback) { c.ApprovedAt, c.MaxDays = approvedAt, 30 }),
			CallbackPlan{Apply: true, Step: StepCreateStarted, StepWritten: true, Move: BindingMRCreating}, "", nil},
		{"a renewal keeps its submission's expiry; its binding stays RENEWING",
			CallbackState{Kind: OperationRenew, Step: StepCreateApprovalSubmitted, Binding: BindingRenewing, BindingOwned: true, ApprovalID: "APR-1", Days: 7},
			with(approve, func(c *Callback) { c.ApprovedAt, c.MaxDays = approvedAt, 30 }),
			CallbackPlan{Apply: true, Step: StepCreateStarted, StepWritten: true}, "", nil},
		{"a renewal rejected hands the row back to its grant",
			CallbackState{Kind: OperationRenew, Step: StepCreateApprovalSubmitted, Binding: BindingRenewing, BindingOwned: true},
			Callback{Waiting: waiting, Step: StepCloseRejected, Binding: BindingRejected},
			CallbackPlan{Apply: true, Step: StepCloseRejected, StepWritten: true, Move: BindingValidated, Restore: true}, "", nil},
		{"a step the table does not allow", waitingGrant, with(approve, func(c *Callback) { c.Step = StepCalledBack }),
			CallbackPlan{}, "", ErrIllegalTransition},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := PlanCallback(c.state, c.cb)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.refused != "" {
				if got.Apply || !strings.Contains(got.Refused, c.refused) {
					t.Fatalf("plan %+v, want refused with %q", got, c.refused)
				}
				return
			}
			if got != c.want {
				t.Fatalf("plan\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}
