package httpapi

import (
	"strings"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestTargets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		t.Run("targets200: access state per target, why when closed", func(t *testing.T) {
			r := w.do(req{method: "GET", path: "/api/targets", user: "alice"})
			r.want(t, 200, "OK")
			got := map[string]map[string]any{}
			for _, it := range r.data["items"].([]any) {
				m := it.(map[string]any)
				got[m["key"].(string)] = m
			}
			if got[tOpen]["open"] != true || got[tOpen]["accessMode"] != "OPEN" || got[tOpen]["title"] != "Payments DB" || got[tOpen]["why"] != nil {
				t.Fatalf("open target: %v", got[tOpen])
			}
			// The longest access a request may ask for, shown before anyone types.
			if got[tOpen]["maxDays"] != float64(30) || got[tWindow]["maxDays"] != float64(1) {
				t.Fatalf("maxDays: %v, %v; want 30 and 1", got[tOpen]["maxDays"], got[tWindow]["maxDays"])
			}
			if got[tClosed]["open"] != false || got[tClosed]["why"] != "access mode CLOSED" {
				t.Fatalf("closed target: %v", got[tClosed])
			}
			if got[tWindow]["open"] != false || !strings.Contains(got[tWindow]["why"].(string), "outside the test window") {
				t.Fatalf("window target: %v", got[tWindow])
			}
		})
		t.Run("a reload applies to the next request", func(t *testing.T) {
			w.load(map[string]any{"targets." + tClosed + ".accessMode": "OPNE"})
			defer w.load(nil)
			r := w.do(req{method: "GET", path: "/api/targets", user: "alice"})
			for _, it := range r.data["items"].([]any) {
				if m := it.(map[string]any); m["key"] == tClosed && (m["open"] != false || m["accessMode"] != "CLOSED") {
					t.Fatalf("a typo must close the target: %v", m)
				}
			}
		})
		t.Run("targets401", func(t *testing.T) {
			w.do(req{method: "GET", path: "/api/targets"}).want(t, 401, "UNAUTHENTICATED")
		})
	})
}

