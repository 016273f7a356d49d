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

// fakeAccessCheck answers Discrepancies with what the test set.
type fakeAccessCheck struct {
	mu    sync.Mutex
	found []domain.AccessDiscrepancy
	err   error
	asked []string
}

func (f *fakeAccessCheck) Discrepancies(_ context.Context, target string) ([]domain.AccessDiscrepancy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, target)
	return f.found, f.err
}

// TestOpsAccessDiscrepancies: by target, GET /ops/access and
// /ops/access/history carry the check's discrepancies, each with its
// kind and words, or — when the file could not be compared — an empty
// list and the problem in words; by subject neither is asked or shown;
// a repo period shows its removing commit as endSha.
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
		if first["subject"] != "amy" || first["operationId"] != "op-1" || first["kind"] != "ON_MAIN_NOT_IN_EFFECT" ||
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
		bySubject := get("/ops/access", url.Values{"subject": {"mallory"}, "at": {"2026-03-01T09:30:00Z"}})
		if _, ok := bySubject.data["discrepancies"]; ok {
			t.Fatalf("by subject: %v", bySubject.data)
		}
		if len(check.asked) != 2 || check.asked[0] != tOpen {
			t.Fatalf("asked for %v", check.asked)
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
