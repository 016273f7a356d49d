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
