package domain

import (
	"unicode"
	"unicode/utf8"
)

// UnsafeTextRune says r may not appear in free text a caller gives
// (a request's reason): text that changeflow writes into MR descriptions,
// logs and the console, where such a rune changes what others see rather
// than what is said. Refused are
//   - control characters (C0, DEL, C1), newlines and tabs included: a
//     newline would let the text start a line of its own in an MR
//     description (a GitLab quick action, a forged trailer), ESC drives
//     terminals that show logs, NUL cuts strings in C tools;
//   - line and paragraph separators (U+2028, U+2029), newlines by
//     another name;
//   - the bidirectional controls (Unicode's Bidi_Control: U+061C, U+200E,
//     U+200F, U+202A–U+202E, U+2066–U+2069), which reorder what a reader
//     sees ("Trojan Source").
//
// Other format characters (the zero-width joiner of emoji sequences, soft
// hyphens) are left alone: they cannot reorder or break lines, and
// refusing them would refuse ordinary text.
func UnsafeTextRune(r rune) bool {
	switch {
	case unicode.IsControl(r):
		return true
	case r == '\u2028', r == '\u2029':
		return true
	case unicode.Is(unicode.Bidi_Control, r):
		return true
	}
	return false
}

// FirstUnsafeTextRune returns the first rune of s for which UnsafeTextRune
// holds and its position in runes (0-based); ok is false when there is none.
func FirstUnsafeTextRune(s string) (r rune, pos int, ok bool) {
	i := 0
	for _, c := range s {
		if UnsafeTextRune(c) {
			return c, i, true
		}
		i++
	}
	return 0, 0, false
}

// ClipRunes keeps the first n runes of s, where a column or a message
// holds at most n (bytes of invalid UTF-8 count as one rune each and are
// kept as they are).
func ClipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
