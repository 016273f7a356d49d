package store

import (
	"fmt"
	"strings"
	"time"
)

// dbTime scans a nullable time column of the hot reads, whichever form the
// driver hands it over in: a time.Time (MariaDB/MySQL, parseTime=true), or
// text or bytes (SQLite, when the statement selects the column so that the
// driver does not convert it itself, see viewTime). The zero value is NULL.
//
// Why: modernc's SQLite driver turns a DATETIME column's text into a
// time.Time by trying its list of layouts in turn, and the layout the store
// writes (sqliteTimeLayout) is only the fourth it tries: three failed
// time.Parse calls per value, each allocating its error — about a fifth of
// a status read's allocations (docs/benchmarks.md, "Status read").
// parseDBTime reads the store's one layout without allocating, and
// anything else falls back to the driver's own list (parseTimeText), so a
// value is read as the driver would have read it.
type dbTime struct {
	t     time.Time
	valid bool
}

// Scan implements sql.Scanner. The bytes a driver passes are only read,
// never kept (database/sql reuses them).
func (d *dbTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d = dbTime{}
		return nil
	case time.Time:
		*d = dbTime{t: v, valid: true}
		return nil
	case []byte:
		if t, ok := parseDBTime(v); ok {
			*d = dbTime{t: t, valid: true}
			return nil
		}
		return d.scanText(string(v))
	case string:
		return d.scanText(v)
	}
	return fmt.Errorf("scan a time: unexpected %T", src)
}

func (d *dbTime) scanText(s string) error {
	t, err := parseTimeText(s)
	if err != nil {
		return err
	}
	*d = dbTime{t: t, valid: true}
	return nil
}

// parseDBTime reads "2006-01-02 15:04:05" followed by an optional
// fraction of one to nine digits, in UTC: the text of every time the store
// writes on SQLite (Dialect.Time's sqliteTimeLayout and the DB clock's
// strftime('%Y-%m-%d %H:%M:%f'), three digits) and MariaDB's DATETIME(6)
// text (six). It returns what time.ParseInLocation("2006-01-02
// 15:04:05.999999999", s, time.UTC) returns for such a text, without
// allocating; ok is false for any other text (a different layout, a field
// out of range), which the caller hands to the general parser.
func parseDBTime[T string | []byte](s T) (t time.Time, ok bool) {
	const base = len("2006-01-02 15:04:05")
	if len(s) < base || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	f, ok := readDBTimeFields(s)
	if !ok || !f.inRange() {
		return time.Time{}, false
	}
	nsec, ok := fractionNanos(s, base)
	if !ok {
		return time.Time{}, false
	}
	return time.Date(f.year, time.Month(f.month), f.day, f.hour, f.minute, f.sec, nsec, time.UTC), true
}

// dbTimeFields is the date and time of day of a text in the store's
// layout, as written, before the range check.
type dbTimeFields struct {
	year, month, day, hour, minute, sec int
}

// readDBTimeFields takes the six fields from their fixed columns of the
// store's layout (the separators already checked); ok is false when one
// of them holds a non-digit.
func readDBTimeFields[T string | []byte](s T) (f dbTimeFields, ok bool) {
	fields := [...]struct {
		dst      *int
		from, to int
	}{
		{&f.year, 0, 4}, {&f.month, 5, 7}, {&f.day, 8, 10},
		{&f.hour, 11, 13}, {&f.minute, 14, 16}, {&f.sec, 17, 19},
	}
	for _, fl := range fields {
		n, ok := decimalAt(s, fl.from, fl.to)
		if !ok {
			return dbTimeFields{}, false
		}
		*fl.dst = n
	}
	return f, true
}

// inRange reports whether the fields name a real instant, as
// time.ParseInLocation checks them: a month of the year, a day of that
// month, an hour, minute and second of the clock (no leap second).
func (f dbTimeFields) inRange() bool {
	return f.month >= 1 && f.month <= 12 &&
		f.day >= 1 && f.day <= daysIn(f.month, f.year) &&
		f.hour <= 23 && f.minute <= 59 && f.sec <= 59
}

// fractionNanos reads what follows the seconds at s[base:]: nothing (zero),
// or '.' and one to nine digits, scaled to nanoseconds. ok is false for
// anything else.
func fractionNanos[T string | []byte](s T, base int) (nsec int, ok bool) {
	rest := len(s) - base
	if rest == 0 {
		return 0, true
	}
	digits := rest - 1
	if s[base] != '.' || digits < 1 || digits > 9 {
		return 0, false
	}
	f, ok := decimalAt(s, base+1, len(s))
	if !ok {
		return 0, false
	}
	for range 9 - digits {
		f *= 10
	}
	return f, true
}

// decimalAt is the unsigned decimal number in s[from:to]; ok is false when
// a byte there is not a digit.
func decimalAt[T string | []byte](s T, from, to int) (int, bool) {
	n := 0
	for i := from; i < to; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// daysIn is the number of days of month in year (proleptic Gregorian, as
// package time counts them).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// sqliteDriverTimeLayouts are the layouts modernc's SQLite driver tries,
// in its order, on a DATETIME column's text (its parseTimeFormats), after
// the layout of time.Time.String.
var sqliteDriverTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02T15:04",
	"2006-01-02",
}

// parseTimeText is a time column's text read as the SQLite driver reads a
// DATETIME column under the store's DSN (_timezone=UTC): the store's own
// layout at once (parseDBTime); otherwise time.Time.String's layout, then
// the driver's list, a trailing "Z" meaning UTC. Only a value the store did
// not write itself takes the slow way; an unreadable one is an error, as
// it is for the driver's conversion.
func parseTimeText(s string) (time.Time, error) {
	if t, ok := parseDBTime(s); ok {
		return t, nil
	}
	str := s
	if i := strings.Index(str, "m="); i > 0 {
		str = str[:i]
	}
	if t, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", strings.TrimSpace(str)); err == nil {
		return t.UTC(), nil
	}
	ts, hadZ := strings.CutSuffix(s, "Z")
	for _, layout := range sqliteDriverTimeLayouts {
		var t time.Time
		var err error
		if hadZ {
			t, err = time.Parse(layout, ts)
		} else {
			t, err = time.ParseInLocation(layout, ts, time.UTC)
		}
		if err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("scan a time: %q is not a time", s)
}
