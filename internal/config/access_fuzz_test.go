package config

import (
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
)

// FuzzTargetAccess feeds arbitrary access modes, window bounds, zones and
// instants to the access-window resolution and checks the rules that must hold
// whatever the input: no panic; the mode is one of the three, blank means
// TEST_WINDOW and anything but OPEN/TEST_WINDOW (trimmed, any case) means
// CLOSED; a CLOSED target is never open; a TEST_WINDOW target is open only
// with a valid window in a known zone that contains the instant; an
// invalid window contains nothing.
func FuzzTargetAccess(f *testing.F) {
	for _, seed := range []struct {
		mode, start, end, zone string
		unix                   int64
	}{
		{"OPEN", "", "", "UTC", 0},
		{"TEST_WINDOW", "09:00", "17:00", "UTC", 1764500000},
		{" test_window ", "22:00", "06:00", "Europe/Berlin", 1764500000},
		{"OPNE", "09:00", "17:00", "UTC", 1764500000},
		{"", "09:00", "24:00", "Asia/Tokyo", 1764500000},
		{"TEST_WINDOW", "2026-12-01T09:00", "2026-12-01T17:00", "America/New_York", 1764590000},
		{"TEST_WINDOW", "2026-12-01T09:00:00+01:00", "2026-12-01T17:00:00+01:00", "UTC", 1764590000},
		{"TEST_WINDOW", "9", "17", "Mars/Olympus", 0},
		{"TEST_WINDOW", "17:00", "17:00", "UTC", 0},
		{"closed", "", "", "", -1},
	} {
		f.Add(seed.mode, seed.start, seed.end, seed.zone, seed.unix)
	}
	f.Fuzz(func(t *testing.T, mode, start, end, zone string, unix int64) {
		var loc *time.Location
		if l, err := time.LoadLocation(zone); err == nil && zone != "Local" && zone != "" {
			loc = l
		}
		res := resolveAccessMode(raw{v: mode, set: true, source: SourceFile})
		am, _ := res.val.(domain.AccessMode)
		switch up := strings.ToUpper(strings.TrimSpace(mode)); {
		case up == "":
			if am != domain.AccessTestWindow {
				t.Fatalf("blank mode %q → %s, want TEST_WINDOW", mode, am)
			}
		case up == "OPEN" || up == "TEST_WINDOW":
			if string(am) != up {
				t.Fatalf("mode %q → %s", mode, am)
			}
		default:
			if am != domain.AccessClosed {
				t.Fatalf("unknown mode %q → %s, want CLOSED", mode, am)
			}
		}
		set := func(s string) raw { return raw{v: s, set: s != "", source: SourceFile} }
		w, _, _ := resolveWindow(set(start), set(end), loc, am == domain.AccessTestWindow, am)
		now := time.Unix(unix%(1<<33), 0).UTC()
		valid, why := w.Valid()
		if !valid && why == "" {
			t.Fatal("an invalid window must say why")
		}
		if !valid && w.Contains(now) {
			t.Fatalf("invalid window (%s) contains %s", why, now)
		}
		open, reason := Target{AccessMode: am, Window: w}.Open(now)
		if reason == "" {
			t.Fatal("Open must say why")
		}
		switch am {
		case domain.AccessOpen:
			if !open {
				t.Fatal("OPEN must be open")
			}
		case domain.AccessClosed:
			if open {
				t.Fatal("CLOSED must never be open")
			}
		case domain.AccessTestWindow:
			if open && (!valid || loc == nil || !w.Contains(now)) {
				t.Fatalf("TEST_WINDOW open outside a valid window: valid=%v loc=%v why=%q", valid, loc, reason)
			}
		}
	})
}
