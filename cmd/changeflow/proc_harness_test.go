package main

// The process-level harness: the real changeflow binary, built once per
// test run, run as `changeflow sim` and `changeflow serve` OS processes
// against one MariaDB database per test. A process can be killed with
// SIGKILL (no deferred code, no lease release, no graceful shutdown), which
// an in-process instance cannot show.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"changeflow/internal/filecheck"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// binary is the changeflow binary built for this test run (buildOnce);
// binaryDir is removed by TestMain. Test-binary state, shared by the
// process tests like a fixture.
var (
	buildOnce sync.Once
	binary    string
	binaryDir string
	buildErr  error
)

// procClient is the process tests' HTTP client. Its timeout turns an
// instance that accepts a connection and never answers (stuck, or stopped
// mid-kill) into a failure naming the call, instead of a test binary that
// hangs until go test's -timeout kills it with every goroutine's stack.
// A request the tests leave unanswered on purpose (a kill inside it)
// ends with the kill. Event streams use a client of their own.
var procClient = &http.Client{Timeout: 30 * time.Second}

func TestMain(m *testing.M) {
	code := m.Run()
	if binaryDir != "" {
		_ = os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// changeflowBinary builds ./cmd/changeflow once (without -race: the child
// processes are the product as shipped; the race detector watches the
// test binary) and returns its path.
func changeflowBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binaryDir, buildErr = os.MkdirTemp("", "changeflow-bin-")
		if buildErr != nil {
			return
		}
		binary = filepath.Join(binaryDir, "changeflow")
		cmd := osexec.Command("go", "build", "-o", binary, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// mariaDB returns the DSN of a fresh MariaDB database for this test, and a
// store on it for the test's own reads. Without CHANGEFLOW_TEST_MYSQL_DSN
// the test skips loudly (fails under CHANGEFLOW_TEST_REQUIRE_SERVICES=1):
// several processes on one database is what these tests are about, and
// SQLite is single-host by design.
func mariaDB(t *testing.T) (string, *store.Store) {
	t.Helper()
	dsn := storetest.NewMigratedDatabase(t, store.DriverMySQL)
	st := storetest.OpenDSN(t, store.DriverMySQL, dsn)
	if _, err := st.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return dsn, st
}

// childEnv is the environment of a child process: ours without any
// CHANGEFLOW_ variable (the harness's own would be reported as unknown
// configuration), plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHANGEFLOW_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// proc is one child process with its output in a file.
type proc struct {
	name string
	cmd  *osexec.Cmd
	log  string
	done chan struct{}
}

func startProc(t *testing.T, dir, name string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(changeflowBinary(t), args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- %s output (tail):\n%s", name, tail(p.output(), 4000))
		}
	})
	return p
}

// kill9 is SIGKILL: the process gets no chance to release anything.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 %s: %v", p.name, err)
	}
	<-p.done
}

// stop ends the process politely (SIGTERM), then by force.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// simProc is a `changeflow sim` process: the simulated world outlives the
// serve processes a test kills.
type simProc struct {
	*proc
	base    string
	dataDir string
}

// startSim runs `changeflow sim` with callbacks to the given serve bases
// (round robin, skipping dead ones) and waits for its address line.
func startSim(t *testing.T, dir string, callbackURLs []string) *simProc {
	t.Helper()
	dataDir := filepath.Join(dir, "sim-data")
	p := startProc(t, dir, "sim", childEnv(), "sim", "--listen", "127.0.0.1:0",
		"--callback-url", strings.Join(callbackURLs, ","), "--data-dir", dataDir,
		"--callback-token", procApprovalToken, "--deploy-callback-token", procDeployToken, "--webhook-token", procWebhookToken,
		"--gitlab-token", "committer="+procCommitterToken, "--gitlab-token", "approver1="+procApprover1Token,
		"--gitlab-token", "approver2="+procApprover2Token,
		// Unprotected, so a test can push to changeflow/ branches as a
		// person would where GitLab is not set up; a test of the
		// protection protects them through GitLab's API.
		"--protect-changeflow=false")
	re := regexp.MustCompile(`simulators on (http://\S+)`)
	waitFor(t, 30*time.Second, "the simulators' address line", func() bool {
		if p.exited() {
			t.Fatalf("sim exited:\n%s", p.output())
		}
		return re.MatchString(p.output())
	})
	return &simProc{proc: p, base: re.FindStringSubmatch(p.output())[1], dataDir: dataDir}
}

// do calls the simulators: path after the base, body JSON-encoded unless
// nil; out, when given, receives the decoded answer. It returns the status.
func (s *simProc) do(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	return s.doAs(t, "local-maintainer-token", method, path, body, out)
}

