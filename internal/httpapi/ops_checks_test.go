package httpapi

import (
	"context"
	"encoding/json"
	"testing"

	"changeflow/internal/doctor"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// withChecks wires the deployment checks against the world's GitLab
// simulator and configuration, as serve does.
func withChecks() worldOpt {
	return func(w *bizWorld, d *Deps) {
		d.Business.Checks = func(ctx context.Context) doctor.Report {
			return doctor.Check(ctx, doctor.Options{Snapshot: w.cfg.Current(), GitLab: w.gl})
		}
	}
}

// TestOpsChecks: GET /ops/checks answers the doctor's report as data for
// ops.read, 200 whatever the findings (the world's simulated GitLab
// protects nothing, so the protection check fails and says what to
// change); without the right it is 403, without a login 401.
func TestOpsChecks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withChecks())
		got := w.do(req{method: "GET", path: "/ops/checks", user: "olivia"})
		if got.status != 200 {
			t.Fatalf("GET /ops/checks = %d %s", got.status, got.raw)
		}
		var env struct {
			Data doctor.Report `json:"data"`
		}
		if err := json.Unmarshal([]byte(got.raw), &env); err != nil {
			t.Fatal(err)
		}
		var prot *doctor.Finding
		for i, f := range env.Data.Findings {
			if f.ID == "protected-branch" {
				prot = &env.Data.Findings[i]
			}
		}
		if env.Data.Status != doctor.StatusFail || prot == nil || prot.Status != doctor.StatusFail || prot.Fix == "" {
			t.Fatalf("report %s, protection %+v", env.Data.Status, prot)
		}
		if got := w.do(req{method: "GET", path: "/ops/checks", user: "alice"}); got.status != 403 {
			t.Fatalf("alice = %d", got.status)
		}
		if got := w.do(req{method: "GET", path: "/ops/checks"}); got.status != 401 {
			t.Fatalf("no login = %d", got.status)
		}
	})
}
