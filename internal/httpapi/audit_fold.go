package httpapi

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// reservedPrefix is the namespace of the parameters the server itself
// sets (OperatorParam, auditCutParam). A client parameter whose folded
// name starts with it is dropped whole, not only exact look-alikes of
// today's names: the namespace is the server's, and dropping a client's
// "__x" costs nothing, since no client parameter of the API starts so.
const reservedPrefix = "__"

// reservedNames are the parameters only the server writes, folded.
var reservedNames = []string{foldParamName(OperatorParam), foldParamName(auditCutParam)}

// caseFold is Unicode full case folding ("ß" and "ss" fold alike). A
// cases.Caser keeps state, so each call makes its own.
func caseFold(s string) string { return cases.Fold().String(s) }

// foldParamName reduces a parameter name to what a reader of the audit
// trail would take it for: NFKC (fullwidth "＿＿ａｕｔｈ…" and ligatures
// become their plain letters), invisible characters removed (zero-width
// spaces and joiners, bidi controls, soft hyphens, variation selectors,
// every kind of space — a trailing blank included), case folded, and the
// Cyrillic and Greek letters that look like Latin ones replaced by those
// (NFKC keeps "а" U+0430 apart from "a"; the table is the part of Unicode's
// confusables that spells ASCII words). It is a comparison key only; the
// stored name stays what the client sent.
func foldParamName(name string) string {
	s := norm.NFKC.String(name)
	s = strings.Map(func(r rune) rune {
		if invisible(r) {
			return -1
		}
		return r
	}, s)
	s = caseFold(s)
	s = strings.Map(func(r rune) rune {
		if l, ok := latinLookalike[r]; ok {
			return l
		}
		return r
	}, s)
	// Folding may expose new compositions (a letter from the table next
	// to a combining mark); a second NFKC makes the key stable.
	return norm.NFKC.String(s)
}

// invisible says r draws nothing, or nothing a reader would notice: format
// characters (Cf: zero-width space/joiners, bidi controls, soft hyphen,
// word joiner), controls, spaces and separators, variation selectors, the
// combining grapheme joiner and Hangul fillers.
func invisible(r rune) bool {
	switch {
	case unicode.Is(unicode.Cf, r), unicode.IsControl(r), unicode.IsSpace(r), unicode.In(r, unicode.Z):
		return true
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF: // variation selectors
		return true
	case r == 0x034F, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0, r == 0x180E: // CGJ, Hangul fillers, Mongolian vowel separator
		return true
	}
	return false
}

// latinLookalike maps lower-case Cyrillic and Greek letters (case folding
// runs first) to the Latin letter they are drawn like in common fonts.
var latinLookalike = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'с': 'c', 'ԁ': 'd', 'е': 'e', 'ѐ': 'e', 'ё': 'e', 'һ': 'h', 'і': 'i', 'ї': 'i', 'ј': 'j',
	'к': 'k', 'ӏ': 'l', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'ԛ': 'q', 'г': 'r', 'ѕ': 's', 'т': 't',
	'ц': 'u', 'ѵ': 'v', 'ԝ': 'w', 'х': 'x', 'у': 'y', 'ү': 'y', 'ꮓ': 'z',
	// Greek
	'α': 'a', 'β': 'b', 'ϲ': 'c', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'μ': 'u', 'ν': 'v', 'ο': 'o',
	'ρ': 'p', 'τ': 't', 'υ': 'u', 'χ': 'x', 'γ': 'y', 'ζ': 'z', 'ϳ': 'j', 'ω': 'w',
	// Latin small capitals and others drawn as plain letters
	'ı': 'i', 'ȷ': 'j', 'ɑ': 'a', 'ɡ': 'g', 'ʀ': 'r',
}

// reservedParam says a client parameter name is, to a reader, one of the
// server's: in its namespace, or a reserved name once everything but
// letters and digits is gone ("authenticated-operator", "_‗authenticated
// Operator" — underscores have look-alikes too).
func reservedParam(name string) bool {
	f := foldParamName(name)
	if strings.HasPrefix(f, reservedPrefix) {
		return true
	}
	c := lettersAndDigits(f)
	for _, r := range reservedNames {
		if c == lettersAndDigits(r) {
			return true
		}
	}
	return false
}

func lettersAndDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, s)
}
