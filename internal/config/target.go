package config

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"changeflow/internal/domain"
)

// Target is one resolved targets.<key> entry (docs/workflow.md). It is a value: the
// snapshot hands out copies.
type Target struct {
	// Key is the target's identifier as configured, e.g. payments-db-readonly.
	Key string
	// Title is shown to users; defaults to Key.
	Title string
	// File is the binding file in the config repo; defaults to
	// bindings/<key>.yaml.
	File string
	// AccessMode is resolved so: blank → TEST_WINDOW, unknown →
	// CLOSED.
	AccessMode domain.AccessMode
	// Window is the test window, meaningful when AccessMode is TEST_WINDOW.
	Window Window
	// Batching says whether approved requests join batch rounds
	// (approve-first flow); default true.
	Batching bool
	// MaxDays caps how long a binding may last, ≥ 1.
	MaxDays int
	// Owners are the accounts that review the target's access
	// (docs/reviews.md), lower-cased; empty: only an operator with
	// ops.write decides its review items.
	Owners []string
	// ReviewEvery is how often the schedule opens a review campaign; 0:
	// no scheduled campaign (an operator may still open one).
	ReviewEvery time.Duration
	// ReviewDueIn is how long a scheduled campaign stays open before its
	// undecided items take the default.
	ReviewDueIn time.Duration
}

// Window is a target's test window in access.timezone. Two forms are
// accepted, and both bounds must use the same one:
//   - daily: "09:00" to "17:00" every day (end "24:00" means midnight; an
//     end before the start spans midnight, e.g. "22:00" to "06:00");
//   - once: local date-times "2026-12-01T09:00" to "2026-12-05T18:00" (or
//     dates, meaning midnight; an explicit offset such as
//     "2026-12-01T09:00:00+01:00" pins the instant).
//
// Start is inclusive, end exclusive. Anything missing or malformed makes
// the window invalid, which means outside.
type Window struct {
	// Start and End are the bounds as configured, for display.
	Start, End string

	daily      bool
	startClock time.Duration // daily: offset from midnight
	endClock   time.Duration
	startAt    time.Time // once
	endAt      time.Time
	loc        *time.Location // nil: access.timezone unknown
	invalid    string         // why the window is unusable; "" when valid
}

// Valid reports whether the window is usable, and if not, why.
func (w Window) Valid() (bool, string) { return w.invalid == "", w.invalid }

// Contains reports whether now lies inside the window. An invalid window
// contains nothing.
func (w Window) Contains(now time.Time) bool {
	if w.invalid != "" || w.loc == nil {
		return false
	}
	if !w.daily {
		return !now.Before(w.startAt) && now.Before(w.endAt)
	}
	t := now.In(w.loc)
	y, m, d := t.Date()
	// time.Date reads the wall clock in loc, so a window keeps its local
	// hours across DST changes; 24:00 normalizes to the next midnight.
	at := func(off time.Duration) time.Time {
		return time.Date(y, m, d, int(off/time.Hour), int(off%time.Hour/time.Minute), int(off%time.Minute/time.Second), 0, w.loc)
	}
	start, end := at(w.startClock), at(w.endClock)
	if w.startClock < w.endClock {
		return !t.Before(start) && t.Before(end)
	}
	// Spans midnight: open from start until midnight, and from midnight to end.
	return !t.Before(start) || t.Before(end)
}

// String shows the window for messages: "09:00–17:00 UTC".
func (w Window) String() string {
	zone := "?"
	if w.loc != nil {
		zone = w.loc.String()
	}
	return fmt.Sprintf("%s–%s %s", w.Start, w.End, zone)
}

// Open decides the access window for this target at now: OPEN is open, CLOSED is
// closed, TEST_WINDOW is open only inside a well-formed window in
// access.timezone. why is a short operator-facing explanation (for logs and
// the TARGET_NOT_OPEN detail).
func (t Target) Open(now time.Time) (open bool, why string) {
	switch t.AccessMode {
	case domain.AccessOpen:
		return true, "access mode OPEN"
	case domain.AccessTestWindow:
		if t.Window.loc == nil {
			return false, "access.timezone unknown → outside the window"
		}
		if t.Window.invalid != "" {
			return false, t.Window.invalid + " → outside the window"
		}
		if t.Window.Contains(now) {
			return true, "inside the test window " + t.Window.String()
		}
		return false, "outside the test window " + t.Window.String()
	default:
		return false, "access mode CLOSED"
	}
}

// windowBound is one parsed bound.
type windowBound struct {
	daily bool
	clock time.Duration
	at    time.Time
}

