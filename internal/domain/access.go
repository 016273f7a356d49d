package domain

import "strings"

// AccessMode says whether users may request a binding to a target right now.
// It is configuration, resolved per request, so a typo must never
// open a restricted resource: see ParseAccessMode.
type AccessMode string

// The three access modes. The zero value is not one of them; use
// ParseAccessMode to turn configuration text into a mode.
const (
	// AccessOpen lets anyone request the target at any time.
	AccessOpen AccessMode = "OPEN"
	// AccessTestWindow lets requests through only inside the target's
	// configured window; it is what a blank or missing mode means.
	AccessTestWindow AccessMode = "TEST_WINDOW"
	// AccessClosed refuses every request; it is what an unknown mode means.
	AccessClosed AccessMode = "CLOSED"
)

// ParseAccessMode resolves configuration text:
// blank → TEST_WINDOW (restricted, the default), trimmed
// case-insensitive OPEN / TEST_WINDOW, anything else → CLOSED. known reports
// whether raw was blank or one of the names, so callers can say why a value
// fell back. CLOSED written out is unknown to the switch but maps to the same
// mode, so known is true for it too.
func ParseAccessMode(raw string) (mode AccessMode, known bool) {
	v := strings.ToUpper(strings.TrimSpace(raw))
	switch v {
	case "":
		return AccessTestWindow, true
	case string(AccessOpen):
		return AccessOpen, true
	case string(AccessTestWindow):
		return AccessTestWindow, true
	case string(AccessClosed):
		return AccessClosed, true
	default:
		return AccessClosed, false
	}
}
