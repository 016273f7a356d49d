package store

import (
	"regexp"
	"testing"
	"time"
)

// refLayout is the layout whose accepted texts parseDBTime must read
// exactly as package time does.
const refLayout = "2006-01-02 15:04:05.999999999"

// storeTimeText is the texts parseDBTime must accept: the store's layout
// with a fraction of one to nine digits or none.
var storeTimeText = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,9})?$`)

// checkParseDBTime is the property: where parseDBTime accepts, package
// time accepts and reads the same instant in the same representation;
// where package time rejects, parseDBTime rejects; every text of the
// store's layout that package time reads, parseDBTime reads.
func checkParseDBTime(t *testing.T, s string) {
	t.Helper()
	got, ok := parseDBTime(s)
	gotB, okB := parseDBTime([]byte(s))
	if ok != okB || got != gotB {
		t.Fatalf("%q: string %v %v, bytes %v %v", s, got, ok, gotB, okB)
	}
	want, err := time.ParseInLocation(refLayout, s, time.UTC)
	switch {
	case ok && err != nil:
		t.Fatalf("%q: parseDBTime read %v, package time refuses it: %v", s, got, err)
	case ok && got != want: // == on time.Time: the same wall, ext and location
		t.Fatalf("%q: parseDBTime read %v, package time %v", s, got, want)
	case !ok && err == nil && storeTimeText.MatchString(s):
		t.Fatalf("%q: the store's layout, read by package time as %v, refused by parseDBTime", s, want)
	}
}

func TestParseDBTime(t *testing.T) {
	for _, s := range []string{
		// what the store writes: Dialect.Time and strftime on SQLite,
		// DATETIME(6) text on MariaDB, whole seconds
		"2026-12-01 19:57:56.123", "2026-12-01 19:57:56.000", "2026-12-01 19:57:56.123456",
		"2026-12-01 19:57:56", "2026-12-01 19:57:56.1", "2026-12-01 19:57:56.123456789",
		"0000-01-01 00:00:00.000", "9999-12-31 23:59:59.999",
		// calendar edges
		"2024-02-29 12:00:00.000", "2000-02-29 12:00:00.000", "1900-02-29 12:00:00.000", "2023-02-29 12:00:00.000",
		"2026-04-30 00:00:00", "2026-04-31 00:00:00", "2026-01-31 00:00:00", "2026-01-32 00:00:00",
		"2026-00-10 00:00:00", "2026-13-10 00:00:00", "2026-01-00 00:00:00",
		"2026-01-01 24:00:00", "2026-01-01 23:60:00", "2026-01-01 23:59:60",
		// not the store's layout: refused here, left to the general parser
		"2026-12-01 19:57:56.", "2026-12-01 19:57:56.1234567891", "2026-12-01 19:57:56,123",
		"2026-12-01T19:57:56.123", "2026-12-01 19:57:56.123Z", "2026-12-01 19:57:56.123+00:00",
		"2026-12-01 9:57:56.123", "2026-12-01 19:57", "2026-12-01", "", "garbage", "2026-12-01 19:57:56.12a",
		"+026-12-01 19:57:56", "2026-1-01 19:57:56", " 2026-12-01 19:57:56",
	} {
		checkParseDBTime(t, s)
	}
	// Dialect.Time's text for a spread of instants reads back as the
	// instant at SQLite's precision.
	d := Dialect{name: DriverSQLite}
	for i := range 2000 {
		in := time.Date(1970+i%130, time.Month(1+i%12), 1+i%28, i%24, i%60, (i*7)%60, i*7919%1e9, time.UTC)
		text := d.Time(in).(string)
		got, ok := parseDBTime(text)
		if !ok || !got.Equal(in.Truncate(time.Millisecond)) {
			t.Fatalf("%v written as %q read as %v %v", in, text, got, ok)
		}
	}
}

func FuzzParseDBTime(f *testing.F) {
	for _, s := range []string{"2026-12-01 19:57:56.123", "2026-12-01 19:57:56.123456", "2026-12-01 19:57:56",
		"2024-02-29 23:59:59.999999999", "2026-12-01 19:57:56.", "2026-12-01T19:57:56Z"} {
		f.Add(s)
	}
	f.Fuzz(checkParseDBTime)
}

// A text the store did not write itself is read as the SQLite driver
// reads a DATETIME column (its layouts in its order), so the narrow read
// never reads a value differently from the full one.
func TestParseTimeTextFallsBackToTheDriversLayouts(t *testing.T) {
	for s, want := range map[string]time.Time{
		"2026-12-01 19:57:56.123":             time.Date(2026, 12, 1, 19, 57, 56, 123e6, time.UTC),
		"2026-12-01 20:57:56.5+01:00":         time.Date(2026, 12, 1, 19, 57, 56, 5e8, time.UTC),
		"2026-12-01T19:57:56.123456789-02:00": time.Date(2026, 12, 1, 21, 57, 56, 123456789, time.UTC),
		"2026-12-01T19:57:56Z":                time.Date(2026, 12, 1, 19, 57, 56, 0, time.UTC),
		"2026-12-01 19:57":                    time.Date(2026, 12, 1, 19, 57, 0, 0, time.UTC),
		"2026-12-01":                          time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		"2026-12-01 19:57:56.1234567891":      time.Date(2026, 12, 1, 19, 57, 56, 123456789, time.UTC),
		"2026-12-01 19:57:56.5 +0100 CET":     time.Date(2026, 12, 1, 18, 57, 56, 5e8, time.UTC),
	} {
		got, err := parseTimeText(s)
		if err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", s, got, err, want)
		}
	}
	if _, err := parseTimeText("not a time"); err == nil {
		t.Error("a text that is no time was read")
	}
}

func TestDBTimeScan(t *testing.T) {
	var d dbTime
	at := time.Date(2026, 12, 1, 19, 57, 56, 123e6, time.UTC)
	for _, src := range []any{at, "2026-12-01 19:57:56.123", []byte("2026-12-01 19:57:56.123"), []byte("2026-12-01T19:57:56.123Z")} {
		if err := d.Scan(src); err != nil || !d.valid || d.t != at {
			t.Errorf("Scan(%v): %+v %v", src, d, err)
		}
		if err := d.Scan(nil); err != nil || d.valid || !d.t.IsZero() {
			t.Errorf("Scan(nil) after %v: %+v %v", src, d, err)
		}
	}
	for _, src := range []any{int64(5), []byte("soon")} {
		if err := d.Scan(src); err == nil {
			t.Errorf("Scan(%v) read %+v", src, d)
		}
	}
}

// parseDBTime reads without allocating: the point of it.
func TestParseDBTimeDoesNotAllocate(t *testing.T) {
	b := []byte("2026-12-01 19:57:56.123")
	if n := testing.AllocsPerRun(100, func() {
		if _, ok := parseDBTime(b); !ok {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per parse", n)
	}
}
