package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
)

// TestAccessModeResolvesWithItsFallback: a target's access mode is read
// case- and space-insensitively; a missing or empty one falls back to the
// test window and an unknown one to closed, each with the reason said.
func TestAccessModeResolvesWithItsFallback(t *testing.T) {
	for _, c := range []struct {
		name     string
		yaml     string
		want     domain.AccessMode
		fellBack bool
		reason   string
	}{
		{"missing means test window", missing, domain.AccessTestWindow, true, "fell back: missing → TEST_WINDOW"},
		{"empty means test window", `""`, domain.AccessTestWindow, true, "fell back: empty → TEST_WINDOW"},
		{"null means test window", ``, domain.AccessTestWindow, true, "empty → TEST_WINDOW"},
		{"whitespace means test window", `"   "`, domain.AccessTestWindow, true, "empty → TEST_WINDOW"},
		{"OPEN is open", `OPEN`, domain.AccessOpen, false, ""},
		{"lower-case open is open", `open`, domain.AccessOpen, false, ""},
		{"padded Test_Window is test window", `"  Test_Window "`, domain.AccessTestWindow, false, ""},
		{"CLOSED is closed", `CLOSED`, domain.AccessClosed, false, ""},
		{"misspelled OPNE is closed", `OPNE`, domain.AccessClosed, true, "fell back: value 'OPNE' unknown → CLOSED"},
		{"TEST-WINDOW with a dash is closed", `TEST-WINDOW`, domain.AccessClosed, true, "unknown → CLOSED"},
		{"a number is closed", `-1`, domain.AccessClosed, true, "unknown → CLOSED"},
		{"a boolean is closed", `true`, domain.AccessClosed, true, "unknown → CLOSED"},
		{"a list is closed", `[OPEN]`, domain.AccessClosed, true, "unknown → CLOSED"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := "targets:\n  db:\n    title: DB\n"
			if c.yaml != missing {
				doc += "    accessMode: " + c.yaml + "\n"
			}
			s := loadYAML(t, doc)
			tg, ok := s.Target("db")
			require.True(t, ok)
			require.Equal(t, c.want, tg.AccessMode)
			r, _ := s.Resolution("targets.db.accessMode")
			require.Equal(t, c.fellBack, r.FellBack)
			require.Equal(t, string(c.want), r.Value)
			if c.fellBack {
				require.Contains(t, r.Reason, c.reason)
				require.Regexp(t, "^fell back: ", r.Reason)
			}
		})
	}
}

func TestTargetFieldsFallBack(t *testing.T) {
	for _, c := range []struct {
		name, field, yaml, want string
		fellBack                bool
		reason                  string
	}{
		{"missing title is the key", "title", missing, "db", false, reasonBuiltin},
		{"blank title is the key", "title", `"  "`, "db", true, "empty → default db"},
		{"missing file is bindings/<key>.yaml", "file", missing, "bindings/db.yaml", false, reasonBuiltin},
		{"empty file is bindings/<key>.yaml", "file", `""`, "bindings/db.yaml", true, "empty → default bindings/db.yaml"},
		{"absolute file falls back", "file", `/etc/passwd`, "bindings/db.yaml", true, "leaves the repository"},
		{"file escaping with .. falls back", "file", `bindings/../../x.yaml`, "bindings/db.yaml", true, "leaves the repository"},
		{"file is cleaned", "file", `./bindings//db2.yaml`, "bindings/db2.yaml", false, ""},
		{"missing batching is true", "batching", missing, "true", false, reasonBuiltin},
		{"empty batching is true", "batching", `""`, "true", true, "empty → default true"},
		{"misspelled batching is true", "batching", `flase`, "true", true, "not a boolean → default true"},
		{"upper-case FALSE turns batching off", "batching", `"FALSE"`, "false", false, ""},
		{"missing maxDays is 30", "maxDays", missing, "30", false, reasonBuiltin},
		{"empty maxDays is 30", "maxDays", `"   "`, "30", true, "empty → default 30"},
		{"negative maxDays is clamped to 1", "maxDays", `-3`, "1", true, "value '-3' negative → clamped to 1"},
		{"zero maxDays is raised to 1", "maxDays", `0`, "1", true, "below minimum 1"},
		{"non-numeric maxDays is 30", "maxDays", `abc`, "30", true, "value 'abc' not a number → default 30"},
		{"huge maxDays is capped", "maxDays", `100000`, "3650", true, "above maximum 3650"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := "targets:\n  db:\n    accessMode: OPEN\n"
			if c.yaml != missing {
				doc += "    " + c.field + ": " + c.yaml + "\n"
			}
			s := loadYAML(t, doc)
			r, ok := s.Resolution("targets.db." + c.field)
			require.True(t, ok)
			require.Equal(t, c.want, r.Value, r.Reason)
			require.Equal(t, c.fellBack, r.FellBack, r.Reason)
			if c.reason != "" {
				require.Contains(t, r.Reason, c.reason)
			}
		})
	}
}

