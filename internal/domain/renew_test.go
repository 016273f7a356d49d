package domain

import (
	"testing"
	"time"
)

func TestRenewWindowFrom(t *testing.T) {
	exp := time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name     string
		w        RenewWindow
		duration time.Duration
		want     time.Time
	}{
		{"the last quarter of a long grant", RenewWindow{Percent: 25, Min: day}, 40 * day, exp.Add(-10 * day)},
		{"the minimum for a short grant", RenewWindow{Percent: 25, Min: day}, 2 * day, exp.Add(-day)},
		{"a grant shorter than the minimum is renewable throughout", RenewWindow{Percent: 25, Min: day}, 12 * time.Hour, exp.Add(-day)},
		{"no percentage leaves the minimum", RenewWindow{Percent: 0, Min: 2 * time.Hour}, 40 * day, exp.Add(-2 * time.Hour)},
		{"no minimum leaves the percentage", RenewWindow{Percent: 50, Min: 0}, 4 * day, exp.Add(-2 * day)},
		{"an unknown duration counts as the minimum", RenewWindow{Percent: 25, Min: day}, 0, exp.Add(-day)},
		{"a percentage over 100 is 100", RenewWindow{Percent: 400, Min: 0}, 4 * day, exp.Add(-4 * day)},
		{"whole seconds", RenewWindow{Percent: 25, Min: 0}, 3*day + 7*time.Millisecond, exp.Add(-(18 * time.Hour)).Add(-time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.w.From(exp, tc.duration); !got.Equal(tc.want) {
				t.Fatalf("From = %s, want %s", got, tc.want)
			}
		})
	}
	if got := (RenewWindow{Percent: 25, Min: day}).From(time.Time{}, day); !got.IsZero() {
		t.Fatalf("a grant without expiry has no renewal time, got %s", got)
	}
}

func TestRenewalEndOf(t *testing.T) {
	cases := []struct {
		name     string
		from, to BindingStatus
		without  bool
		step     StepStatus
		want     RenewalOutcome
	}{
		{"merged and deployed", BindingRenewing, BindingValidated, false, StepCalledBack, RenewalInEffect},
		{"confirmed by reconciliation", BindingRenewing, BindingValidated, false, StepReconciled, RenewalInEffect},
		{"the approver said no", BindingRenewing, BindingValidated, true, StepCloseRejected, RenewalRejected},
		{"the approval withdrawn", BindingRenewing, BindingValidated, true, StepCloseWithdrawn, RenewalRejected},
		{"its MR closed", BindingRenewing, BindingValidated, true, StepCloseMRClosed, RenewalClosed},
		{"withdrawn by its requester", BindingRenewing, BindingValidated, true, StepCloseRequesterWithdrawn, RenewalClosed},
		{"a grant in effect is no renewal", BindingMerged, BindingValidated, false, StepCalledBack, ""},
		{"a renewal's progress ends nothing", BindingRenewing, BindingRenewing, false, StepHandleMerged, ""},
		{"a step repaired on a row already in effect", BindingValidated, BindingValidated, false, StepCalledBack, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RenewalEndOf(c.from, c.to, c.without, c.step); got != c.want {
				t.Fatalf("RenewalEndOf(%s, %s, %v, %s) = %q, want %q", c.from, c.to, c.without, c.step, got, c.want)
			}
		})
	}
}

