package httpapi

import (
	"fmt"
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// chainWorld drives one relationship (subject on tOpen) through renewals
// by the HTTP submit, and moves each renewal's state the way the workflow
// leaves it (deploy callback: in effect; approval: rejected).
type chainWorld struct {
	t       *testing.T
	w       *bizWorld
	st      *store.Store
	subject string
}

func (c chainWorld) exec(q string, args ...any) {
	c.t.Helper()
	if _, err := c.st.DB().ExecContext(c.t.Context(), q, args...); err != nil {
		c.t.Fatalf("%s: %v", q, err)
	}
}

// renew re-applies inside the window as id: accepted as a renewal of the
// request in effect, which must be renews.
func (c chainWorld) renew(id, renews string) {
	c.t.Helper()
	c.w.do(req{method: "POST", path: "/api/requests", user: c.subject, body: submitBodyFor(tOpen, "still needed", ""),
		header: map[string]string{"Idempotency-Key": id}}).want(c.t, 202, "ACCEPTED")
	op, err := c.st.OperationGet(c.t.Context(), id)
	if err != nil || op.Kind != domain.OperationRenew || op.GrantOperationID != renews {
		c.t.Fatalf("renewal %s: %+v %v, want a renewal of %s", id, op, err, renews)
	}
}

// inEffect is renewal id merged and deployed: its step and history as
// the deploy callback writes them, the row VALIDATED by it at its own
// expiry — set to until, inside its renewal window, so the next renewal
// is accepted.
func (c chainWorld) inEffect(id string, until time.Time) {
	c.t.Helper()
	d := c.st.Dialect()
	c.exec("UPDATE operation SET step_status = ?, expires_at = ? WHERE operation_id = ?", int(domain.StepCalledBack), d.Time(until), id)
	c.exec("INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES (?, ?, ?, 'MERGED', 'VALIDATED')",
		id, int(domain.StepHandleMerged), int(domain.StepCalledBack))
	c.exec("UPDATE binding SET status = 'VALIDATED', expires_at = ?, version = version + 1 WHERE operation_id = ?", d.Time(until), id)
}

// rejected is renewal id rejected by its approver: it ends CLOSE_REJECTED
// and the row goes back to grant, VALIDATED, its expiry untouched
// (OperationKind.EndsWithoutEffect).
func (c chainWorld) rejected(id, grant string) {
	c.t.Helper()
	c.exec("UPDATE operation SET step_status = ? WHERE operation_id = ?", int(domain.StepCloseRejected), id)
	c.exec("INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES (?, ?, ?, 'RENEWING', 'VALIDATED')",
		id, int(domain.StepCreateApprovalSubmitted), int(domain.StepCloseRejected))
	c.exec("UPDATE binding SET status = 'VALIDATED', operation_id = ?, version = version + 1 WHERE operation_id = ?", grant, id)
}

// read is GET /api/requests/{id} as the owner.
func (c chainWorld) read(id string) map[string]any {
	c.t.Helper()
	r := c.w.do(req{method: "GET", path: "/api/requests/" + id, user: c.subject})
	r.want(c.t, 200, "OK")
	return r.data
}

// wantCarried: id's page says its access continues under carrier, in
// effect until until — not in effect under its own expiry: no renewFrom,
// no revocation.
func (c chainWorld) wantCarried(id, carrier string, until time.Time) {
	c.t.Helper()
	v := c.read(id)
	ren, _ := v["renewal"].(map[string]any)
	if v["status"] != string(domain.BindingValidated) || ren["operationId"] != carrier || ren["status"] != string(domain.BindingValidated) ||
		ren["expiresAt"] != until.Format(time.RFC3339) {
		c.t.Fatalf("%s's page %v: want its access carried by %s until %s", id, v, carrier, until.Format(time.RFC3339))
	}
	if v["renewFrom"] != nil || v["revocationId"] != nil {
		c.t.Fatalf("%s's page offers what only the carrier has: %v", id, v)
	}
}

// TestOldGrantAfterItsRenewalWasRenewed is the defect: a grant renewed by
// R1, R1 then renewed by R2 — the grant's page read its own history's end
// ("In effect", no renewal, give back offered and refused with 404).
// Each old request's page now names the renewal that carries the access,
// a renewal rejected in the middle is skipped, and giving an old request
// back is a 409 that names the request to give back instead.
func TestOldGrantAfterItsRenewalWasRenewed(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withRevoker(), withPeople("rita"))
		c := chainWorld{t: t, w: w, st: st, subject: "rita"}
		soon := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
		later := soon.Add(time.Hour)
		last := later.Add(time.Hour)
		seedGrant(t, st, "chain-g", c.subject, 30, soon)

		// A renewal of the grant rejected, then one that takes effect.
		c.renew("chain-r0", "chain-g")
		c.rejected("chain-r0", "chain-g")
		c.renew("chain-r1", "chain-g")
		c.inEffect("chain-r1", later)
		c.wantCarried("chain-g", "chain-r1", later)

		// R1 renewed in turn: while R2 runs, R1 carries the access (its
		// entry, its expiry), and R1's own page names R2 in flight.
		c.renew("chain-r2", "chain-r1")
		c.wantCarried("chain-g", "chain-r1", later)
		r1 := c.read("chain-r1")
		if ren, _ := r1["renewal"].(map[string]any); r1["status"] != string(domain.BindingValidated) ||
			ren["operationId"] != "chain-r2" || ren["status"] != string(domain.BindingApprovalSending) || ren["expiresAt"] != nil {
			t.Fatalf("R1's page while R2 runs: %v", r1)
		}
		// R2 rejected: R1 again, and the chain stops at R1.
		c.rejected("chain-r2", "chain-r1")
		c.wantCarried("chain-g", "chain-r1", later)
		if r1 := c.read("chain-r1"); r1["renewal"] != nil || r1["renewFrom"] == nil {
			t.Fatalf("R1 in effect again, owning its row: %v", r1)
		}

		// A third renewal, of R1, takes effect: the grant and R1 both
		// name it.
		c.renew("chain-r3", "chain-r1")
		c.inEffect("chain-r3", last)
		c.wantCarried("chain-g", "chain-r3", last)
		c.wantCarried("chain-r1", "chain-r3", last)
		if r0 := c.read("chain-r0"); r0["status"] != string(domain.BindingRejected) || r0["renewal"] != nil {
			t.Fatalf("the rejected renewal's page: %v", r0)
		}

		// Giving an old request back names the request to act on.
		for _, old := range []string{"chain-g", "chain-r1"} {
			r := w.do(req{method: "POST", path: "/api/requests/" + old + "/revoke", user: c.subject})
			r.wantRefused(t, 409, "NOT_IN_EFFECT", domain.ReasonRenewed)
			if r.data["operationId"] != "chain-r3" {
				t.Fatalf("give back %s: %q %v, want chain-r3 named", old, r.env.Message, r.env.Data)
			}
			r = w.do(req{method: "POST", path: "/ops/requests/" + old + "/revoke", user: "olivia", body: `{"reason":"offboarding"}`})
			r.wantRefused(t, 409, "NOT_IN_EFFECT", domain.ReasonRenewed)
			if r.data["operationId"] != "chain-r3" {
				t.Fatalf("operator revoke of %s: %q %v, want chain-r3 named", old, r.env.Message, r.env.Data)
			}
		}
		if n := countRows(t, st, "SELECT COUNT(*) FROM operation WHERE kind = 'REVOKE'"); n != 0 {
			t.Fatalf("%d revocations after refused give-backs", n)
		}

		// The carrier given back: every old page follows its removal.
		rev := domain.RevocationID("chain-r3")
		w.do(req{method: "POST", path: "/api/requests/chain-r3/revoke", user: c.subject}).want(t, 202, "ACCEPTED")
		for _, old := range []string{"chain-g", "chain-r1"} {
			if v := c.read(old); v["status"] != string(domain.BindingRevoking) || v["revocationId"] != rev || v["renewal"] != nil {
				t.Fatalf("%s while the carrier's access is being removed: %v", old, v)
			}
			r := w.do(req{method: "POST", path: "/api/requests/" + old + "/revoke", user: c.subject})
			r.wantRefused(t, 409, "NOT_IN_EFFECT", domain.ReasonRemoved)
			if r.data["operationId"] != rev {
				t.Fatalf("give back %s while removed: %q %v, want %s named", old, r.env.Message, r.env.Data, rev)
			}
		}
		// Removed and deployed, then asked for again: the new request
		// takes the row; the old pages still say removed.
		c.exec("INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES (?, ?, ?, 'REVOKING', 'REVOKED')",
			rev, int(domain.StepHandleMerged), int(domain.StepCalledBack))
		c.exec("UPDATE binding SET status = 'REVOKED', version = version + 1 WHERE operation_id = ?", rev)
		w.do(req{method: "POST", path: "/api/requests", user: c.subject, body: submitBodyFor(tOpen, "again", ""),
			header: map[string]string{"Idempotency-Key": "chain-again"}}).want(t, 202, "ACCEPTED")
		for _, old := range []string{"chain-g", "chain-r1", "chain-r3"} {
			if v := c.read(old); v["status"] != string(domain.BindingRevoked) || v["revocationId"] != rev || v["renewal"] != nil {
				t.Fatalf("%s after its access was removed and asked for again: %v", old, v)
			}
		}
	})
}

