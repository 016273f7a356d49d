package domain

import (
	"testing"
	"time"
)

// TestApprovedExpiry: an approve-first grant's days count from its
// approval, capped at the approval plus the target's maximum.
func TestApprovedExpiry(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	approved := at("2026-12-04T09:30:00Z")
	for _, c := range []struct {
		name          string
		approvedAt    time.Time
		days, maxDays int
		want          string
	}{
		{"approval plus days", approved, 5, 30, "2026-12-09T09:30:00Z"},
		{"the maximum itself", approved, 30, 30, "2027-01-03T09:30:00Z"},
		{"capped at approval plus maximum", approved, 40, 30, "2027-01-03T09:30:00Z"},
		{"maximum unknown: no cap", approved, 40, 0, "2027-01-13T09:30:00Z"},
		{"sub-second approval is truncated", approved.Add(900 * time.Millisecond), 1, 30, "2026-12-05T09:30:00Z"},
		{"another zone comes out UTC", approved.In(time.FixedZone("CET", 3600)), 1, 30, "2026-12-05T09:30:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ApprovedExpiry(c.approvedAt, c.days, c.maxDays)
			if !got.Equal(at(c.want)) || got.Location() != time.UTC {
				t.Fatalf("ApprovedExpiry(%s, %d, %d) = %s, want %s UTC", c.approvedAt, c.days, c.maxDays, got, c.want)
			}
		})
	}
}

// TestAwaitsApproval: only the steps before a decision wait for one.
func TestAwaitsApproval(t *testing.T) {
	for _, s := range Steps() {
		want := s == StepCreateApprovalSubmitting || s == StepCreateApprovalSubmitted || s == StepCreateApprovalFailed
		if got := AwaitsApproval(s); got != want {
			t.Errorf("AwaitsApproval(%s) = %v, want %v", s, got, want)
		}
	}
}