// doAs is do with the GitLab token of another simulated account.
func (s *simProc) doAs(t *testing.T, token, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("PRIVATE-TOKEN", token)
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatalf("sim %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("sim %s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

// must is do that fails the test on a status ≥ 300.
func (s *simProc) must(t *testing.T, method, path string, body, out any) {
	t.Helper()
	if code := s.do(t, method, path, body, out); code >= 300 {
		t.Fatalf("sim %s %s = %d", method, path, code)
	}
}

// holdGitLab makes GitLab apply the next matching call and hold its answer
// for a minute (a "delay after" fault): the caller is stuck between the
// remote write and its own.
func (s *simProc) holdGitLab(t *testing.T, method, path string) {
	t.Helper()
	s.must(t, http.MethodPost, "/gitlab/_control/faults",
		map[string]any{"method": method, "path": path, "kind": "delay", "delay": "60s", "phase": "after"}, nil)
}

func (s *simProc) clearGitLabFaults(t *testing.T) {
	t.Helper()
	s.must(t, http.MethodDelete, "/gitlab/_control/faults", nil, nil)
}

// gitLabFaultsArmed is how many GitLab fault rules are still armed: a
// rule of count 1 is gone once a call used it.
func (s *simProc) gitLabFaultsArmed(t *testing.T) int {
	t.Helper()
	var faults []json.RawMessage
	s.must(t, http.MethodGet, "/gitlab/_control/faults", nil, &faults)
	return len(faults)
}

// simMR is what the tests read of an MR.
type simMR struct {
	IID          int64  `json:"iid"`
	State        string `json:"state"`
	SourceBranch string `json:"source_branch"`
	Description  string `json:"description"`
}

// mrs lists every MR of project 1, any state.
func (s *simProc) mrs(t *testing.T) []simMR {
	t.Helper()
	var out []simMR
	s.must(t, http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests?state=all&per_page=100", nil, &out)
	return out
}

// allMRs lists every MR of project 1, page by page.
func (s *simProc) allMRs(t *testing.T) []simMR {
	t.Helper()
	var all []simMR
	for page := 1; ; page++ {
		var out []simMR
		s.must(t, http.MethodGet, fmt.Sprintf("/gitlab/api/v4/projects/1/merge_requests?state=all&per_page=100&page=%d", page), nil, &out)
		all = append(all, out...)
		if len(out) < 100 {
			return all
		}
	}
}

// branchHead is a branch's head sha ("" when the branch is missing).
func (s *simProc) branchHead(t *testing.T, branch string) string {
	t.Helper()
	var b struct {
		Commit struct {
			ID string `json:"id"`
		} `json:"commit"`
	}
	if s.do(t, http.MethodGet, "/gitlab/api/v4/projects/1/repository/branches/"+url.PathEscape(branch), nil, &b) != http.StatusOK {
		return ""
	}
	return b.Commit.ID
}

// parents lists a commit's parent shas.
func (s *simProc) parents(t *testing.T, sha string) []string {
	t.Helper()
	var c struct {
		ParentIDs []string `json:"parent_ids"`
	}
	s.must(t, http.MethodGet, "/gitlab/api/v4/projects/1/repository/commits/"+sha, nil, &c)
	return c.ParentIDs
}

// approvedBy lists who approved MR iid.
func (s *simProc) approvedBy(t *testing.T, iid int64) []string {
	t.Helper()
	var ap struct {
		ApprovedBy []struct {
			User struct {
				Username string `json:"username"`
			} `json:"user"`
		} `json:"approved_by"`
	}
	s.must(t, http.MethodGet, fmt.Sprintf("/gitlab/api/v4/projects/1/merge_requests/%d/approvals", iid), nil, &ap)
	var out []string
	for _, a := range ap.ApprovedBy {
		out = append(out, a.User.Username)
	}
	return out
}

// approvals lists the approval system's forms for operationID.
func (s *simProc) approvals(t *testing.T, operationID string) []map[string]any {
	t.Helper()
	var out struct {
		Items []map[string]any `json:"items"`
	}
	s.must(t, http.MethodGet, "/approval/v1/approvals?operationId="+operationID, nil, &out)
	return out.Items
}

// approve decides operationID's form APPROVED through the control API.
func (s *simProc) approve(t *testing.T, operationID string) {
	t.Helper()
	items := s.approvals(t, operationID)
	if len(items) != 1 {
		t.Fatalf("%s has %d approval forms, want 1", operationID, len(items))
	}
	s.must(t, http.MethodPost, fmt.Sprintf("/approval/_control/approvals/%v/approve", items[0]["approvalId"]), nil, nil)
}

// fileOnMain is the binding file of target on main ("" when absent).
func (s *simProc) fileOnMain(t *testing.T, target string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet,
		s.base+"/gitlab/api/v4/projects/1/repository/files/bindings%2F"+target+".yaml/raw?ref=main", nil)
	req.Header.Set("PRIVATE-TOKEN", "local-maintainer-token")
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return ""
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("file of %s on main = %d %s", target, resp.StatusCode, b)
	}
	return string(b)
}

// filesExact is the end-to-end check every process test ends with: each
// of targets' binding files on main holds exactly one entry per VALIDATED
// request of ops (subject, operationId, expiry to the second) and none for
// any other request (filecheck, read against the database st).
func (s *simProc) filesExact(t *testing.T, st *store.Store, targets, ops []string) {
	t.Helper()
	for _, target := range targets {
		if err := filecheck.Check(context.WithoutCancel(t.Context()), st, target, []byte(s.fileOnMain(t, target)), ops); err != nil {
			t.Fatal(err)
		}
	}
}

// commitsOnMain counts the non-merge commits reachable from main whose
// message carries operationID's trailer, read from the simulator's real
// Git repository: a step that ran twice and committed twice shows as 2.
func (s *simProc) commitsOnMain(t *testing.T, operationID string) int {
	t.Helper()
	repos, _ := filepath.Glob(filepath.Join(s.dataDir, "world-*", "config", "bindings.git"))
	if len(repos) != 1 {
		t.Fatalf("want one config/bindings repository under %s, found %v", s.dataDir, repos)
	}
	out, err := osexec.Command("git", "--git-dir", repos[0], "log", "main", "--no-merges", "--format=%B%x00").Output()
	if err != nil {
		t.Fatalf("git log: %v", err)
	}
	n := 0
	for _, msg := range strings.Split(string(out), "\x00") {
		for _, line := range strings.Split(msg, "\n") {
			if strings.TrimSpace(line) == "Changeflow-Operation: "+operationID {
				n++
			}
		}
	}
	return n
}

// serveProc is a `changeflow serve` process.
type serveProc struct {
	*proc
	id   string
	base string
}

// startServeProc runs `changeflow serve --config file` as instance id on
// port and waits until /healthz answers; env adds CHANGEFLOW_ variables
// for this instance only.
func startServeProc(t *testing.T, dir, file, id string, port int, env ...string) *serveProc {
	t.Helper()
	p := startProc(t, dir, id, childEnv(append([]string{"CHANGEFLOW_INSTANCE_ID=" + id,
		fmt.Sprintf("CHANGEFLOW_SERVER_LISTEN=127.0.0.1:%d", port)}, env...)...), "serve", "--config", file)
	s := &serveProc{proc: p, id: id, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	waitFor(t, 30*time.Second, id+" healthy", func() bool {
		if p.exited() {
			t.Fatalf("%s exited:\n%s", id, tail(p.output(), 4000))
		}
		// Only once it says it serves on this address: a /healthz
		// answered before that is some other server's on the same port.
		if !strings.Contains(p.output(), "serving on "+s.base) {
			return false
		}
		resp, err := procClient.Get(s.base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// submit asks for target as user (the auth proxy's header, trusted from
// loopback) and wants 202.
func (s *serveProc) submit(t *testing.T, user, operationID, target string) {
	t.Helper()
	if code, body := s.submitOnce(user, operationID, target); code != http.StatusAccepted {
		t.Fatalf("submit %s on %s = %d %s", operationID, s.id, code, body)
	}
}

func (s *serveProc) submitOnce(user, operationID, target string) (int, string) {
	body := fmt.Sprintf(`{"operationId":%q,"targetKey":%q,"reason":"process test","days":7}`, operationID, target)
	req, _ := http.NewRequest(http.MethodPost, s.base+"/api/requests", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Auth-Request-User", user)
	resp, err := procClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// statusCode is the HTTP status of GET /api/requests/{id} as user (0 when
// the instance did not answer).
func (s *serveProc) statusCode(user, operationID string) int {
	req, _ := http.NewRequest(http.MethodGet, s.base+"/api/requests/"+operationID, nil)
	req.Header.Set("X-Auth-Request-User", user)
	resp, err := procClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// requestStatus is GET /api/requests/{id} as user: the API's status.
func (s *serveProc) requestStatus(t *testing.T, user, operationID string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.base+"/api/requests/"+operationID, nil)
	req.Header.Set("X-Auth-Request-User", user)
	resp, err := procClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("GET /api/requests/%s: %v", operationID, err)
	}
	return env.Data.Status
}

// validatedMetric sums changeflow_requests_validated_total over every
// target on this instance's /metrics.
func (s *serveProc) validatedMetric(t *testing.T) int {
	t.Helper()
	return s.metricSumWhere(t, func(l string) bool { return strings.HasPrefix(l, "changeflow_requests_validated_total{") })
}

// metricSumWhere sums the values of the series on this instance's
// /metrics whose line match picks.
func (s *serveProc) metricSumWhere(t *testing.T, match func(line string) bool) int {
	t.Helper()
	resp, err := procClient.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	total := 0
	for _, l := range strings.Split(string(b), "\n") {
		if !match(l) {
			continue
		}
		var v float64
		if _, err := fmt.Sscanf(l[strings.LastIndexByte(l, ' ')+1:], "%g", &v); err != nil {
			t.Fatalf("metric line %q: %v", l, err)
		}
		total += int(v)
	}
	return total
}

// waitFor polls cond until it holds or the deadline passes (state, never a
// fixed sleep).
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitForOrTell is waitFor whose timeout also says what tell finds (read
// at the timeout, from the database the test is about to drop).
func waitForOrTell(t *testing.T, timeout time.Duration, what string, tell func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s:%s", timeout, what, tell())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procConfig is the serve configuration of the process tests: the
// simulated world at simURL, MariaDB at dsn, short leases, polls and
// rounds so the tests run in seconds; extra is appended (YAML).
func procConfig(dsn, simURL, extra string) string {
	return procConfigOn(store.DriverMySQL, dsn, simURL, extra)
}

// procConfigOn is procConfig on the database driver (mysql or sqlite).
func procConfigOn(driver, dsn, simURL, extra string) string {
	return fmt.Sprintf(`database:
  driver: %s
  dsn: %q
  maxOpenConns: 20
log:
  level: warn
gitlab:
  baseURL: %[3]s/gitlab/
  projects: [1]
  tokens:
    committer: %[5]s
    approver1: %[6]s
    approver2: %[7]s
approval:
  baseURL: %[3]s/approval/
  backoffMs: 20
permission:
  baseURL: %[3]s/permission/
callbacks:
  tokens:
    approval: %[8]s
    deploy: %[9]s
    gitlab: %[10]s
identity:
  trustedProxies: [127.0.0.1/32]
polling:
  pipeline: {shortInterval: 50ms, shortAttempts: 40, longInterval: 200ms, timeout: 60s}
  rebase: {shortInterval: 50ms, shortAttempts: 40, longInterval: 200ms, timeout: 60s}
%[4]s`, driver, dsn, simURL, extra, procCommitterToken, procApprover1Token, procApprover2Token,
		procApprovalToken, procDeployToken, procWebhookToken)
}

// The process tests' secrets, which startSim gives the simulators: serve
// outside --local refuses the simulators' well-known tokens, short ones
// and shared ones, so these are long and distinct.
const (
	procCommitterToken = "proc-test-committer-5f0c2b9e7a1d4c38"
	procApprover1Token = "proc-test-approver1-9d3e6a0b4c7f2e15"
	procApprover2Token = "proc-test-approver2-2a8c5e1f9b3d6a70"
	procApprovalToken  = "proc-test-approval-callback-7e4b1c9a0d2f5e83"
	procDeployToken    = "proc-test-deploy-callback-3c6f9a2e5b8d1f47"
	procWebhookToken   = "proc-test-gitlab-webhook-8b1d4f7a0c3e6b92"
	// procAuditSigningKey is audit.signingKey: the base64 of the 32
	// bytes "proc-test-audit-signing-key-32b!".
	procAuditSigningKey = "cHJvYy10ZXN0LWF1ZGl0LXNpZ25pbmcta2V5LTMyYiE="
)

// countSQL runs a COUNT query on the test's store. A database that is
// failing over is waited for (up to 30 s), as the instances wait for it:
// the Galera tests read through the same proxy whose node they kill, and
// the proxy cuts the test's own connections twice (the node lost, the
// node back) — a read that fails then says nothing about changeflow.
func countSQL(t *testing.T, st *store.Store, q string, args ...any) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := st.DB().QueryRowContext(context.WithoutCancel(t.Context()), q, args...).Scan(&n)
		if err == nil {
			return n
		}
		if !failingOver(err) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", q, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// failingOver reports whether err is the database failing over rather
// than an answer: the connection lost or refused, a Galera node not ready
// (1047), or a read that waited in wsrep_sync_wait past its time (1205).
func failingOver(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1047 || me.Number == 1205
	}
	return connectionLost(err)
}