func TestTargetDeclaredWithNoFieldsIsRestricted(t *testing.T) {
	s := loadYAML(t, "targets:\n  bare: {}\n  nulled:\n")
	for _, key := range []string{"bare", "nulled"} {
		tg, ok := s.Target(key)
		require.True(t, ok, key)
		require.Equal(t, Target{Key: key, Title: key, File: "bindings/" + key + ".yaml", AccessMode: domain.AccessTestWindow,
			Window: tg.Window, Batching: true, MaxDays: 30, Owners: []string{}, ReviewDueIn: 14 * 24 * time.Hour}, tg)
		open, why := tg.Open(time.Now())
		require.False(t, open)
		require.Contains(t, why, "window missing")
	}
	require.Len(t, s.Targets(), 2)
	_, ok := s.Target("absent")
	require.False(t, ok)
}

// windowTarget loads one TEST_WINDOW target with the given window and zone.
func windowTarget(t *testing.T, tz, start, end string) Target {
	t.Helper()
	doc := "targets:\n  db:\n    accessMode: TEST_WINDOW\n    window:\n"
	if start != missing {
		doc += "      start: " + start + "\n"
	}
	if end != missing {
		doc += "      end: " + end + "\n"
	}
	if tz != "" {
		doc += "access:\n  timezone: " + tz + "\n"
	}
	tg, ok := loadYAML(t, doc).Target("db")
	require.True(t, ok)
	return tg
}

func TestTestWindowOpensOnlyInsideAWellFormedWindow(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	utc := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return tm
	}
	for _, c := range []struct {
		name, tz, start, end string
		at                   time.Time
		open                 bool
		why                  string
	}{
		{"daily window: at start is inside", "", `"09:00"`, `"17:00"`, utc("2026-12-01T09:00:00Z"), true, "inside the test window 09:00–17:00 UTC"},
		{"daily window: a nanosecond before start is outside", "", `"09:00"`, `"17:00"`, utc("2026-12-01T09:00:00Z").Add(-time.Nanosecond), false, "outside the test window"},
		{"daily window: at end is outside", "", `"09:00"`, `"17:00"`, utc("2026-12-01T17:00:00Z"), false, "outside"},
		{"daily window: just before end is inside", "", `"09:00"`, `"17:00"`, utc("2026-12-01T16:59:59Z"), true, "inside"},
		{"daily window is read in access.timezone, not UTC", "Europe/Berlin", `"09:00"`, `"17:00"`, utc("2026-12-01T08:30:00Z"), true, "Europe/Berlin"},
		{"daily window in Berlin is closed at 16:30 UTC", "Europe/Berlin", `"09:00"`, `"17:00"`, utc("2026-12-01T16:30:00Z"), false, "outside"},
		{"daily window keeps local hours in summer time", "Europe/Berlin", `"09:00"`, `"17:00"`, time.Date(2026, 7, 1, 9, 0, 0, 0, berlin), true, "inside"},
		{"same instant seen from another zone gives the same answer", "Europe/Berlin", `"09:00"`, `"17:00"`, utc("2026-12-01T08:30:00Z").In(time.FixedZone("X", -10*3600)), true, "inside"},
		{"overnight window: late evening is inside", "", `"22:00"`, `"06:00"`, utc("2026-12-01T23:30:00Z"), true, "inside"},
		{"overnight window: early morning is inside", "", `"22:00"`, `"06:00"`, utc("2026-12-01T05:59:00Z"), true, "inside"},
		{"overnight window: midday is outside", "", `"22:00"`, `"06:00"`, utc("2026-12-01T12:00:00Z"), false, "outside"},
		{"end 24:00 means midnight", "", `"18:00"`, `"24:00"`, utc("2026-12-01T23:59:59Z"), true, "inside"},
		{"seconds are accepted", "", `"09:00:30"`, `"09:00:45"`, utc("2026-12-01T09:00:40Z"), true, "inside"},
		{"one-off window: inside", "", `"2026-12-01T09:00"`, `"2026-12-05T18:00"`, utc("2026-12-03T00:00:00Z"), true, "inside"},
		{"one-off window: at start is inside", "", `"2026-12-01T09:00"`, `"2026-12-05T18:00"`, utc("2026-12-01T09:00:00Z"), true, "inside"},
		{"one-off window: at end is outside", "", `"2026-12-01T09:00"`, `"2026-12-05T18:00"`, utc("2026-12-05T18:00:00Z"), false, "outside"},
		{"one-off window is local to access.timezone", "Asia/Tokyo", `"2026-12-01T09:00"`, `"2026-12-01T10:00"`, utc("2026-12-01T00:30:00Z"), true, "inside"},
		{"unquoted YAML timestamp is wall-clock in access.timezone", "Asia/Tokyo", `2026-12-01T09:00:00`, `2026-12-01T10:00:00`, utc("2026-12-01T00:30:00Z"), true, "inside"},
		{"explicit offset pins the instant", "Asia/Tokyo", `"2026-12-01T09:00:00+00:00"`, `"2026-12-01T10:00:00+00:00"`, utc("2026-12-01T09:30:00Z"), true, "inside"},
		{"dates mean midnight", "", `2026-12-01`, `2026-12-02`, utc("2026-12-01T23:00:00Z"), true, "inside"},
		{"missing window is outside", "", missing, missing, utc("2026-12-01T12:00:00Z"), false, "window missing → outside the window"},
		{"missing start is outside", "", missing, `"17:00"`, utc("2026-12-01T12:00:00Z"), false, "window.start missing"},
		{"missing end is outside", "", `"09:00"`, missing, utc("2026-12-01T12:00:00Z"), false, "window.end missing"},
		{"empty start is outside", "", `""`, `"17:00"`, utc("2026-12-01T12:00:00Z"), false, "window.start missing"},
		{"malformed start is outside", "", `"9am"`, `"17:00"`, utc("2026-12-01T12:00:00Z"), false, "window.start '9am' malformed"},
		{"hour 25 is malformed", "", `"09:00"`, `"25:00"`, utc("2026-12-01T12:00:00Z"), false, "window.end '25:00' malformed"},
		{"negative number is malformed", "", `-1`, `"17:00"`, utc("2026-12-01T12:00:00Z"), false, "malformed"},
		{"mixed forms are outside", "", `"09:00"`, `"2026-12-05T18:00"`, utc("2026-12-01T12:00:00Z"), false, "different forms"},
		{"equal start and end is outside", "", `"09:00"`, `"09:00"`, utc("2026-12-01T09:00:00Z"), false, "empty window"},
		{"end before start (one-off) is outside", "", `"2026-12-05T09:00"`, `"2026-12-01T09:00"`, utc("2026-12-03T00:00:00Z"), false, "not after"},
		{"unknown zone makes every window outside", "Mars/Olympus", `"00:00"`, `"24:00"`, utc("2026-12-01T12:00:00Z"), false, "access.timezone unknown"},
		{"misspelled-case zone is unknown", "europe/berlin", `"00:00"`, `"24:00"`, utc("2026-12-01T12:00:00Z"), false, "access.timezone unknown"},
		{"the host's Local zone is refused", "Local", `"00:00"`, `"24:00"`, utc("2026-12-01T12:00:00Z"), false, "access.timezone unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := windowTarget(t, c.tz, c.start, c.end)
			open, why := tg.Open(c.at)
			require.Equal(t, c.open, open, why)
			require.Contains(t, why, c.why)
		})
	}
}