// TestOldGrantAfterItsRenewalExpired: the renewal in effect expired and
// the scan's revocation removed it — the grant's page says removed, with
// the removal to follow, not "In effect".
func TestOldGrantAfterItsRenewalExpired(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withRevoker(), withPeople("ezra"))
		c := chainWorld{t: t, w: w, st: st, subject: "ezra"}
		seedGrant(t, st, "exp-g", c.subject, 30, time.Now().Add(2*time.Hour).UTC().Truncate(time.Second))
		c.renew("exp-r1", "exp-g")
		c.inEffect("exp-r1", time.Now().Add(-time.Minute).UTC().Truncate(time.Second))
		// The re-application after the expiry creates the scan's own
		// revocation (and is refused); the removal is under way.
		w.do(req{method: "POST", path: "/api/requests", user: c.subject, body: submitBodyFor(tOpen, "late", "")}).
			wantRefused(t, 409, "REQUEST_IN_PROGRESS", domain.ReasonExpiredBeingRemoved)
		rev := domain.RevocationID("exp-r1")
		if op, err := st.OperationGet(t.Context(), rev); err != nil || op.RevokeReason != domain.RevokeExpired {
			t.Fatalf("the expiry's revocation: %+v %v", op, err)
		}
		if v := c.read("exp-g"); v["status"] != string(domain.BindingRevoking) || v["revocationId"] != rev {
			t.Fatalf("the grant's page after its renewal expired: %v", v)
		}
	})
}

