package main

import (
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestDeployGuide proves docs/deploy.md: the database user is created with
// exactly the grants the guide prints (read from the guide itself), the
// example configuration docs/changeflow.example.yaml is used unchanged with
// only the DSN, the addresses and the directory file's path filled in (as
// CHANGEFLOW_* variables, the way the guide recommends for secrets),
// `changeflow migrate` and `changeflow serve --config` run as processes
// against a throwaway MariaDB and `changeflow sim`, a person signs in
// through the OIDC simulator (authorization code with PKCE, as the web app
// does) and one request reaches VALIDATED. The run ends by comparing the
// binding file on GitLab's main with the database. The local run's login —
// the auth-proxy header from loopback, which the web app's user picker
// sends — must not log anyone in here.
func TestDeployGuide(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dsn := guideUser(t) // skips without MariaDB (fails in CI)

	appPort := freePort(t)
	appBase := fmt.Sprintf("http://127.0.0.1:%d", appPort)
	sim := startSim(t, dir, []string{appBase})

	file := filepath.Join(dir, "changeflow.yaml")
	copyDoc(t, "changeflow.example.yaml", file)
	// The guide's example directory, unchanged: its people are the
	// simulated world's.
	dirFile := filepath.Join(dir, "directory.yaml")
	copyDoc(t, "directory.example.yaml", dirFile)
	env := childEnv(append([]string{
		"CHANGEFLOW_DATABASE_DSN=" + dsn,
		"CHANGEFLOW_SERVER_LISTEN=" + strings.TrimPrefix(appBase, "http://"),
		"CHANGEFLOW_SERVER_PUBLICURL=" + appBase + "/",
		"CHANGEFLOW_GITLAB_BASEURL=" + sim.base + "/gitlab/",
		"CHANGEFLOW_APPROVAL_BASEURL=" + sim.base + "/approval/",
		"CHANGEFLOW_PERMISSION_BASEURL=" + sim.base + "/permission/",
		"CHANGEFLOW_OIDC_ISSUER=" + sim.base + "/oidc/",
		"CHANGEFLOW_IDENTITY_DIRECTORYFILE=" + dirFile,
	}, procSecretsEnv()...)...)

	// changeflow migrate, as the guide's upgrade procedure runs it.
	mig := startProc(t, dir, "migrate", env, "migrate", "--config", file)
	waitFor(t, 120*time.Second, "changeflow migrate to exit", mig.exited)
	if mig.cmd.ProcessState.ExitCode() != 0 || !strings.Contains(mig.output(), "applied") {
		t.Fatalf("changeflow migrate failed (%d):\n%s", mig.cmd.ProcessState.ExitCode(), mig.output())
	}

	srv := startProc(t, dir, "serve", env, "serve", "--config", file)
	waitServeReady(t, srv, appBase, "serve")
	// A production configuration must not warn about its own example: no
	// item fell back, no key is unknown — and, as the guide promises of a
	// clean start, nothing at all at warn or error level (a deployment
	// check, a directory entry left out).
	cleanStart(t, "serve on the example configuration", srv.output())

	// The guide's GitLab step: protect changeflow/* for the committer
	// (docs/deploy.md, "Protect changeflow's branches", its API call), then
	// `changeflow doctor` on the same configuration passes — the webhook
	// is a warning, since this deployment has no gitlab.tokens.doctor to
	// read hooks with.
	var committer struct{ ID int64 }
	getJSON(t, sim.base+"/gitlab/api/v4/user", map[string]string{"PRIVATE-TOKEN": procCommitterToken}, &committer)
	sim.must(t, http.MethodPost, "/gitlab/api/v4/projects/1/protected_branches", map[string]any{
		"name": "changeflow/*", "allowed_to_push": []map[string]any{{"user_id": committer.ID}},
		"allowed_to_merge": []map[string]any{{"access_level": 0}}, "allow_force_push": true}, nil)
	doc := startProc(t, dir, "doctor", env, "doctor", "--config", file)
	waitFor(t, 60*time.Second, "changeflow doctor to exit", doc.exited)
	if doc.cmd.ProcessState.ExitCode() != 0 || !strings.Contains(doc.output(), "OK    changeflow/* is a protected branch") {
		t.Fatalf("changeflow doctor on the guide's deployment (%d):\n%s", doc.cmd.ProcessState.ExitCode(), doc.output())
	}

	// The web app's configuration: OIDC sign-in, no simulator links.
	var appCfg struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	getJSON(t, appBase+"/api/app-config", nil, &appCfg)
	var oidcCfg struct{ Issuer, ClientID string }
	if err := json.Unmarshal(appCfg.Data["oidc"], &oidcCfg); err != nil || oidcCfg.Issuer == "" || oidcCfg.ClientID == "" {
		t.Fatalf("app config offers no OIDC sign-in: %s", appCfg.Data["oidc"])
	}
	if _, ok := appCfg.Data["simulators"]; ok {
		t.Fatalf("a production configuration links simulators: %s", appCfg.Data["simulators"])
	}
	// The user picker's header from loopback logs nobody in.
	req, _ := http.NewRequest(http.MethodGet, appBase+"/api/requests", nil)
	req.Header.Set("X-Auth-Request-User", "alice")
	if code := doStatus(t, req); code != http.StatusUnauthorized {
		t.Fatalf("the local run's login header from loopback = %d, want 401", code)
	}

	token := oidcSignIn(t, oidcCfg.Issuer, oidcCfg.ClientID, appBase+"/login/callback", "alice")

	const op = "deploy-guide-1"
	if subject := submitUntilValidated(t, appBase, token, op, "payments-db-readonly", srv); subject != "alice" {
		t.Fatalf("subject = %q, want the canonical account alice", subject)
	}

	// The binding file on main holds exactly the binding the database has.
	st := storetest.OpenDSN(t, store.DriverMySQL, dsn)
	b, err := st.BindingGet(t.Context(), "alice", "payments-db-readonly")
	if err != nil {
		t.Fatal(err)
	}
	f, err := bindingfile.Parse([]byte(sim.fileOnMain(t, "payments-db-readonly")))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := f.Entry("alice")
	if len(f.Entries) != 1 || !ok || e.OperationID != op || b.OperationID != op || b.Status != domain.BindingValidated ||
		!e.ExpiresAt.Equal(b.ExpiresAt.UTC().Truncate(time.Second)) {
		t.Fatalf("binding file on main %+v vs database %+v", f.Entries, b)
	}
}

// submitUntilValidated asks for target with the OIDC bearer token, wants
// 202, and waits until the request is VALIDATED; it returns the subject
// the instance recorded. A request that stops for a person fails the test
// with srv's log.
func submitUntilValidated(t *testing.T, appBase, token, op, target string, srv *proc) string {
	t.Helper()
	body := fmt.Sprintf(`{"operationId":%q,"targetKey":%q,"reason":"deployment guide","days":3}`, op, target)
	req, _ := http.NewRequest(http.MethodPost, appBase+"/api/requests", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if code := doStatus(t, req); code != http.StatusAccepted {
		t.Fatalf("submit with the OIDC token = %d", code)
	}
	var last struct {
		Data struct {
			Status, Subject, Hint string
		} `json:"data"`
	}
	waitFor(t, 180*time.Second, op+" VALIDATED", func() bool {
		req, _ := http.NewRequest(http.MethodGet, appBase+"/api/requests/"+op, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&last)
		if last.Data.Hint == "CONTACT_MAINTAINERS" {
			t.Fatalf("request failed deterministically: %+v\n%s", last.Data, tail(srv.output(), 4000))
		}
		time.Sleep(200 * time.Millisecond)
		return last.Data.Status == string(domain.BindingValidated)
	})
	return last.Data.Subject
}

// cleanStart fails the test when a start log (serve's JSON lines) holds a
// line at warn or error level, naming the lines.
func cleanStart(t *testing.T, what, log string) {
	t.Helper()
	for _, bad := range []string{"config: item fell back", "unknown key ignored", `"level":"WARN"`, `"level":"ERROR"`} {
		if strings.Contains(log, bad) {
			t.Fatalf("%s logged %s:\n%s", what, bad, grepLines(log, bad))
		}
	}
}

// guideUser creates a throwaway MariaDB database and on it the database
// user docs/deploy.md describes, with the grants printed in its
// "Database" section between the grants markers, and returns that user's
// DSN. It skips the test without MariaDB (fails in CI).
func guideUser(t *testing.T) string {
	t.Helper()
	adminDSN := storetest.NewDatabase(t, store.DriverMySQL)
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- grants -->\\s*```sql\\n(.*?)```\\s*<!-- /grants -->").FindSubmatch(guide)
	if m == nil {
		t.Fatal("docs/deploy.md has no ```sql block between <!-- grants --> and <!-- /grants -->")
	}
	cfg, err := mysql.ParseDSN(adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	user, pass := "cfguide_"+hex.EncodeToString(rb[:]), hex.EncodeToString(rb[:])+"Pw"
	sqlText := strings.NewReplacer("`changeflow`.*", "`"+cfg.DBName+"`.*", "'changeflow'@", "'"+user+"'@",
		"'change-me'", "'"+pass+"'").Replace(string(m[1]))
	admin, err := sql.Open("mysql", adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, stmt := range strings.Split(sqlText, ";") {
		stmt = strings.TrimSpace(stmt)
		if stmt == "" || strings.HasPrefix(stmt, "CREATE DATABASE") {
			continue // the test's database exists already
		}
		if _, err := admin.ExecContext(t.Context(), stmt); err != nil {
			t.Fatalf("the guide's statement %q: %v (the test DSN's user needs GRANT OPTION; scripts/test-services.sh gives it)", stmt, err)
		}
	}
	t.Cleanup(func() {
		if a, err := sql.Open("mysql", adminDSN); err == nil {
			_, _ = a.Exec("DROP USER IF EXISTS '" + user + "'@'%'")
			_ = a.Close()
		}
	})
	cfg.User, cfg.Passwd = user, pass
	return cfg.FormatDSN()
}

// oidcSignIn signs account in at the issuer the way the web app does —
// discovery, the authorization endpoint with PKCE S256, the login page's
// form, the code sent back to redirectURI, the token endpoint — and
// returns the ID token the app sends as its bearer token.
func oidcSignIn(t *testing.T, issuer, clientID, redirectURI, account string) string {
	t.Helper()
	var disc struct {
		AuthorizationEndpoint string `json:"authorization_endpoint"`
		TokenEndpoint         string `json:"token_endpoint"`
	}
	getJSON(t, strings.TrimRight(issuer, "/")+"/.well-known/openid-configuration", nil, &disc)
	var vb [32]byte
	_, _ = rand.Read(vb[:])
	verifier := base64.RawURLEncoding.EncodeToString(vb[:])
	sum := sha256.Sum256([]byte(verifier))
	authz := url.Values{
		"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirectURI}, "state": {"guide"},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
		"nonce": {"n-guide"}, "scope": {"openid email profile"},
	}
	resp, err := http.Get(disc.AuthorizationEndpoint + "?" + authz.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), account) {
		t.Fatalf("login page = %d, offers %s? %v", resp.StatusCode, account, strings.Contains(string(page), account))
	}
	// The person presses their name: the form posts the request back with
	// the chosen subject.
	form := url.Values{}
	for k, v := range authz {
		form[k] = v
	}
	form.Set("sub", account)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.PostForm(disc.AuthorizationEndpoint, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc.String(), redirectURI) || loc.Query().Get("state") != "guide" {
		t.Fatalf("authorize answered %d Location %q, want a redirect to %s with the code", resp.StatusCode, resp.Header.Get("Location"), redirectURI)
	}
	resp, err = http.PostForm(disc.TokenEndpoint, url.Values{
		"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {redirectURI},
		"client_id": {clientID}, "code_verifier": {verifier},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		IDToken string `json:"id_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != http.StatusOK || tok.IDToken == "" {
		t.Fatalf("token endpoint = %d, id_token %q, err %v", resp.StatusCode, tok.IDToken, err)
	}
	return tok.IDToken
}

func doStatus(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