// parseBound parses one window bound in loc. isEnd allows "24:00".
func parseBound(s string, loc *time.Location, isEnd bool) (windowBound, bool) {
	for _, layout := range []string{"15:04", "15:04:05"} {
		if c, err := time.Parse(layout, s); err == nil && len(s) >= 4 {
			return windowBound{daily: true, clock: time.Duration(c.Hour())*time.Hour + time.Duration(c.Minute())*time.Minute + time.Duration(c.Second())*time.Second}, true
		}
	}
	if isEnd && (s == "24:00" || s == "24:00:00") {
		return windowBound{daily: true, clock: 24 * time.Hour}, true
	}
	if at, err := time.Parse(time.RFC3339, s); err == nil {
		return windowBound{at: at}, true
	}
	if loc == nil {
		loc = time.UTC // only syntax matters: an unknown zone closes the window anyway
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02"} {
		if at, err := time.ParseInLocation(layout, s, loc); err == nil {
			return windowBound{at: at}, true
		}
	}
	return windowBound{}, false
}

// windowText turns a raw bound into text. YAML decodes an unquoted
// 2026-12-01T09:00:00 as a UTC timestamp; it is taken as a wall-clock time
// in access.timezone instead (UTC offsets must be written as +00:00 or
// quoted to pin an instant), because an operator writing a local time
// without a zone means local.
func windowText(v any) string {
	if t, ok := v.(time.Time); ok {
		if t.Location() == time.UTC {
			return t.Format("2006-01-02T15:04:05")
		}
		return t.Format(time.RFC3339)
	}
	return strings.TrimSpace(text(v))
}

// resolveWindow builds a target's window and the resolutions of its two
// bounds. needed says whether the access mode uses the window at all, so an
// OPEN target without a window is not reported as a fall-back.
func resolveWindow(startRaw, endRaw raw, loc *time.Location, needed bool, mode domain.AccessMode) (Window, result, result) {
	w := Window{Start: windowText(startRaw.v), End: windowText(endRaw.v), loc: loc}
	okRes := func(r raw, s string) result { return result{text: s, reason: builtinOr(r)} }
	rs, re := okRes(startRaw, w.Start), okRes(endRaw, w.End)
	invalid := func(why string, bad ...*result) (Window, result, result) {
		w.invalid = why
		for _, b := range bad {
			if needed {
				b.fellBack = true
				b.reason = fellBack("%s → outside the window", why)
			} else if strings.HasSuffix(why, "missing") {
				b.reason = fmt.Sprintf("not set (not used with access mode %s)", mode)
			} else {
				b.reason = fmt.Sprintf("%s (not used with access mode %s)", why, mode)
			}
		}
		return w, rs, re
	}
	switch {
	case w.Start == "" && w.End == "":
		return invalid("window missing", &rs, &re)
	case w.Start == "":
		return invalid("window.start missing", &rs)
	case w.End == "":
		return invalid("window.end missing", &re)
	}
	sb, okS := parseBound(w.Start, loc, false)
	eb, okE := parseBound(w.End, loc, true)
	switch {
	case !okS && !okE:
		return invalid(fmt.Sprintf("window.start %s and window.end %s malformed", quoted(w.Start), quoted(w.End)), &rs, &re)
	case !okS:
		return invalid(fmt.Sprintf("window.start %s malformed", quoted(w.Start)), &rs)
	case !okE:
		return invalid(fmt.Sprintf("window.end %s malformed", quoted(w.End)), &re)
	case sb.daily != eb.daily:
		return invalid("window.start and window.end use different forms (daily time vs date-time)", &rs, &re)
	case sb.daily && sb.clock == eb.clock:
		return invalid("window.start equals window.end (empty window)", &rs, &re)
	case sb.daily && sb.clock == 24*time.Hour:
		return invalid("window.start 24:00 is not a start", &rs)
	case !sb.daily && !sb.at.Before(eb.at):
		return invalid("window.end not after window.start", &rs, &re)
	}
	w.daily = sb.daily
	w.startClock, w.endClock = sb.clock, eb.clock
	w.startAt, w.endAt = sb.at, eb.at
	if loc == nil {
		// Syntax is fine, but without a zone no instant can be placed.
		w.invalid = "access.timezone unknown"
	}
	return w, rs, re
}

