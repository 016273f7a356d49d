package httpapi

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// foundIDs is the operationIds of a GET /ops/requests answer, in order.
func foundIDs(t *testing.T, r resp) []string {
	t.Helper()
	r.want(t, 200, "OK")
	items, _ := r.data["items"].([]any)
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.(map[string]any)["operationId"].(string))
	}
	return ids
}

func sameIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// TestOpsFind: GET /ops/requests finds any request by person, target and
// status, newest first, a page at a time; attention=true lists what waits
// on a person, each row saying why; bad filters are a 400 in words; it
// needs ops.read.
func TestOpsFind(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		for _, s := range []struct{ id, user, target string }{
			{"op-find-1", "alice", tOpen}, {"op-find-2", "bob", tOpen},
			{"op-find-3", "bob", "billing-dashboard"}, {"op-find-4", "alice", tRace},
		} {
			w.do(req{method: "POST", path: "/api/requests", user: s.user, body: submitBodyFor(s.target, "r", ""),
				header: map[string]string{"Idempotency-Key": s.id}}).want(t, 202, "ACCEPTED")
			// Distinct creation times, so newest first is this order reversed.
			time.Sleep(5 * time.Millisecond)
		}
		db := st.DB()
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
				t.Fatal(err)
			}
		}
		// op-find-2 is bob's access in effect; op-find-4 stopped on a
		// failed check pipeline; op-find-3 has sat at a running pipeline
		// for three days, far past its bound.
		exec("UPDATE binding SET status = ? WHERE operation_id = ?", string(domain.BindingValidated), "op-find-2")
		exec("UPDATE operation SET step_status = ? WHERE operation_id = ?", int(domain.StepCalledBack), "op-find-2")
		exec("UPDATE binding SET status = ? WHERE operation_id = ?", string(domain.BindingCreateFailed), "op-find-4")
		exec("UPDATE operation SET step_status = ? WHERE operation_id = ?", int(domain.StepCreatePipelineFailed), "op-find-4")
		exec("UPDATE operation SET step_status = ?, updated_at = ? WHERE operation_id = ?",
			int(domain.StepHandlePipelineRunning), st.Dialect().Time(time.Now().Add(-72*time.Hour)), "op-find-3")

		get := func(query string) resp {
			return w.do(req{method: "GET", path: "/ops/requests" + query, user: "olivia"})
		}
		sameIDs(t, "all", foundIDs(t, get("")), "op-find-4", "op-find-3", "op-find-2", "op-find-1")
		sameIDs(t, "by target", foundIDs(t, get("?target="+tOpen)), "op-find-2", "op-find-1")
		sameIDs(t, "by person", foundIDs(t, get("?subject=alice")), "op-find-4", "op-find-1")

		// What access does bob have now?
		r := get("?subject=bob&status=VALIDATED")
		sameIDs(t, "bob in effect", foundIDs(t, r), "op-find-2")
		row := r.data["items"].([]any)[0].(map[string]any)
		if row["subject"] != "bob" || row["targetKey"] != tOpen || row["status"] != "VALIDATED" || row["statusText"] != "In effect" || row["flow"] != "APPROVE_FIRST" ||
			row["kind"] != "GRANT" || row["createdAt"] == nil || row["expiresAt"] == nil || row["attention"] != nil ||
			row["step"].(map[string]any)["name"] != "CALLED_BACK" {
			t.Fatalf("row %v", row)
		}

		r = get("?attention=true")
		sameIDs(t, "attention", foundIDs(t, r), "op-find-4", "op-find-3")
		items := r.data["items"].([]any)
		if why, _ := items[0].(map[string]any)["attention"].(string); !strings.Contains(why, "Stopped on a failure") {
			t.Fatalf("why op-find-4: %q", why)
		}
		if why, _ := items[1].(map[string]any)["attention"].(string); !strings.Contains(why, "No progress since") {
			t.Fatalf("why op-find-3: %q", why)
		}
		sameIDs(t, "attention of bob", foundIDs(t, get("?attention=true&subject=bob")), "op-find-3")

		// Pages of one: the cursor walks the whole list once.
		var got []string
		cursor := ""
		for range 10 {
			r := get("?limit=1&cursor=" + cursor)
			got = append(got, foundIDs(t, r)...)
			cursor, _ = r.data["nextCursor"].(string)
			if cursor == "" {
				break
			}
		}
		sameIDs(t, "pages of one", got, "op-find-4", "op-find-3", "op-find-2", "op-find-1")

		for q, word := range map[string]string{
			"?limit=0":          "limit must be a number from 1 to 100",
			"?limit=101":        "limit must be a number from 1 to 100",
			"?cursor=nonsense!": "The cursor is not valid",
			"?status=DONE":      `"DONE" is not a request status`,
			"?attention=yes":    "attention must be true or false",
		} {
			r := get(q)
			r.want(t, 400, "INVALID_ARGUMENT")
			if !strings.Contains(r.env.Message, word) {
				t.Fatalf("%s: message %q, want %q", q, r.env.Message, word)
			}
		}
		w.do(req{method: "GET", path: "/ops/requests"}).want(t, 401, "UNAUTHENTICATED")
		w.do(req{method: "GET", path: "/ops/requests", user: "alice"}).want(t, 403, "ACCESS_DENIED")
	})
}

// TestStatusWordsMatchTheWebApp: the words GET /ops/requests gives each
// status are web/src/words.ts's statusWords, every one, word for word, so
// the API and the pages never say two things.
func TestStatusWordsMatchTheWebApp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "web", "src", "words.ts"))
	if err != nil {
		t.Skipf("web/ sources are not next to this package: %v", err)
	}
	src := string(raw)
	start := strings.Index(src, "const statusWords: Record<string, string> = {\n")
	if start < 0 {
		t.Fatal("words.ts: no statusWords block")
	}
	block := src[start:]
	block = block[:strings.Index(block, "\n};")]
	web := map[domain.BindingStatus]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+([A-Z][A-Z0-9_]*): '([^']*)',$`).FindAllStringSubmatch(block, -1) {
		web[domain.BindingStatus(m[1])] = m[2]
	}
	if len(web) != len(domain.BindingStatuses) {
		t.Fatalf("words.ts has %d statusWords, the domain %d statuses", len(web), len(domain.BindingStatuses))
	}
	if !maps.Equal(web, statusWords) {
		t.Fatalf("statusWords differ:\n web %v\n api %v", web, statusWords)
	}
	if statusText("SOMETHING_NEW") != "In progress" {
		t.Fatal("a status without words reads as the web app reads it")
	}
}
