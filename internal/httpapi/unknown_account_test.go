package httpapi

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/identity"
	"changeflow/internal/metrics"
	simoidc "changeflow/internal/sim/oidc"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestUnknownAccountIsRefusedEverywhere performs the attack of a sign-in
// nobody set up: carol, whom the identity directory does not know, signs
// in through the OIDC issuer (a verified token, subject carol) or arrives
// through the trusted auth proxy (X-Auth-Request-User: carol) and asks
// for billing-dashboard. Before, both acted as the account "carol": the
// submission was accepted (202) and went on to a merged binding. Now every
// user and operations route answers 403 UNKNOWN_ACCOUNT with words that
// say who to ask, /api/me says so too, nothing is written to the
// database, and the permission service is never asked about her.
func TestUnknownAccountIsRefusedEverywhere(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		w := newBizWorld(t, st, withOIDC(), withOpsActions())
		tables := []string{"operation", "binding", "binding_history", "operation_step", "idempotency_record", "audit_log", "merge_batch_request"}
		rows := func() map[string]int {
			n := map[string]int{}
			for _, tb := range tables {
				var c int
				if err := st.DB().QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+tb).Scan(&c); err != nil {
					t.Fatal(err)
				}
				n[tb] = c
			}
			return n
		}
		submit := `{"targetKey":"billing-dashboard","reason":"need the numbers","days":2}`

		// The token path works: alice's verified token submits. So a
		// refusal below is about carol, not about bearer tokens.
		w.do(req{method: "POST", path: "/api/requests", body: submit,
			header: map[string]string{"Authorization": w.mint(simoidc.TokenRequest{Sub: "alice"}), "Idempotency-Key": "k-alice-ok"}}).
			want(t, 202, "ACCEPTED")
		before := rows()
		checks := len(w.perm.Checks())

		carol := map[string]map[string]string{
			"OIDC bearer token":           {"Authorization": w.mint(simoidc.TokenRequest{Sub: "carol", Email: "carol@partner.example"})},
			"proxy header":                {identity.HeaderUser: "carol"},
			"proxy header, unknown email": {identity.HeaderUser: "carol@partner.example"},
		}
		routes := []req{
			{method: "POST", path: "/api/requests", body: submit},
			{method: "GET", path: "/api/requests"},
			{method: "GET", path: "/api/requests/k-alice-ok"},
			{method: "GET", path: "/api/targets"},
			{method: "GET", path: "/api/targets/billing-dashboard/preview"},
			{method: "GET", path: "/api/stats"},
			{method: "POST", path: "/api/requests/k-alice-ok/withdraw"},
			{method: "GET", path: "/ops/requests/k-alice-ok"},
			{method: "POST", path: "/ops/reconcile", body: `{}`},
			{method: "GET", path: "/ops/config"},
		}
		for how, h := range carol {
			t.Run(how, func(t *testing.T) {
				for i, r := range routes {
					r.header = map[string]string{"Idempotency-Key": fmt.Sprintf("k-carol-%d", i)}
					for k, v := range h {
						r.header[k] = v
					}
					got := w.do(r)
					if got.status != 403 || got.env.Code != domain.CodeUnknownAccount {
						t.Fatalf("%s %s as carol by %s: %d %s, want 403 UNKNOWN_ACCOUNT: %s", r.method, r.path, how, got.status, got.env.Code, got.raw)
					}
					if got.env.Message != unknownAccountMessage {
						t.Fatalf("message %q", got.env.Message)
					}
				}
				// /api/me says why, in its answer, so the web app can show it.
				me := w.do(req{method: "GET", path: "/api/me", header: h})
				me.want(t, 403, "UNKNOWN_ACCOUNT")
				if acct := me.data["account"]; acct != "carol" && acct != "carol@partner.example" {
					t.Fatalf("/api/me data %v", me.data)
				}
			})
		}
		if after := rows(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("carol's calls wrote to the database: before %v, after %v", before, after)
		}
		if n := len(w.perm.Checks()); n != checks {
			t.Fatalf("the permission service was asked %d times about an unknown account", n-checks)
		}
		var carols int
		if err := st.DB().QueryRowContext(t.Context(), "SELECT COUNT(*) FROM operation WHERE subject LIKE 'carol%'").Scan(&carols); err != nil || carols != 0 {
			t.Fatalf("carol's operations: %d %v", carols, err)
		}
	})
}

// TestWithoutADirectoryOnlyAccountNamesLogIn: with identity.directoryFile
// unset there is no directory to resolve against, and the login layer is
// the only authority on accounts: a login that is an account name is that
// account; an email or employee ID, which only a directory could map to an
// account, is UNKNOWN_ACCOUNT (it used to act as the whole address).
func TestWithoutADirectoryOnlyAccountNamesLogIn(t *testing.T) {
	mgr, err := config.Load(t.Context(), config.Options{Overlay: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close() })
	logger := slog.New(slog.DiscardHandler)
	d := Deps{Logger: logger, Metrics: metrics.New(logger, "test"), Ready: fakeReady{}, Version: "test",
		Identity: identity.NewResolver(identity.Options{TrustedProxies: identity.LoopbackPrefixes}),
		Authz:    Authorization{Config: mgr}}
	h := newServer(d, route{pattern: "POST " + pathUser, handler: echo(nil), login: true})
	for _, c := range []struct {
		user   string
		status int
		code   domain.Code
	}{
		{"carol", 200, domain.CodeOK},
		{"carol@partner.example", 403, domain.CodeUnknownAccount},
		{"E99999", 403, domain.CodeUnknownAccount},
	} {
		r := httptest.NewRequest("POST", pathUser, strings.NewReader(`{}`))
		r.RemoteAddr = "127.0.0.1:4000"
		r.Header.Set(identity.HeaderUser, c.user)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var env Envelope
		_ = json.Unmarshal(rec.Body.Bytes(), &env)
		if rec.Code != c.status || env.Code != c.code {
			t.Fatalf("%s: %d %s, want %d %s", c.user, rec.Code, rec.Body.String(), c.status, c.code)
		}
	}
}
