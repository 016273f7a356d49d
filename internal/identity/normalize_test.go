package identity

import (
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want Login
	}{
		{"email is trimmed and lower-cased", "  Alice@Corp.Example ", Login{KindEmail, "alice@corp.example"}},
		{"employee ID is upper-cased", "e10023", Login{KindEmployeeID, "E10023"}},
		{"bare digits might be an employee number", "10023", Login{KindEmployeeID, "10023"}},
		{"account is lower-cased", "Alice", Login{KindAccount, "alice"}},
		{"account with dots and dashes", "mary-jane.o_neil", Login{KindAccount, "mary-jane.o_neil"}},
		{"two digits are an account, not an ID", "e12", Login{KindAccount, "e12"}},
		{"empty", "", Login{}},
		{"blank", " \t ", Login{}},
		{"space inside", "alice smith", Login{}},
		{"two @", "a@b@c", Login{}},
		{"no local part", "@corp.example", Login{}},
		{"no domain", "alice@", Login{}},
		{"double dot in domain", "alice@corp..example", Login{}},
		{"hyphen at label edge", "alice@-corp.example", Login{}},
		{"non-ASCII look-alike (Kelvin sign)", "\u212aate", Login{}},
		{"control character", "alice\x00", Login{}},
		{"too long", strings.Repeat("a", 255), Login{}},
		{"account starting with a dot", ".alice", Login{}},
		{"account with a slash", "alice/bob", Login{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Normalize(tt.raw); got != tt.want {
				t.Fatalf("Normalize(%q) = %+v, want %+v", tt.raw, got, tt.want)
			}
		})
	}
}

// FuzzNormalize checks the properties every consumer relies on: no panic;
// a valid result is idempotent, trimmed, ASCII, bounded and in its kind's
// case; an invalid one carries no value.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"alice", "Alice@Corp.Example", "E10023", "10023", " bob ", "a@b@c", "\u212aate", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		l := Normalize(raw)
		if l.Kind == KindInvalid {
			if l.Value != "" {
				t.Fatalf("invalid %q carries value %q", raw, l.Value)
			}
			return
		}
		if again := Normalize(l.Value); again != l {
			t.Fatalf("not idempotent: %q → %+v → %+v", raw, l, again)
		}
		if l.Value != strings.TrimSpace(l.Value) || l.Value == "" || len(l.Value) > maxEmailLen {
			t.Fatalf("%q → %q: not trimmed or out of bounds", raw, l.Value)
		}
		for i := 0; i < len(l.Value); i++ {
			if c := l.Value[i]; c <= ' ' || c >= 0x7f {
				t.Fatalf("%q → %q: byte %#x", raw, l.Value, c)
			}
		}
		switch l.Kind {
		case KindEmail, KindAccount:
			if l.Value != strings.ToLower(l.Value) {
				t.Fatalf("%q → %q: not lower-case", raw, l.Value)
			}
		case KindEmployeeID:
			if l.Value != strings.ToUpper(l.Value) {
				t.Fatalf("%q → %q: not upper-case", raw, l.Value)
			}
		}
	})
}