// seedChain stores subject's grant <prefix>-0 on tOpen renewed n times
// in a row (<prefix>-1 renews -0, …), each renewal in effect and then
// renewed (its history ends VALIDATED), the last one owning the row in
// effect until until.
func seedChain(t *testing.T, st *store.Store, subject, prefix string, n int, until time.Time) {
	t.Helper()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := st.DB().ExecContext(t.Context(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	seedGrant(t, st, prefix+"-0", subject, 30, until)
	for i := 1; i <= n; i++ {
		id, prev := fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("%s-%d", prefix, i-1)
		if _, err := st.OperationCreate(t.Context(), store.OperationCreateParams{OperationID: id, Subject: subject, TargetKey: tOpen,
			Flow: "APPROVE_FIRST", Step: int(domain.StepCalledBack), Reason: "again", Days: 30, ExpiresAt: until}); err != nil {
			t.Fatal(err)
		}
		exec("UPDATE operation SET grant_operation_id = ? WHERE operation_id = ?", prev, id)
		exec("INSERT INTO operation_step (operation_id, from_step, to_step, from_binding_status, to_binding_status) VALUES (?, ?, ?, 'MERGED', 'VALIDATED')",
			id, int(domain.StepHandleMerged), int(domain.StepCalledBack))
	}
	exec("UPDATE binding SET operation_id = ?, expires_at = ?, version = version + 1 WHERE subject_id = ? AND target_key = ?",
		fmt.Sprintf("%s-%d", prefix, n), st.Dialect().Time(until), subject, tOpen)
}

// TestRenewalChainReadCostsOneStatementPerLink: the status read of a
// grant renewed d times costs a fixed number of statements plus one per
// link (counted at the driver), and no more past the bound — the chain
// is read link by link on the index, never by scanning, and the bound
// caps the cost.
func TestRenewalChainReadCostsOneStatementPerLink(t *testing.T) {
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			depths := []int{1, 2, 8, maxChainLinks, maxChainLinks + 8}
			var people []string
			for _, d := range depths {
				people = append(people, fmt.Sprintf("depth-%d", d))
			}
			sw := newStatusReadWorld(t, driver, withPeople(people...))
			st := sw.w.st
			until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
			cost := map[int]int64{}
			for _, d := range depths {
				subject := fmt.Sprintf("depth-%d", d)
				seedChain(t, st, subject, subject, d, until)
				read := func() {
					r := sw.w.do(req{method: "GET", path: "/api/requests/" + subject + "-0", user: subject})
					r.want(t, 200, "OK")
					if ren, _ := r.data["renewal"].(map[string]any); ren == nil {
						t.Fatalf("depth %d: no renewal named: %v", d, r.data)
					}
				}
				read() // the first read prepares what it prepares
				s0, _, _ := sw.counter.Snapshot()
				read()
				s1, _, _ := sw.counter.Snapshot()
				cost[d] = s1 - s0
				t.Logf("%s: a grant renewed %d times: %d statements per status read", driver, d, cost[d])
			}
			base := cost[1] - 1
			for _, d := range []int{2, 8, maxChainLinks} {
				if cost[d] != base+int64(d) {
					t.Errorf("renewed %d times: %d statements, want %d (%d + one per link)", d, cost[d], base+int64(d), base)
				}
			}
			if cost[maxChainLinks+8] != cost[maxChainLinks] {
				t.Errorf("past the bound: %d statements, want %d (the bound's)", cost[maxChainLinks+8], cost[maxChainLinks])
			}
		})
	}
}

// TestRenewalChainIsReadToItsBound: a chain longer than maxChainLinks is
// shown up to its last link within the bound (a renewal that took
// effect: it has a renewal), and that link's page reads on to the
// chain's end — each read costs at most the bound, and a person reaches
// the end by following the link.
func TestRenewalChainIsReadToItsBound(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withPeople("lena"))
		c := chainWorld{t: t, w: w, st: st, subject: "lena"}
		until := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
		const n = maxChainLinks + 5
		seedChain(t, st, c.subject, "long", n, until)
		last := fmt.Sprintf("long-%d", n)

		v := c.read("long-0")
		ren, _ := v["renewal"].(map[string]any)
		bound := fmt.Sprintf("long-%d", maxChainLinks)
		if ren["operationId"] != bound || ren["status"] != string(domain.BindingValidated) {
			t.Fatalf("the grant's page of a chain of %d: %v, want it to name %s", n, v, bound)
		}
		c.wantCarried(bound, last, until)
	})
}