func TestPreview(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		ctx := t.Context()
		path := "/api/targets/" + tOpen + "/preview"

		t.Run("no file yet: the file the first request creates", func(t *testing.T) {
			r := w.do(req{method: "GET", path: path + "?days=2", user: "alice"})
			r.want(t, 200, "OK")
			if r.data["before"] != "" || !strings.Contains(r.data["after"].(string), `subject: "alice"`) ||
				!strings.Contains(r.data["after"].(string), worldNow.Add(48*time.Hour).Format(time.RFC3339)) {
				t.Fatalf("data %v", r.data)
			}
		})
		t.Run("existing file: the caller sees their own entry replaced and a count of the others", func(t *testing.T) {
			cur := bindingfile.File{}.
				With(bindingfile.Entry{Subject: "alice", ExpiresAt: worldNow, OperationID: "old"}).
				With(bindingfile.Entry{Subject: "carol", ExpiresAt: worldNow, OperationID: "c"})
			if _, err := w.gl.CreateCommit(ctx, "1", gitlab.CommitRequest{Branch: "main", Message: "seed",
				Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/" + tOpen + ".yaml", Content: string(cur.Marshal())}}}); err != nil {
				t.Fatal(err)
			}
			r := w.do(req{method: "GET", path: path, user: "E10023"})
			r.want(t, 200, "OK")
			own, _ := cur.Entry("alice")
			if r.data["before"] != string(bindingfile.File{}.With(own).Marshal()) || r.data["scope"] != "own" || r.data["otherHolders"] != float64(1) {
				t.Fatalf("before %q scope %v others %v", r.data["before"], r.data["scope"], r.data["otherHolders"])
			}
			var plus, minus int
			for _, l := range r.data["diff"].([]any) {
				switch l.(map[string]any)["op"] {
				case "+":
					plus++
				case "-":
					minus++
				}
			}
			if plus != 2 || minus != 2 || !strings.Contains(r.data["after"].(string), `subject: "alice"`) {
				t.Fatalf("diff +%d -%d, after %q", plus, minus, r.data["after"])
			}
		})
		t.Run("an operator asking for the file sees every entry", func(t *testing.T) {
			r := w.do(req{method: "GET", path: path + "?scope=file", user: "olivia"})
			r.want(t, 200, "OK")
			if r.data["scope"] != "file" || !strings.Contains(r.data["before"].(string), `subject: "carol"`) ||
				!strings.Contains(r.data["after"].(string), `subject: "alice"`) || !strings.Contains(r.data["after"].(string), `subject: "olivia"`) {
				t.Fatalf("operator's preview %v", r.data)
			}
		})
		t.Run("a renewal's entry extends the end the file holds, at most the maximum from now", func(t *testing.T) {
			cur := bindingfile.File{}.
				With(bindingfile.Entry{Subject: "bob", ExpiresAt: worldNow.Add(3 * 24 * time.Hour), OperationID: "d"}).
				With(bindingfile.Entry{Subject: "alice", ExpiresAt: worldNow.Add(-time.Hour), OperationID: "a"})
			if _, err := w.gl.CreateCommit(ctx, "1", gitlab.CommitRequest{Branch: "main", Message: "bob in effect",
				Actions: []gitlab.FileAction{{Action: gitlab.ActionUpdate, Path: "bindings/" + tOpen + ".yaml", Content: string(cur.Marshal())}}}); err != nil {
				t.Fatal(err)
			}
			for days, want := range map[string]time.Time{
				"5":  worldNow.Add(8 * 24 * time.Hour),  // Dec 3 + 5 days: the days left are kept
				"30": worldNow.Add(30 * 24 * time.Hour), // cut to now + maxDays
			} {
				r := w.do(req{method: "GET", path: path + "?days=" + days, user: "bob"})
				r.want(t, 200, "OK")
				e, _ := r.data["entry"].(map[string]any)
				if e["expiresAt"] != want.Format(time.RFC3339) {
					t.Fatalf("bob renewing for %s days: entry %v, want until %s", days, e, want.Format(time.RFC3339))
				}
			}
			// An end that has passed counts from now, as a new grant does.
			r := w.do(req{method: "GET", path: path + "?days=5", user: "alice"})
			if e, _ := r.data["entry"].(map[string]any); e["expiresAt"] != worldNow.Add(5*24*time.Hour).Format(time.RFC3339) {
				t.Fatalf("alice: entry %v", e)
			}
		})
		t.Run("preview degrades to 200 with empty data", func(t *testing.T) {
			for name, c := range map[string]struct {
				path string
				kv   map[string]any
			}{
				"GitLab unreachable": {path, map[string]any{"gitlab.baseURL": "http://127.0.0.1:1/gitlab/"}},
				"GitLab token wrong": {path, map[string]any{"gitlab.tokens.committer": "nope"}},
				"no project":         {path, map[string]any{"gitlab.projects": []any{}}},
				"days out of range":  {path + "?days=99", nil},
			} {
				t.Run(name, func(t *testing.T) {
					w.load(c.kv)
					defer w.load(nil)
					r := w.do(req{method: "GET", path: c.path, user: "alice"})
					r.want(t, 200, "OK")
					if len(r.data) != 0 || strings.TrimSpace(r.raw) != `{"code":"OK","message":"","data":{}}` {
						t.Fatalf("not empty: %s", r.raw)
					}
				})
			}
			if !strings.Contains(w.logs.String(), "preview degraded to empty data") {
				t.Fatal("degradation not logged")
			}
		})
		t.Run("the preview of a target that is not configured is 404, not an empty preview", func(t *testing.T) {
			for _, p := range []string{"/api/targets/nope/preview", "/api/targets/nope/preview?days=1", "/api/targets/nope/preview?scope=file"} {
				r := w.do(req{method: "GET", path: p, user: "alice"})
				r.want(t, 404, "NOT_FOUND")
				if r.env.Message == "" || r.env.Message == domain.GenericMessage || r.env.Data != nil {
					t.Fatalf("%s: %s", p, r.raw)
				}
			}
			// A target that exists still previews (the check reads the
			// configuration, not GitLab).
			w.do(req{method: "GET", path: path, user: "alice"}).want(t, 200, "OK")
		})
		t.Run("a file that does not parse degrades too", func(t *testing.T) {
			if _, err := w.gl.CreateCommit(ctx, "1", gitlab.CommitRequest{Branch: "main", Message: "break",
				Actions: []gitlab.FileAction{{Action: gitlab.ActionUpdate, Path: "bindings/" + tOpen + ".yaml", Content: "- [broken\n"}}}); err != nil {
				t.Fatal(err)
			}
			r := w.do(req{method: "GET", path: path, user: "alice"})
			r.want(t, 200, "OK")
			if len(r.data) != 0 {
				t.Fatalf("not empty: %s", r.raw)
			}
		})
		t.Run("preview401: the login still comes first", func(t *testing.T) {
			w.do(req{method: "GET", path: path}).want(t, 401, "UNAUTHENTICATED")
		})
	})
}