// TestExpiryCutOf: what the expiry scan does to a renewal in every place
// of both flows when its grant has expired.
func TestExpiryCutOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		place RenewalPlace
		want  ExpiryCut
	}{
		// Approve-first.
		{"approve-first, approval being submitted, no MR", RenewalPlace{Step: StepCreateApprovalSubmitting}, ExpiryCutWithRevocation},
		{"approve-first, waiting for its approval, no MR", RenewalPlace{Step: StepCreateApprovalSubmitted}, ExpiryCutWithRevocation},
		{"approved, its MR being created", RenewalPlace{Step: StepCreateStarted}, ExpiryCutWithdraw},
		{"approved, branch created", RenewalPlace{Step: StepCreateBranchCreated}, ExpiryCutWithdraw},
		{"approved, committed", RenewalPlace{Step: StepCreateCommitted}, ExpiryCutWithdraw},
		{"approved, MR open", RenewalPlace{Step: StepCreateMRCreated, HasMR: true}, ExpiryCutWithdraw},
		{"approved, MR's pipeline running", RenewalPlace{Step: StepCreatePipelineRunning, HasMR: true}, ExpiryCutWithdraw},
		{"approved, MR checked", RenewalPlace{Step: StepCreateSucceeded, HasMR: true}, ExpiryCutWithdraw},
		{"approved, being approved by the bots", RenewalPlace{Step: StepHandleStarted, HasMR: true}, ExpiryCutWithdraw},
		{"approved, being merged", RenewalPlace{Step: StepHandleApproved, HasMR: true}, ExpiryCutWithdraw},
		{"approved, being rebased", RenewalPlace{Step: StepHandleRebasing, HasMR: true}, ExpiryCutWithdraw},
		{"approved, pipeline after the rebase", RenewalPlace{Step: StepHandlePipelineRunning, HasMR: true}, ExpiryCutWithdraw},
		{"merged: merged wins", RenewalPlace{Step: StepHandleMerged, HasMR: true}, ExpiryCutNone},
		{"in the batch set", RenewalPlace{Step: StepCreateAdmitted, InSet: true}, ExpiryCutWithRevocation},
		{"claimed into a round", RenewalPlace{Step: StepCreateAdmitted, Claimed: true}, ExpiryCutLeftToBatch},
		{"admitted, neither in the set nor claimed (a claim in flight)", RenewalPlace{Step: StepCreateAdmitted}, ExpiryCutLeftToBatch},
		{"in a batch, MR open", RenewalPlace{Step: StepCreateMRCreated, Claimed: true}, ExpiryCutLeftToBatch},
		{"in a batch, pipeline running", RenewalPlace{Step: StepCreatePipelineRunning, Claimed: true}, ExpiryCutLeftToBatch},
		{"in a batch, being merged", RenewalPlace{Step: StepHandleApproved, Claimed: true}, ExpiryCutLeftToBatch},
		{"in a batch, stopped (a BLOCKED batch)", RenewalPlace{Step: StepHandleMergeFailed, Claimed: true}, ExpiryCutLeftToBatch},
		{"in a batch, merged", RenewalPlace{Step: StepHandleMerged, Claimed: true}, ExpiryCutNone},
		// Legacy: the MR first, the approval while it waits.
		{"legacy, MR being created", RenewalPlace{Step: StepCreateStarted}, ExpiryCutWithdraw},
		{"legacy, pipeline running", RenewalPlace{Step: StepCreatePipelineRunning, HasMR: true}, ExpiryCutWithdraw},
		{"legacy, approval being submitted, MR open", RenewalPlace{Step: StepCreateApprovalSubmitting, HasMR: true}, ExpiryCutWithdraw},
		{"legacy, waiting for its approval, MR open", RenewalPlace{Step: StepCreateApprovalSubmitted, HasMR: true}, ExpiryCutWithdraw},
		{"legacy, approved, being merged", RenewalPlace{Step: StepHandleApproved, HasMR: true}, ExpiryCutWithdraw},
		// Stopped on a failure, either flow.
		{"stopped: pipeline failed", RenewalPlace{Step: StepCreatePipelineFailed, HasMR: true}, ExpiryCutWithdraw},
		{"stopped: merge failed", RenewalPlace{Step: StepHandleMergeFailed, HasMR: true}, ExpiryCutWithdraw},
		{"stopped: approval failed", RenewalPlace{Step: StepCreateApprovalFailed}, ExpiryCutWithdraw},
		// Ended.
		{"cut already", RenewalPlace{Step: StepRenewExpired, HasMR: true}, ExpiryCutNone},
		{"given back", RenewalPlace{Step: StepRenewRevoked}, ExpiryCutNone},
		{"rejected", RenewalPlace{Step: StepCloseRejected}, ExpiryCutNone},
		{"withdrawn by its requester", RenewalPlace{Step: StepCloseRequesterWithdrawn, HasMR: true}, ExpiryCutNone},
		{"in effect", RenewalPlace{Step: StepCalledBack, HasMR: true}, ExpiryCutNone},
	} {
		if got := ExpiryCutOf(tc.place); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// Every step the scan reads is one a cut may leave from, and no such
	// step of a renewal no round claimed is left alone.
	for _, s := range ExpiryCutSteps() {
		for _, p := range []RenewalPlace{{Step: s}, {Step: s, HasMR: true}, {Step: s, InSet: s == StepCreateAdmitted}} {
			if c := ExpiryCutOf(p); c == ExpiryCutNone {
				t.Errorf("%s %+v: read by the scan but not cut", s, p)
			}
		}
	}
}
