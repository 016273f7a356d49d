package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// The status read builds its answer from the narrow read
// (store.OperationViewGet: only the columns the view shows, times parsed
// by the store). For requests in every state the view distinguishes, the
// answer is byte for byte the one built from the full rows (OperationGet
// and BindingGetByOperation, as the list does), encoded by encoding/json:
// so a view field that needs a column the narrow read does not select, or
// a time it reads differently, fails here.
func TestStatusReadNarrowMatchesFullRead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st)
		ctx := t.Context()
		d := st.Dialect()
		future, past := time.Now().Add(72*time.Hour), time.Now().Add(-time.Hour)
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := st.DB().ExecContext(ctx, q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		states := []struct {
			name    string
			arrange func(id, target string)
		}{
			{"waiting for its approval", func(string, string) {}},
			{"in effect, with its MR and batch", func(id, target string) {
				exec("UPDATE operation SET step_status = ?, mr_iid = 17, mr_url = 'https://gitlab.example/mr/17?a=1&b=<2>', batch_id = 3 WHERE operation_id = ?",
					int(domain.StepCalledBack), id)
				exec("UPDATE binding SET status = 'VALIDATED', expires_at = ? WHERE operation_id = ?", d.Time(future), id)
			}},
			{"in effect, without an expiry", func(id, target string) {
				exec("UPDATE operation SET step_status = ?, expires_at = NULL, days = NULL WHERE operation_id = ?", int(domain.StepCalledBack), id)
				exec("UPDATE binding SET status = 'VALIDATED', expires_at = NULL WHERE operation_id = ?", id)
			}},
			{"expired, its removal due", func(id, target string) {
				exec("UPDATE operation SET step_status = ? WHERE operation_id = ?", int(domain.StepCalledBack), id)
				exec("UPDATE binding SET status = 'VALIDATED', expires_at = ? WHERE operation_id = ?", d.Time(past), id)
			}},
			{"rejected", func(id, target string) {
				exec("UPDATE operation SET step_status = ? WHERE operation_id = ?", int(domain.StepCloseRejected), id)
				exec("UPDATE binding SET status = 'REJECTED' WHERE operation_id = ?", id)
			}},
			{"admitted to a batch round", func(id, target string) {
				exec("UPDATE operation SET step_status = ? WHERE operation_id = ?", int(domain.StepCreateAdmitted), id)
				exec("UPDATE binding SET status = 'MR_CREATING' WHERE operation_id = ?", id)
				if _, err := st.BatchAdmit(ctx, id, 1); err != nil {
					t.Fatal(err)
				}
			}},
			{"its pipeline running", func(id, target string) {
				exec("UPDATE operation SET step_status = ?, mr_iid = 5, mr_url = 'https://gitlab.example/mr/5' WHERE operation_id = ?",
					int(domain.StepCreatePipelineRunning), id)
				exec("UPDATE binding SET status = 'MR_CREATING' WHERE operation_id = ?", id)
			}},
			{"merged, waiting for the deployment", func(id, target string) {
				exec("UPDATE operation SET step_status = ? WHERE operation_id = ?", int(domain.StepHandleMerged), id)
				exec("UPDATE binding SET status = 'MERGED' WHERE operation_id = ?", id)
			}},
			{"superseded by a later request", func(id, target string) {
				exec("UPDATE binding SET operation_id = ? WHERE operation_id = ?", id+"-later", id)
			}},
			{"its access removed by its revocation", func(id, target string) {
				exec("UPDATE operation SET step_status = ? WHERE operation_id = ?", int(domain.StepCalledBack), id)
				exec("UPDATE binding SET status = 'REVOKED', operation_id = ? WHERE operation_id = ?", domain.RevocationID(id), id)
			}},
			{"a revocation", func(id, target string) {
				exec("UPDATE operation SET kind = 'REVOKE', grant_operation_id = ?, revoke_reason = 'GIVEN_BACK', step_status = ? WHERE operation_id = ?",
					id+"-grant", int(domain.StepHandleMerged), id)
				exec("UPDATE binding SET status = 'REVOKING' WHERE operation_id = ?", id)
			}},
			{"times the store did not write itself (the driver's layout)", func(id, target string) {
				// A time.Time bound without Dialect.Time: on SQLite the
				// driver's own layout with an offset, read by the general
				// parser rather than the fast one.
				at := time.Date(2033, 3, 4, 5, 6, 7, 891000000, time.FixedZone("X", -3*3600))
				exec("UPDATE operation SET step_status = ?, expires_at = ?, updated_at = ? WHERE operation_id = ?",
					int(domain.StepCalledBack), at, at.Add(time.Minute), id)
				exec("UPDATE binding SET status = 'VALIDATED', expires_at = ?, updated_at = ? WHERE operation_id = ?", at, at.Add(time.Hour), id)
			}},
		}
		targets := map[string]any{}
		for i := range states {
			target := fmt.Sprintf("narrow-%d", i)
			targets["targets."+target+".accessMode"] = "OPEN"
			targets["targets."+target+".maxDays"] = 30
			if i%2 == 0 {
				targets["targets."+target+".title"] = fmt.Sprintf("Target <%d> & co", i)
			}
		}
		w.load(targets)
		full := &Server{deps: Deps{Logger: slog.New(slog.DiscardHandler), Business: Business{Requests: st, Config: w.cfg}}}
		for i, s := range states {
			t.Run(s.name, func(t *testing.T) {
				id, target := fmt.Sprintf("narrow-op-%d", i), fmt.Sprintf("narrow-%d", i)
				w.do(req{method: "POST", path: "/api/requests", user: "alice", body: submitBodyFor(target, "why \"not\" <now>", ""),
					header: map[string]string{"Idempotency-Key": id}}).want(t, http.StatusAccepted, "ACCEPTED")
				s.arrange(id, target)
				got := w.do(req{method: "GET", path: "/api/requests/" + id, user: "alice"})
				got.want(t, http.StatusOK, "OK")
				op, err := st.OperationGet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				v, err := full.requestView(ctx, op, true)
				if err != nil {
					t.Fatal(err)
				}
				want, err := json.Marshal(Envelope{Code: domain.CodeOK, Data: v})
				if err != nil {
					t.Fatal(err)
				}
				if got.raw != string(want)+"\n" {
					t.Fatalf("the status read answered\n%s\nthe full rows give\n%s", got.raw, want)
				}
			})
		}
	})
}
