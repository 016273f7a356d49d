package httpapi

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/lifecycle"
)

// expiredFixture writes a grant of subject that is in effect and whose
// expiry passed an hour ago by the database clock.
func expiredFixture(t *testing.T, st *store.Store, opID, subject string) {
	t.Helper()
	validatedFixture(t, st, opID, subject)
	past, arg := st.Dialect().NowMinus(time.Hour)
	if _, err := st.DB().ExecContext(t.Context(),
		"UPDATE binding SET expires_at = "+past+" WHERE operation_id = ?", arg, opID); err != nil {
		t.Fatal(err)
	}
}

func TestOpsExpiryScan(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOpsActions())
		ctx := t.Context()
		const path = "/ops/expiry/scan"

		t.Run("401 and 403 before the body is read, audited, nothing scanned", func(t *testing.T) {
			expiredFixture(t, st, "x-early", "erin")
			w.do(req{method: "POST", path: path, body: "{not json"}).want(t, 401, "UNAUTHENTICATED")
			w.perm.SetGrants("bob", []string{"ops.read"})
			defer w.perm.SetGrants("bob", nil)
			for _, u := range []string{"alice", "bob"} {
				r := w.do(req{method: "POST", path: path, user: u, body: "{not json"})
				r.want(t, 403, "ACCESS_DENIED")
				if r.env.Message != "Access denied" {
					t.Fatalf("message %q", r.env.Message)
				}
			}
			if b, err := st.BindingGetByOperation(ctx, "x-early"); err != nil || b.Status != domain.BindingValidated {
				t.Fatalf("a refused scan moved the binding: %+v %v", b, err)
			}
		})

		t.Run("a scan revokes the expired grants, says how many in words, and is audited", func(t *testing.T) {
			expiredFixture(t, st, "x-1", "alice")
			expiredFixture(t, st, "x-2", "bob")
			validatedFixture(t, st, "x-live", "carol") // not expired: stays
			r := w.do(req{method: "POST", path: path, user: "olivia", body: `{"__authenticatedOperator":"mallory"}`})
			r.want(t, 200, "OK")
			if r.data["scanned"] != float64(3) || r.data["revoked"] != float64(3) || r.data["chunks"] != float64(1) {
				t.Fatalf("data %v", r.data)
			}
			if r.env.Message != "Created 3 revocations of the 3 expired grants read." {
				t.Fatalf("message %q", r.env.Message)
			}
			for _, id := range []string{"x-early", "x-1", "x-2"} {
				op, err := st.OperationGet(ctx, domain.RevocationID(id))
				if err != nil || op.RevokeReason != domain.RevokeExpired || op.GrantOperationID != id {
					t.Fatalf("revocation of %s: %+v %v", id, op, err)
				}
				if b, _ := st.BindingGetByOperation(ctx, domain.RevocationID(id)); b.Status != domain.BindingRevoking {
					t.Fatalf("binding of %s: %s", id, b.Status)
				}
			}
			if b, _ := st.BindingGetByOperation(ctx, "x-live"); b.Status != domain.BindingValidated {
				t.Fatalf("the live grant moved: %s", b.Status)
			}
			recs, err := st.AuditListByResource(ctx, "", 50)
			if err != nil {
				t.Fatal(err)
			}
			var ok *store.AuditRecord
			for i := range recs {
				switch {
				case recs[i].Action != config.RouteOpsExpiryScan:
				case recs[i].Outcome == "OK":
					ok = &recs[i]
				}
			}
			if ok == nil || ok.Actor != "olivia" {
				t.Fatalf("audit %+v", recs)
			}
			var params map[string]string
			if err := json.Unmarshal([]byte(ok.Params), &params); err != nil || params[OperatorParam] != "olivia" {
				t.Fatalf("params %s %v", ok.Params, err)
			}
		})

		t.Run("nothing expired: 200, none created, in words", func(t *testing.T) {
			r := w.do(req{method: "POST", path: path, user: "adam"})
			r.want(t, 200, "OK")
			if r.data["scanned"] != float64(0) || r.data["revoked"] != float64(0) {
				t.Fatalf("data %v", r.data)
			}
			if r.env.Message != "No revocation created: no granted access has expired." {
				t.Fatalf("message %q", r.env.Message)
			}
		})

		t.Run("manual scans at once create each revocation once", func(t *testing.T) {
			ids := make([]string, 12)
			for i := range ids {
				ids[i] = "x-race-" + string(rune('a'+i))
				expiredFixture(t, st, ids[i], "user-"+string(rune('a'+i)))
			}
			const callers = 4
			var wg sync.WaitGroup
			revoked := make([]int, callers)
			start := make(chan struct{})
			for c := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					r := w.do(req{method: "POST", path: path, user: "olivia"})
					if r.status != 200 {
						t.Errorf("scan %d: %d %s", c, r.status, r.raw)
						return
					}
					revoked[c] = int(r.data["revoked"].(float64))
					if !strings.HasPrefix(r.env.Message, "Created ") && !strings.HasPrefix(r.env.Message, "No revocation created") {
						t.Errorf("message %q", r.env.Message)
					}
				}()
			}
			close(start)
			wg.Wait()
			total := 0
			for _, n := range revoked {
				total += n
			}
			if total != len(ids) {
				t.Fatalf("the scans created %v revocations, %d in all, want %d", revoked, total, len(ids))
			}
			for _, id := range ids {
				steps, err := st.OperationStepList(ctx, domain.RevocationID(id))
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, s := range steps {
					if domain.StepStatus(s.ToStep) == domain.StepRevokeStarted {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("%s: %d REVOKE_STARTED rows, want 1", id, n)
				}
			}
		})

		t.Run("no workflow wired: 500 with the generic message", func(t *testing.T) {
			bare := newBizWorld(t, st)
			r := bare.do(req{method: "POST", path: path, user: "olivia"})
			r.want(t, 500, "INTERNAL_ERROR")
			if r.env.Message != domain.GenericMessage {
				t.Fatalf("message %q", r.env.Message)
			}
		})
	})
}

func TestExpiryScanWords(t *testing.T) {
	for _, tc := range []struct {
		res  lifecycle.ExpiryResult
		want string
	}{
		{lifecycle.ExpiryResult{}, "No revocation created: no granted access has expired."},
		{lifecycle.ExpiryResult{Scanned: 1, Revoked: 1, Chunks: 1}, "Created 1 revocation of the 1 expired grant read."},
		{lifecycle.ExpiryResult{Scanned: 3, Revoked: 2, Chunks: 1}, "Created 2 revocations of the 3 expired grants read. The other one was being revoked already (another scan or a give-back took it first)."},
		{lifecycle.ExpiryResult{Scanned: 7, Revoked: 4, Chunks: 2}, "Created 4 revocations of the 7 expired grants read. The other 3 were being revoked already (another scan or a give-back took them first)."},
		{lifecycle.ExpiryResult{Scanned: 1, Revoked: 0, Chunks: 1}, "No revocation created: the 1 expired grant read was being revoked already (another scan or a give-back took it first)."},
		{lifecycle.ExpiryResult{Scanned: 5, Revoked: 0, Chunks: 1}, "No revocation created: the 5 expired grants read were being revoked already (another scan or a give-back took them first)."},
		{lifecycle.ExpiryResult{Chunks: 1, Lapsed: 1}, "No revocation created: no granted access has expired. Withdrew 1 renewal not yet in effect when the access they renew expired; that access is revoked by a later scan once their merge requests are closed (a renewal whose merge request merged first is in effect instead)."},
	} {
		if got := expiryScanWords(tc.res); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.res, got, tc.want)
		}
	}
}
