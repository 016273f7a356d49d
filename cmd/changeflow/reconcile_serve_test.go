package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestServeReconcilesALostDeployCallback: the served process runs the
// reconciler on reconcile.interval; a MERGED request whose deploy callback
// was lost, below a later deployed MR, becomes VALIDATED and the validated
// metric counts it once.
func TestServeReconcilesALostDeployCallback(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "changeflow.yaml")
	writeConfig(t, file, sqliteConfig(t, dir, `reconcile:
  interval: 50ms
  minAge: 1s
  maxAge: 1h
`))
	in := startServe(t, file, nil)

	st := storetest.OpenDSN(t, store.DriverSQLite, "file:"+filepath.Join(dir, "cf.db"))
	ctx := t.Context()
	past, arg := st.Dialect().NowMinus(time.Minute)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, mr_iid) VALUES ('op-lost', 'alice', 'payments-db', 1, 'LEGACY', 10108, 4)", nil},
		{"INSERT INTO binding (subject_id, target_key, status, operation_id, updated_at) VALUES ('alice', 'payments-db', 'MERGED', 'op-lost', " + past + ")", []any{arg}},
		// MR !9, merged by changeflow earlier and deployed: its callback
		// is the watermark (a callback for an MR changeflow did not merge
		// would raise none).
		{"INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status, mr_iid) VALUES ('op-earlier', 'bob', 'payments-db', 1, 'LEGACY', 10301, 9)", nil},
		{"INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES ('bob', 'payments-db', 'VALIDATED', 'op-earlier')", nil},
		{"INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES ('op-earlier', 10101, 10108, 'MERGING', 'MERGED')", nil},
		{"INSERT INTO deploy_callback (project_id, mr_iid, status) VALUES (1, 9, 'SUCCESS')", nil},
	} {
		if _, err := st.DB().ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := st.BindingGetByOperation(ctx, "op-lost")
		if err != nil {
			t.Fatal(err)
		}
		if b.Status == "VALIDATED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s\nstderr:\n%s", b.Status, in.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The metric is emitted after the flip commits (I9), so it may trail
	// the row we just read by a moment: poll it, bounded.
	var lines string
	for {
		resp, err := procClient.Get(in.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lines = reconcileMetricLines(string(body), `changeflow_requests_validated_total{`)
		if lines != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("validated metric never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lines != `changeflow_requests_validated_total{target="payments-db"} 1` {
		t.Fatalf("validated metric wrong, want exactly one count:\n%s", lines)
	}
}

func reconcileMetricLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
