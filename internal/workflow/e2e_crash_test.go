package workflow_test

import (
	"context"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/engine/enginetest"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/single"
	"changeflow/internal/workflow/withdraw"
)

// Environment of a worker process of TestKill9AtEachBusinessStep.
const (
	envStepCrashDSN = "CHANGEFLOW_STEPCRASH_DSN" // set means "be a worker"
	envStepCrashSim = "CHANGEFLOW_STEPCRASH_SIM" // the simulators' base URL
	envStepCrashDir = "CHANGEFLOW_STEPCRASH_DIR" // where the success tally lives
)

// stepCrashLease is the workers' lease: a killed worker's step resumes on
// the next worker once it expired.
const stepCrashLease = 3 * time.Second

// TestKill9AtEachBusinessStep runs the business steps in worker processes
// (the test binary re-executed) against MariaDB and the simulators over
// HTTP, and kill -9s a worker inside each step right after its remote
// write took effect — GitLab holds the answer (a "delay after" fault), so
// the worker is stuck between the remote write and its local write: in
// create_mr after the MR was opened, in approve after the first bot's
// approval, in merge after the merge. The next worker resumes each step
// once the lease expired and, reading remote state first, finishes the
// request: VALIDATED, with one MR, one approval per bot, one approval
// request and one success side effect.
func TestKill9AtEachBusinessStep(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewMigratedDatabase(t, store.DriverMySQL)
	st := storetest.OpenDSN(t, store.DriverMySQL, dsn)
	_, err := st.Migrate(t.Context())
	require.NoError(t, err)
	dir := t.TempDir()
	tally := filepath.Join(dir, "validated")
	w := newWorld(t, st, func(s *worldSetup) {
		s.noEngine = true
		s.onValidated = func(_ context.Context, f store.Flip) { enginetest.AppendLine(tally, f.OperationID) }
	})
	hold := func(method, path string) {
		code := w.simJSON(http.MethodPost, "/gitlab/_control/faults",
			map[string]any{"method": method, "path": path, "kind": "delay", "delay": "60s", "phase": "after"}, nil)
		require.Less(t, code, 300)
	}
	const op = "op-crash"
	var iid string

	// 1. create_mr: the MR is opened, the answer held, the worker killed.
	hold("POST", "/projects/*/merge_requests")
	worker := startStepWorker(t, dsn, w.simTS.URL, dir)
	w.submit(op, "zoe", tSingle, false)
	require.Eventually(t, func() bool { return len(w.mrsOf(op)) == 1 }, 20*time.Second, 10*time.Millisecond)
	killWorker(t, worker)

	// 2. approve: the first bot's approval applied, answer held, killed.
	w.simJSON(http.MethodDelete, "/gitlab/_control/faults", nil, nil)
	hold("POST", "/projects/*/merge_requests/*/approve")
	worker = startStepWorker(t, dsn, w.simTS.URL, dir)
	o, _ := w.until(op, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
	iid = strconv.FormatInt(o.MRIID, 10)
	w.decide(op, "approve")
	require.Eventually(t, func() bool { return len(approvedBy(w, iid)) == 1 }, 20*time.Second, 10*time.Millisecond)
	killWorker(t, worker)

	// 3. merge: merged, answer held, killed.
	w.simJSON(http.MethodDelete, "/gitlab/_control/faults", nil, nil)
	hold("PUT", "/projects/*/merge_requests/*/merge")
	worker = startStepWorker(t, dsn, w.simTS.URL, dir)
	require.Eventually(t, func() bool { return w.mrsOf(op)[0]["state"] == "merged" }, 20*time.Second, 10*time.Millisecond)
	killWorker(t, worker)

	// 4. A last worker finishes from where the dead one stopped.
	w.simJSON(http.MethodDelete, "/gitlab/_control/faults", nil, nil)
	worker = startStepWorker(t, dsn, w.simTS.URL, dir)
	w.until(op, "validated", at(domain.StepCalledBack, domain.BindingValidated))
	// The success side effect runs after the flip's commit (I9), in
	// whichever process flipped: await it before killing the worker.
	enginetest.UntilLines(t, tally, 1, "the success side effect ran")
	killWorker(t, worker)

	require.Len(t, w.mrsOf(op), 1, "one MR")
	require.Len(t, w.approvalsOf(op), 1, "one approval request")
	require.ElementsMatch(t, []string{"approver-1", "approver-2"}, approvedBy(w, iid), "one approval per bot")
	require.Equal(t, 1, enginetest.CountLines(t, tally), "one success side effect")
}

// approvedBy lists the usernames that approved MR iid.
func approvedBy(w *world, iid string) []string {
	var ap struct {
		ApprovedBy []struct {
			User struct {
				Username string `json:"username"`
			} `json:"user"`
		} `json:"approved_by"`
	}
	w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests/"+iid+"/approvals", nil, &ap)
	var out []string
	for _, a := range ap.ApprovedBy {
		out = append(out, a.User.Username)
	}
	return out
}

// startStepWorker re-executes the test binary as a worker.
func startStepWorker(t *testing.T, dsn, simURL, dir string) *osexec.Cmd {
	t.Helper()
	cmd := osexec.Command(os.Args[0], "-test.run=^TestStepCrashWorkerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envStepCrashDSN+"="+dsn, envStepCrashSim+"="+simURL, envStepCrashDir+"="+dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// killWorker is kill -9: no deferred code, no lease release.
func killWorker(t *testing.T, cmd *osexec.Cmd) {
	t.Helper()
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
}

// TestStepCrashWorkerProcess is the worker: the business steps on an
// engine, the simulators' configuration, the success tally in a file.
func TestStepCrashWorkerProcess(t *testing.T) {
	dsn := os.Getenv(envStepCrashDSN)
	if dsn == "" {
		t.Skip("worker mode of TestKill9AtEachBusinessStep")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, store.DriverMySQL, dsn)
	require.NoError(t, err)
	defer st.Close()
	mgr, err := config.Load(ctx, config.Options{Overlay: e2eOverlay(os.Getenv(envStepCrashSim))})
	require.NoError(t, err)
	tally := filepath.Join(os.Getenv(envStepCrashDir), "validated")
	deps := e2eDeps(st, mgr.Current, http.DefaultTransport, func(_ context.Context, f store.Flip) { enginetest.AppendLine(tally, f.OperationID) })
	e, err := engine.New(engine.Options{Store: st, Owner: "pid-" + strconv.Itoa(os.Getpid()), Workers: 2, QueueSize: 2,
		Lease: stepCrashLease, PollInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	single.Register(e, single.Steps{Env: deps.Env, Store: deps.Store})
	withdraw.Register(e, withdrawFlow(deps))
	require.NoError(t, e.Start(ctx))
	<-time.After(2 * time.Minute) // until killed
}
