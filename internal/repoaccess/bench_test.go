package repoaccess_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/gitlab"
	"changeflow/internal/repoaccess"
	simgl "changeflow/internal/sim/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// BenchmarkReaderFirstPass measures the first pass over a binding file
// with a history of 200 hand commits on main (each adding one entry, so
// the last version holds 200), against the GitLab simulator over real
// git and SQLite: one pass lists the history (2 pages), reads the file
// at 201 commits and writes 200 repo periods with the cursor in one
// transaction.
func BenchmarkReaderFirstPass(b *testing.B) {
	sim, err := simgl.New(simgl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/gitlab/", http.StripPrefix("/gitlab", sim))
	ts := httptest.NewServer(mux)
	b.Cleanup(func() { ts.Close(); _ = sim.Close() })
	var f bindingfile.File
	const commits = 200
	for i := range commits {
		f = f.With(bindingfile.Entry{Subject: "hand-" + strconv.Itoa(i),
			ExpiresAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), OperationID: "hand-" + strconv.Itoa(i)})
		action := "update"
		if i == 0 {
			action = "create"
		}
		body, _ := json.Marshal(map[string]any{"branch": "main", "commit_message": "hand " + strconv.Itoa(i),
			"actions": []map[string]any{{"action": action, "file_path": "bindings/t.yaml", "content": string(f.Marshal())}}})
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/gitlab/api/v4/projects/1/repository/commits", bytes.NewReader(body))
		req.Header.Set("PRIVATE-TOKEN", "local-maintainer-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusCreated {
			b.Fatalf("commit %d: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	gl := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings {
		return gitlab.Settings{BaseURL: ts.URL + "/gitlab/", Tokens: gitlab.Bots{Committer: "local-committer-token"},
			Timeout: 10 * time.Second, BreakerFailures: 100, BreakerOpenFor: time.Minute}
	}})
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		st := storetest.Open(b, store.DriverSQLite)
		r := repoaccess.New(repoaccess.Options{Store: st, History: gl, Settings: func() repoaccess.Settings {
			return repoaccess.Settings{Interval: time.Minute, Project: "1", Ref: "main", Targets: []repoaccess.Target{{Key: "t", File: "bindings/t.yaml"}}}
		}})
		b.StartTimer()
		n, err := r.ReadAll(b.Context())
		if err != nil || n != commits {
			b.Fatalf("pass: %d commits, %v", n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/commits, "ms/commit")
}
