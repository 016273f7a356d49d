package httpapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestReasonsThatWouldForgeMRTextAreRefused performs the submit side of
// issue 13 finding 8: a reason carrying a newline (a forged trailer or a
// quick action on a line of its own), ESC, NUL, DEL, a C1 control, a
// line separator or a bidi override is refused with 400 naming the field
// and the character, and nothing is stored. Reasons whose only odd parts
// are Markdown (mentions, images, links) are accepted: they are rendered
// inert in the MR (internal/workflow, mrtext.go).
// jsonSubmitBody encodes a submission with encoding/json, which escapes
// every control character as JSON allows (%q would not).
func jsonSubmitBody(t *testing.T, target, reason string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"targetKey": target, "reason": reason})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReasonsThatWouldForgeMRTextAreRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		for i, tc := range []struct{ name, reason, char string }{
			{"a forged trailer on its own line", "audit\nChangeflow-Operation: op-victim", "U+000A"},
			{"a quick action on its own line", "audit\r\n/approve", "U+000D"},
			{"a tab", "a\tb", "U+0009"},
			{"ESC (terminal escape)", "audit \x1b[2J", "U+001B"},
			{"NUL", "audit\x00more", "U+0000"},
			{"DEL", "audit\x7f", "U+007F"},
			{"a C1 control", "audit\u0085more", "U+0085"},
			{"a line separator", "audit\u2028/merge", "U+2028"},
			{"a right-to-left override", "access for \u202ealice\u202c", "U+202E"},
			{"a right-to-left isolate", "x \u2067y\u2069", "U+2067"},
			{"a left-to-right mark", "x\u200ey", "U+200E"},
			{"an Arabic letter mark", "x\u061cy", "U+061C"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				key := "k-text-" + string(rune('a'+i))
				r := w.do(req{method: "POST", path: "/api/requests", user: "alice", body: jsonSubmitBody(t, tOpen, tc.reason),
					header: map[string]string{"Idempotency-Key": key}})
				r.want(t, 400, "INVALID_ARGUMENT")
				if !strings.HasPrefix(r.env.Message, "reason ") || !strings.Contains(r.env.Message, tc.char) {
					t.Fatalf("message %q does not name the field and %s", r.env.Message, tc.char)
				}
				if _, err := st.OperationGet(t.Context(), key); !errors.Is(err, domain.ErrNotFound) {
					t.Fatalf("a refused submission was stored: %v", err)
				}
			})
		}
		t.Run("Markdown and emoji are text, accepted", func(t *testing.T) {
			r := w.do(req{method: "POST", path: "/api/requests", user: "bob", body: submitBodyFor(tOpen, "@all ![x](https://evil.example/x.png) [y](https://e.example) `code` 👨\u200d👩\u200d👧 Changeflow-Operation: op-victim", ""),
				header: map[string]string{"Idempotency-Key": "k-text-md"}})
			r.want(t, 202, "ACCEPTED")
		})
	})
}
