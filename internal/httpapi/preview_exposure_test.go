package httpapi

import (
	"strings"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestPreviewDoesNotExposeOtherHolders performs the attack of issue 13
// finding 10: bob, who holds nothing, asks for the preview of a target
// others hold — also with ?scope=file, the operators' view. Nothing of the
// other holders (subject, expiry, operationId) is in the answer; only how
// many there are. An operator asking for the file gets it.
func TestPreviewDoesNotExposeOtherHolders(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		secretExpiry := time.Date(2031, 7, 8, 9, 10, 11, 0, time.UTC)
		cur := bindingfile.File{}.
			With(bindingfile.Entry{Subject: "adam", ExpiresAt: secretExpiry, OperationID: "op-adam-secret"}).
			With(bindingfile.Entry{Subject: "carol", ExpiresAt: secretExpiry, OperationID: "op-carol-secret"})
		if _, err := w.gl.CreateCommit(t.Context(), "1", gitlab.CommitRequest{Branch: "main", Message: "seed",
			Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/" + tOpen + ".yaml", Content: string(cur.Marshal())}}}); err != nil {
			t.Fatal(err)
		}
		leaks := []string{"adam", "carol", "op-adam-secret", "op-carol-secret", secretExpiry.Format(time.RFC3339), "2031-07-08"}
		for _, query := range []string{"", "?scope=file", "?days=3&scope=file", "?scope=FILE"} {
			t.Run("bob"+query, func(t *testing.T) {
				r := w.do(req{method: "GET", path: "/api/targets/" + tOpen + "/preview" + query, user: "bob"})
				r.want(t, 200, "OK")
				for _, leak := range leaks {
					if strings.Contains(r.raw, leak) {
						t.Fatalf("the preview leaks %q: %s", leak, r.raw)
					}
				}
				if r.data["otherHolders"] != float64(2) || r.data["scope"] != "own" || r.data["before"] != "" ||
					!strings.Contains(r.data["after"].(string), `subject: "bob"`) {
					t.Fatalf("bob's preview %v", r.data)
				}
			})
		}
		t.Run("olivia (ops.read) asking for the file", func(t *testing.T) {
			r := w.do(req{method: "GET", path: "/api/targets/" + tOpen + "/preview?scope=file", user: "olivia"})
			r.want(t, 200, "OK")
			if r.data["scope"] != "file" || !strings.Contains(r.raw, "op-carol-secret") {
				t.Fatalf("operator's preview %v", r.data)
			}
		})
	})
}
