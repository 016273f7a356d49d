package httpapi

import (
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/filecheck"
	"changeflow/internal/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/callbacks"
	"changeflow/internal/workflow/flow"
)

// withApprovals applies approval callbacks through the workflow, timed by
// clock (the approval's time).
func withApprovals(clock *atomic.Pointer[time.Time]) worldOpt {
	return func(w *bizWorld, d *Deps) {
		w.overlay["approval.verifyDecisions"] = false
		env := flow.Env{Config: w.cfg.Current, Now: func() time.Time { return *clock.Load() }}
		d.Business.Sink = NewWorkflowSink(callbacks.New(env, w.st, nil))
	}
}

// TestApprovalFixesTheExpiry: on the approve-first flow a grant's days
// count from its approval, not its submission. Submitted at worldNow and
// approved three days later, the access runs days from the approval
// (capped by the target's maximum); until the approval the status read
// shows the days and expiresFromApproval, no end date. The operation,
// the binding and the binding's history agree with the read. A renewal
// keeps the end its submission computed from the grant's end.
func TestApprovalFixesTheExpiry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		ctx := t.Context()
		var clock atomic.Pointer[time.Time]
		approvedAt := worldNow.Add(3*24*time.Hour + 17*time.Minute + 400*time.Millisecond)
		clock.Store(&approvedAt)
		w := newBizWorld(t, st, withApprovals(&clock))
		// The approval id submit_approval would have recorded: the
		// approval system is not part of this test.
		record := func(id string) {
			t.Helper()
			if _, err := st.DB().ExecContext(ctx, "UPDATE operation SET approval_id = ? WHERE operation_id = ?", "ap-"+id, id); err != nil {
				t.Fatal(err)
			}
		}
		approve := func(id string) {
			t.Helper()
			w.do(req{method: "POST", path: "/callbacks/approval", header: map[string]string{headerCallbackToken: cbToken},
				body: `{"requestId":"d-` + id + `","approvalId":"ap-` + id + `","operationId":"` + id + `","result":"APPROVED"}`}).
				want(t, 200, "OK")
		}
		const day = 24 * time.Hour
		approvedSecond := approvedAt.Truncate(time.Second)

		for _, c := range []struct {
			name, user, id, days string
			want                 time.Time
		}{
			{"5 days from the approval", "alice", "af-exp-5", `,"days":5`, approvedSecond.Add(5 * day)},
			{"the maximum when left out, from the approval", "bob", "af-exp-max", "", approvedSecond.Add(30 * day)},
		} {
			t.Run(c.name, func(t *testing.T) {
				w.do(req{method: "POST", path: "/api/requests", user: c.user, body: submitBodyFor(tOpen, "audit", c.days),
					header: map[string]string{"Idempotency-Key": c.id}}).want(t, 202, "ACCEPTED")
				record(c.id)

				r := w.do(req{method: "GET", path: "/api/requests/" + c.id, user: c.user})
				r.want(t, 200, "OK")
				wantDays := float64(c.want.Sub(approvedSecond) / day)
				if _, ok := r.data["expiresAt"]; ok || r.data["expiresFromApproval"] != true || r.data["days"] != wantDays {
					t.Fatalf("before the approval %v: want days %v, expiresFromApproval and no expiresAt", r.env.Data, wantDays)
				}

				approve(c.id)
				r = w.do(req{method: "GET", path: "/api/requests/" + c.id, user: c.user})
				r.want(t, 200, "OK")
				if r.data["expiresAt"] != c.want.Format(time.RFC3339) || r.data["expiresFromApproval"] != nil ||
					r.data["status"] != string(domain.BindingMRCreating) {
					t.Fatalf("after the approval %v: want MR_CREATING until %s", r.env.Data, c.want.Format(time.RFC3339))
				}
				op, err := st.OperationGet(ctx, c.id)
				// The target batches: the approval admits it to the batch set.
				if err != nil || !op.ExpiresAt.Equal(c.want) || domain.StepStatus(op.Step) != domain.StepCreateAdmitted {
					t.Fatalf("operation %+v, %v: want CREATE_ADMITTED until %s", op, err, c.want)
				}
				b, err := st.BindingGetByOperation(ctx, c.id)
				if err != nil || !b.ExpiresAt.Equal(c.want) {
					t.Fatalf("binding %+v, %v: want until %s", b, err, c.want)
				}
				hist, err := st.BindingHistoryList(ctx, c.user, tOpen)
				if err != nil || len(hist) != 2 {
					t.Fatalf("history %+v, %v: want the application and the approval", hist, err)
				}
				if !hist[0].ExpiresAt.Equal(worldNow.Add(c.want.Sub(approvedSecond))) ||
					hist[1].OperationID != c.id || hist[1].Status != domain.BindingMRCreating || !hist[1].ExpiresAt.Equal(c.want) {
					t.Fatalf("history %+v: the submission's provisional end, then the approval's %s", hist, c.want)
				}
				// A second delivery of the same approval changes nothing.
				later := approvedAt.Add(day)
				clock.Store(&later)
				defer clock.Store(&approvedAt)
				w.do(req{method: "POST", path: "/callbacks/approval", header: map[string]string{headerCallbackToken: cbToken},
					body: `{"requestId":"d-` + c.id + `-again","approvalId":"ap-` + c.id + `","operationId":"` + c.id + `","result":"APPROVED"}`}).
					want(t, 200, "IGNORED_STALE")
				if op, err := st.OperationGet(ctx, c.id); err != nil || !op.ExpiresAt.Equal(c.want) {
					t.Fatalf("after a stale delivery %+v, %v: want still until %s", op, err, c.want)
				}
			})
		}

		t.Run("a renewal keeps the end it was submitted with", func(t *testing.T) {
			// The renewal window is compared by the database clock.
			until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
			seedGrant(t, st, "af-exp-grant", "olivia", 30, until)
			// The grant's entry on main, as its deployment left it.
			file := bindingfile.File{}.With(bindingfile.Entry{Subject: "olivia", ExpiresAt: until, OperationID: "af-exp-grant"})
			if _, err := w.gl.CreateCommit(ctx, "1", gitlab.CommitRequest{Branch: "main", Message: "seed",
				Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: "bindings/" + tOpen + ".yaml", Content: string(file.Marshal())}}}); err != nil {
				t.Fatal(err)
			}
			w.do(req{method: "POST", path: "/api/requests", user: "olivia", body: submitBodyFor(tOpen, "still needed", `,"days":5`),
				header: map[string]string{"Idempotency-Key": "af-exp-renewal"}}).want(t, 202, "ACCEPTED")
			record("af-exp-renewal")
			want := until.Add(5 * day)
			r := w.do(req{method: "GET", path: "/api/requests/af-exp-renewal", user: "olivia"})
			if r.data["expiresAt"] != want.Format(time.RFC3339) || r.data["expiresFromApproval"] != nil {
				t.Fatalf("renewal before its approval %v: want until %s", r.env.Data, want.Format(time.RFC3339))
			}
			approved := until.Add(-time.Hour)
			clock.Store(&approved)
			defer clock.Store(&approvedAt)
			approve("af-exp-renewal")
			op, err := st.OperationGet(ctx, "af-exp-renewal")
			if err != nil || domain.AwaitsApproval(domain.StepStatus(op.Step)) || !op.ExpiresAt.Equal(want) {
				t.Fatalf("renewal %+v, %v: want approved, until %s", op, err, want)
			}
			b, err := st.BindingGet(ctx, "olivia", tOpen)
			if err != nil || b.Status != domain.BindingRenewing || !b.ExpiresAt.Equal(until) {
				t.Fatalf("binding %+v, %v: want RENEWING with the grant's end %s", b, err, until)
			}
		})

		// Nothing of these requests reached main: the file holds the
		// renewed grant's entry alone, unchanged.
		ids := []string{"af-exp-5", "af-exp-max", "af-exp-grant", "af-exp-renewal"}
		content := ""
		if f, err := w.gl.GetFile(ctx, "1", "bindings/"+tOpen+".yaml", "main"); err == nil {
			content = string(f.Content)
		} else if !gitlab.IsNotFound(err) {
			t.Fatal(err)
		}
		if err := filecheck.Check(ctx, st, tOpen, []byte(content), ids); err != nil {
			t.Fatal(err)
		}
	})
}