// resolveTargetFile keeps binding files inside the config repository.
func resolveTargetFile(key string, r raw) result {
	def := "bindings/" + key + ".yaml"
	if !r.set {
		return result{val: def, text: def, reason: reasonBuiltin}
	}
	if isBlank(r.v) {
		return result{val: def, text: def, fellBack: true, reason: fellBack("empty → default %s", def)}
	}
	s := strings.TrimSpace(text(r.v))
	clean := path.Clean(s)
	if path.IsAbs(s) || strings.Contains(s, `\`) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains("/"+s+"/", "/../") {
		return result{val: def, text: def, fellBack: true, reason: fellBack("value %s leaves the repository → default %s", quoted(s), def)}
	}
	return result{val: clean, text: clean, reason: builtinOr(r)}
}

// resolveAccessMode applies domain.ParseAccessMode and says why it fell
// back: missing/blank → TEST_WINDOW (restricted), unknown → CLOSED.
func resolveAccessMode(r raw) result {
	if !r.set {
		return result{val: domain.AccessTestWindow, text: string(domain.AccessTestWindow), fellBack: true, reason: fellBack("missing → TEST_WINDOW")}
	}
	s := text(r.v)
	mode, known := domain.ParseAccessMode(s)
	switch {
	case strings.TrimSpace(s) == "":
		return result{val: mode, text: string(mode), fellBack: true, reason: fellBack("empty → TEST_WINDOW")}
	case !known:
		return result{val: mode, text: string(mode), fellBack: true, reason: fellBack("value %s unknown → CLOSED", quoted(s))}
	}
	return result{val: mode, text: string(mode), reason: builtinOr(r)}
}

// buildReview resolves a target's review fields: owners, review.every and
// review.dueIn (docs/reviews.md).
func (b *builder) buildReview(t *Target, m merged, p string, put func(string, raw, result)) {
	r := rawOf(m, p+"owners")
	res := resolveOwners(r)
	t.Owners = res.val.([]string)
	put(p+"owners", r, res)

	r = rawOf(m, p+"review.every")
	res = resolveReviewEvery(r)
	t.ReviewEvery = res.val.(time.Duration)
	put(p+"review.every", r, res)

	r = rawOf(m, p+"review.dueIn")
	dueIn := durItem(p+"review.dueIn", defaultReviewDueIn, time.Hour, time.Second, false, "")
	res = resolveDuration(&dueIn, r, nil)
	t.ReviewDueIn = res.val.(time.Duration)
	put(p+"review.dueIn", r, res)
}

// defaultReviewDueIn is how long a scheduled campaign stays open: two
// weeks, long enough for owners on holiday to come back to it.
const defaultReviewDueIn = 14 * 24 * time.Hour

// minReviewEvery bounds the schedule from below: a campaign per hour is
// already more than any owner answers.
const minReviewEvery = time.Hour

// maxOwnerLen is the longest account name an owner may be (the column
// width of an account everywhere).
const maxOwnerLen = 128

// resolveOwners reads targets.<key>.owners: account names lower-cased, in
// the identity resolver's syntax (a letter or digit, then letters,
// digits, ".", "_" and "-"); anything else is dropped with reason, and
// duplicates once. Missing is no owners, the normal state of a target
// nobody reviews, so it is no fall-back.
func resolveOwners(r raw) result {
	if !r.set || isBlank(r.v) {
		return result{val: []string{}, text: "", reason: "none → only an operator with ops.write decides this target's review items"}
	}
	entries, blanks := parseList(r.v)
	owners := []string{}
	var bad []string
	for _, e := range entries {
		a := strings.ToLower(strings.TrimSpace(e))
		switch {
		case !accountName(a):
			bad = append(bad, quoted(e))
		case !slices.Contains(owners, a):
			owners = append(owners, a)
		}
	}
	res := result{val: owners, text: strings.Join(owners, ", "), reason: builtinOr(r)}
	switch {
	case len(bad) > 0:
		res.fellBack, res.reason = true, fellBack("dropped %s: not an account name", strings.Join(bad, ", "))
	case blanks > 0:
		res.fellBack, res.reason = true, fellBack("dropped %d blank entr%s", blanks, plural(blanks, "y", "ies"))
	}
	if len(owners) == 0 && res.fellBack {
		res.reason += " → none: only an operator with ops.write decides this target's review items"
	}
	return res
}

// accountName reports whether a (lower-cased) is an account name.
func accountName(a string) bool {
	if a == "" || len(a) > maxOwnerLen || !(a[0] >= 'a' && a[0] <= 'z' || a[0] >= '0' && a[0] <= '9') {
		return false
	}
	return strings.IndexFunc(a, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-')
	}) < 0
}

// resolveReviewEvery reads targets.<key>.review.every: missing is no
// schedule (no fall-back); malformed or not positive is no schedule with
// reason; below minReviewEvery is clamped to it.
func resolveReviewEvery(r raw) result {
	none := func(reason string, fb bool) result {
		return result{val: time.Duration(0), text: "", fellBack: fb, reason: reason}
	}
	if !r.set || isBlank(r.v) {
		return none("none → no scheduled campaign", false)
	}
	d, why := parseDuration(r.v, time.Second)
	switch {
	case why != "":
		return none(fellBack("value %s %s → no scheduled campaign", quoted(text(r.v)), why), true)
	case d <= 0:
		return none(fellBack("value %s not positive → no scheduled campaign", quoted(text(r.v))), true)
	case d < minReviewEvery:
		return result{val: minReviewEvery, text: fmtDur(minReviewEvery), fellBack: true,
			reason: fellBack("value %s below minimum %s → clamped to %s", quoted(text(r.v)), fmtDur(minReviewEvery), fmtDur(minReviewEvery))}
	}
	return result{val: d, text: fmtDur(d), reason: builtinOr(r)}
}
