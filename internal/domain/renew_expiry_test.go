package domain

import (
	"testing"
	"time"
)

// TestRenewalExpiry: a renewal extends from the later of now and the
// current expiry, capped at now plus the target's maximum.
func TestRenewalExpiry(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	now := at("2026-12-01T10:00:00Z")
	for _, c := range []struct {
		name          string
		current       time.Time
		days, maxDays int
		want          string
	}{
		{"ending ahead: extends from the current end", at("2026-12-03T10:00:00Z"), 5, 30, "2026-12-08T10:00:00Z"},
		{"already ended: extends from now", at("2026-11-30T10:00:00Z"), 5, 30, "2026-12-06T10:00:00Z"},
		{"ending exactly now", now, 5, 30, "2026-12-06T10:00:00Z"},
		{"no current expiry: from now", time.Time{}, 5, 30, "2026-12-06T10:00:00Z"},
		{"capped at now + maximum", at("2026-12-20T10:00:00Z"), 20, 30, "2026-12-31T10:00:00Z"},
		{"exactly at the cap", at("2026-12-06T10:00:00Z"), 25, 30, "2026-12-31T10:00:00Z"},
		{"maximum unknown: no cap", at("2026-12-20T10:00:00Z"), 20, 0, "2027-01-09T10:00:00Z"},
		{"sub-second current is truncated", at("2026-12-03T10:00:00Z").Add(700 * time.Millisecond), 1, 30, "2026-12-04T10:00:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := RenewalExpiry(now, c.current, c.days, c.maxDays)
			if !got.Equal(at(c.want)) || got.Location() != time.UTC {
				t.Fatalf("RenewalExpiry(%s, %s, %d, %d) = %s, want %s UTC", now, c.current, c.days, c.maxDays, got, c.want)
			}
		})
	}
}