func TestWindowResolutionsExplainTheFallback(t *testing.T) {
	s := loadYAML(t, "targets:\n  db:\n    window:\n      start: nine\n      end: \"17:00\"\n")
	rs, _ := s.Resolution("targets.db.window.start")
	re, _ := s.Resolution("targets.db.window.end")
	require.True(t, rs.FellBack)
	require.Equal(t, "fell back: window.start 'nine' malformed → outside the window", rs.Reason)
	require.False(t, re.FellBack)

	s = loadYAML(t, "targets:\n  db:\n    accessMode: OPEN\n")
	rs, _ = s.Resolution("targets.db.window.start")
	require.False(t, rs.FellBack, "an OPEN target does not need a window")
	require.Equal(t, "not set (not used with access mode OPEN)", rs.Reason)
}

func TestOpenAndClosedIgnoreTheWindow(t *testing.T) {
	s := loadYAML(t, "access:\n  timezone: Mars/Olympus\ntargets:\n  a:\n    accessMode: open\n  c:\n    accessMode: closed\n    window: {start: \"00:00\", end: \"24:00\"}\n  typo:\n    accessMode: opne\n")
	a, _ := s.Target("a")
	open, why := a.Open(time.Now())
	require.True(t, open)
	require.Equal(t, "access mode OPEN", why)
	for _, key := range []string{"c", "typo"} {
		tg, _ := s.Target(key)
		open, why = tg.Open(time.Now())
		require.False(t, open, key)
		require.Equal(t, "access mode CLOSED", why)
	}
}

func TestTimezoneResolution(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
		fellBack         bool
		reason           string
	}{
		{"missing is UTC", missing, "UTC", false, reasonBuiltin},
		{"empty is UTC", `""`, "UTC", true, "empty → default UTC"},
		{"whitespace is UTC", `"  "`, "UTC", true, "empty → default UTC"},
		{"lower-case utc is UTC", `utc`, "UTC", false, ""},
		{"IANA zone is kept", `Europe/Berlin`, "Europe/Berlin", false, ""},
		{"unknown zone closes windows", `Mars/Olympus`, "Mars/Olympus (unknown)", true, "zone 'Mars/Olympus' unknown → every window is outside"},
		{"Local is refused", `Local`, "Local (refused)", true, "host's zone"},
		{"a number is unknown", `-3`, "-3 (unknown)", true, "unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := "log: {level: info}\n"
			if c.yaml != missing {
				doc = yamlFor(KeyAccessTimezone, c.yaml)
			}
			loc, r := loadYAML(t, doc).Location()
			require.Equal(t, c.want, r.Value)
			require.Equal(t, c.fellBack, r.FellBack)
			require.Contains(t, r.Reason, c.reason)
			if c.fellBack && c.want != "UTC" {
				require.Nil(t, loc)
			}
		})
	}
}
