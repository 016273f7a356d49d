package httpapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/config"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// failingFiles is the world's GitLab reader, except that reading path
// fails as a down GitLab (or an open breaker) does.
type failingFiles struct {
	w    *bizWorld
	path string
}

func (f failingFiles) GetFile(ctx context.Context, project, path, ref string) (gitlab.File, error) {
	if path == f.path {
		return gitlab.File{}, errors.New("gitlab: breaker open")
	}
	return f.w.gl.GetFile(ctx, project, path, ref)
}

// TestOpsUnownedExpired: each target's file on main is read and its
// expired entries that changeflow did not write are listed — a hand-added
// one and a copy of one of changeflow's operationIds under another
// subject — while an expired entry changeflow wrote (the expiry scan's
// business) is only counted, and live entries of either kind are left
// out. A file that does not parse and one GitLab will not give are each
// reported in words without failing the others; a target with no file
// has nothing. ops.read only, audited, and under the preview's quota.
func TestOpsUnownedExpired(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, func(w *bizWorld, d *Deps) {
			d.Business.Files = failingFiles{w: w, path: "bindings/billing-dashboard.yaml"}
		})
		ctx := t.Context()
		validatedFixture(t, st, "un-alice", "alice")
		validatedFixture(t, st, "un-bob", "bob")
		past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		future := time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
		file := bindingfile.File{}.
			With(bindingfile.Entry{Subject: "alice", ExpiresAt: past, OperationID: "un-alice"}).             // ours, expired
			With(bindingfile.Entry{Subject: "bob", ExpiresAt: future, OperationID: "un-bob"}).               // ours, live
			With(bindingfile.Entry{Subject: "hal", ExpiresAt: past.Add(time.Hour), OperationID: "by-hand"}). // by hand, expired
			With(bindingfile.Entry{Subject: "carol", ExpiresAt: past, OperationID: "un-alice"}).             // alice's id copied
			With(bindingfile.Entry{Subject: "lena", ExpiresAt: future, OperationID: "by-hand-2"})            // by hand, live
		for path, content := range map[string]string{
			"bindings/" + tReplay + ".yaml": string(file.Marshal()),
			"bindings/" + tOpen + ".yaml":   "- subject: [this is not\n",
		} {
			if _, err := w.gl.CreateCommit(ctx, "1", gitlab.CommitRequest{Branch: "main", Message: "hand edit",
				Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: path, Content: content}}}); err != nil {
				t.Fatal(err)
			}
		}

		w.do(req{method: "GET", path: "/ops/targets/unowned-expired"}).want(t, 401, "UNAUTHENTICATED")
		w.do(req{method: "GET", path: "/ops/targets/unowned-expired", user: "alice"}).want(t, 403, "ACCESS_DENIED")
		r := w.do(req{method: "GET", path: "/ops/targets/unowned-expired", user: "olivia"})
		r.want(t, 200, "OK")
		if r.data["ref"] != "main" || r.data["checkedAt"] == "" {
			t.Fatalf("data %v", r.data)
		}
		files := map[string]map[string]any{}
		for _, f := range r.data["files"].([]any) {
			m := f.(map[string]any)
			files[m["targetKey"].(string)] = m
		}
		if len(files) != len(w.cfg.Current().Targets()) {
			t.Fatalf("files %v", files)
		}
		hand := files[tReplay]
		entries := hand["entries"].([]any)
		if hand["problem"] != nil || hand["ownedExpired"] != float64(1) || len(entries) != 2 {
			t.Fatalf("%s: %v", tReplay, hand)
		}
		// Oldest expiry first: carol's copy, then hal's.
		first, second := entries[0].(map[string]any), entries[1].(map[string]any)
		if first["subject"] != "carol" || first["operationId"] != "un-alice" || first["why"] != unownedOtherBinding ||
			first["expiresAt"] != past.Format(time.RFC3339) {
			t.Fatalf("first %v", first)
		}
		if second["subject"] != "hal" || second["operationId"] != "by-hand" || second["why"] != unownedNoOperation {
			t.Fatalf("second %v", second)
		}
		if p := files[tOpen]["problem"]; p != unownedInvalid || len(files[tOpen]["entries"].([]any)) != 0 {
			t.Fatalf("%s: %v", tOpen, files[tOpen])
		}
		if p := files["billing-dashboard"]["problem"]; p != unownedUnreadable {
			t.Fatalf("billing-dashboard: %v", files["billing-dashboard"])
		}
		if f := files[tRace]; f["problem"] != nil || len(f["entries"].([]any)) != 0 || f["ownedExpired"] != float64(0) {
			t.Fatalf("%s (no file): %v", tRace, f)
		}
		// Audited like every ops read: the two refused calls and this one.
		recs := auditOf(t, st, "targets")
		ok := 0
		for _, rec := range recs {
			if rec.Action == config.RouteOpsRequestGet && rec.Actor == "olivia" && rec.Outcome == "OK" {
				ok++
			}
		}
		if ok != 1 {
			t.Fatalf("audit %+v", recs)
		}
	})
}

// TestOpsUnownedExpiredIsRateLimited: the read spends the caller's
// preview quota, before its authorization.
func TestOpsUnownedExpiredIsRateLimited(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOverlay(map[string]any{"ratelimit.preview.limit": 1}))
		w.do(req{method: "GET", path: "/ops/targets/unowned-expired", user: "olivia"}).want(t, 200, "OK")
		w.do(req{method: "GET", path: "/ops/targets/unowned-expired", user: "olivia"}).want(t, 429, "RATE_LIMITED")
		// Another caller has a quota of its own.
		w.do(req{method: "GET", path: "/ops/targets/unowned-expired", user: "adam"}).want(t, 200, "OK")
	})
}
