package httpapi

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// fakeAccessCheck answers Discrepancies and SubjectDiscrepancies with
// what the test set.
type fakeAccessCheck struct {
	mu    sync.Mutex
	found []domain.AccessDiscrepancy
	err   error
	asked []string

	bySubject  []domain.TargetDiscrepancy
	unreadable []string
	subjectErr error
	subjects   []string
}

func (f *fakeAccessCheck) SubjectDiscrepancies(_ context.Context, subject string) ([]domain.TargetDiscrepancy, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subjects = append(f.subjects, subject)
	return f.bySubject, f.unreadable, f.subjectErr
}

func (f *fakeAccessCheck) Discrepancies(_ context.Context, target string) ([]domain.AccessDiscrepancy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, target)
	return f.found, f.err
}

// TestOpsAccessDiscrepancies: by target, GET /ops/access and
// /ops/access/history carry the check's discrepancies, each with its
// target, kind and words, or — when the file could not be compared — an
// empty list and the problem in words; by subject, the person's
// discrepancies across targets, each naming its target, with the targets
// that could not be compared named in the problem; a repo period shows
// its removing commit as endSha.
func TestOpsAccessDiscrepancies(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		check := &fakeAccessCheck{found: []domain.AccessDiscrepancy{
			{Subject: "amy", OperationID: "op-1", Kind: domain.DiscrepancyOnMainNotInEffect},
			{Subject: "ben", OperationID: "op-2", Kind: domain.DiscrepancyInEffectNotOnMain},
		}}
		w := newBizWorld(t, st, func(_ *bizWorld, d *Deps) { d.Business.AccessCheck = check })
		d := st.Dialect()
		t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
		if _, err := st.DB().ExecContext(t.Context(),
			"INSERT INTO access_interval (subject, target_key, from_at, until_at, source, merge_sha, end_sha) VALUES ('mallory', ?, ?, ?, 'repo', 'sha-add', 'sha-del')",
			tOpen, d.Time(t0), d.Time(t0.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		get := func(path string, q url.Values) resp {
			r := w.do(req{method: "GET", path: path + "?" + q.Encode(), user: "olivia"})
			r.want(t, 200, "OK")
			return r
		}
		byTarget := get("/ops/access", url.Values{"target": {tOpen}, "at": {"2026-03-01T09:30:00Z"}})
		ds, _ := byTarget.data["discrepancies"].([]any)
		if len(ds) != 2 {
			t.Fatalf("discrepancies: %v", byTarget.data)
		}
		first := ds[0].(map[string]any)
		if first["subject"] != "amy" || first["targetKey"] != tOpen || first["operationId"] != "op-1" || first["kind"] != "ON_MAIN_NOT_IN_EFFECT" ||
			!strings.Contains(first["message"].(string), "put back by hand") {
			t.Fatalf("first discrepancy: %v", first)
		}
		if second := ds[1].(map[string]any); second["kind"] != "IN_EFFECT_NOT_ON_MAIN" || !strings.Contains(second["message"].(string), "removed or replaced by hand") {
			t.Fatalf("second discrepancy: %v", second)
		}
		item := byTarget.data["items"].([]any)[0].(map[string]any)
		if item["source"] != "repo" || item["mergeSha"] != "sha-add" || item["endSha"] != "sha-del" || item["operationId"] != nil {
			t.Fatalf("repo period: %v", item)
		}
		hist := get("/ops/access/history", url.Values{"target": {tOpen}, "from": {"2026-03-01T00:00:00Z"}, "to": {"2026-03-02T00:00:00Z"}})
		if ds, _ := hist.data["discrepancies"].([]any); len(ds) != 2 {
			t.Fatalf("history's discrepancies: %v", hist.data)
		}
		check.mu.Lock()
		check.bySubject = []domain.TargetDiscrepancy{
			{TargetKey: "t-a", AccessDiscrepancy: domain.AccessDiscrepancy{Subject: "mallory", OperationID: "op-3", Kind: domain.DiscrepancyInEffectNotOnMain}},
			{TargetKey: "t-b", AccessDiscrepancy: domain.AccessDiscrepancy{Subject: "mallory", OperationID: "op-4", Kind: domain.DiscrepancyOnMainNotInEffect}},
		}
		check.mu.Unlock()
		bySubject := get("/ops/access", url.Values{"subject": {"mallory"}, "at": {"2026-03-01T09:30:00Z"}})
		sds, _ := bySubject.data["discrepancies"].([]any)
		if len(sds) != 2 || bySubject.data["discrepanciesProblem"] != nil {
			t.Fatalf("by subject: %v", bySubject.data)
		}
		if a := sds[0].(map[string]any); a["targetKey"] != "t-a" || a["subject"] != "mallory" || a["operationId"] != "op-3" ||
			a["kind"] != "IN_EFFECT_NOT_ON_MAIN" || !strings.Contains(a["message"].(string), "removed or replaced by hand") {
			t.Fatalf("by subject, first: %v", a)
		}
		if b := sds[1].(map[string]any); b["targetKey"] != "t-b" || b["kind"] != "ON_MAIN_NOT_IN_EFFECT" {
			t.Fatalf("by subject, second: %v", b)
		}
		if len(check.asked) != 2 || check.asked[0] != tOpen || len(check.subjects) != 1 || check.subjects[0] != "mallory" {
			t.Fatalf("asked for targets %v, subjects %v", check.asked, check.subjects)
		}
		check.mu.Lock()
		check.bySubject, check.unreadable = check.bySubject[:1], []string{"t-c", "t-d"}
		check.mu.Unlock()
		partly := get("/ops/access", url.Values{"subject": {"mallory"}, "at": {"2026-03-01T09:30:00Z"}})
		if ds, _ := partly.data["discrepancies"].([]any); len(ds) != 1 ||
			!strings.Contains(partly.data["discrepanciesProblem"].(string), "t-c, t-d on the default branch could not be read") {
			t.Fatalf("by subject, two files unreadable: %v", partly.data)
		}
		check.mu.Lock()
		check.bySubject, check.unreadable, check.subjectErr = nil, nil, errors.New("database down")
		check.mu.Unlock()
		broken := get("/ops/access", url.Values{"subject": {"mallory"}, "at": {"2026-03-01T09:30:00Z"}})
		if ds, ok := broken.data["discrepancies"].([]any); !ok || len(ds) != 0 ||
			!strings.Contains(broken.data["discrepanciesProblem"].(string), "could not be compared") {
			t.Fatalf("by subject, failed: %v", broken.data)
		}

		check.mu.Lock()
		check.found, check.err = nil, errors.New("gitlab down")
		check.mu.Unlock()
		failed := get("/ops/access", url.Values{"target": {tOpen}, "at": {"2026-03-01T09:30:00Z"}})
		if ds, ok := failed.data["discrepancies"].([]any); !ok || len(ds) != 0 ||
			!strings.Contains(failed.data["discrepanciesProblem"].(string), "could not be read") {
			t.Fatalf("unreadable: %v", failed.data)
		}
		check.mu.Lock()
		check.err = nil
		check.mu.Unlock()
		none := get("/ops/access", url.Values{"target": {tOpen}, "at": {"2026-03-01T09:30:00Z"}})
		if ds, ok := none.data["discrepancies"].([]any); !ok || len(ds) != 0 || none.data["discrepanciesProblem"] != nil {
			t.Fatalf("none: %v", none.data)
		}
	})
}
