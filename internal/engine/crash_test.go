package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/engine/enginetest"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// Environment of a worker process of TestKill9MidStepResumesOnAnotherProcess.
const (
	envCrashDSN   = "CHANGEFLOW_CRASH_WORKER_DSN"   // the shared database; set means "be a worker"
	envCrashDir   = "CHANGEFLOW_CRASH_WORKER_DIR"   // where the "remote system" and the tallies live
	envCrashBlock = "CHANGEFLOW_CRASH_WORKER_BLOCK" // "1": block inside the step after the remote write
)

// crashOps is how many requests are in flight when the first process dies.
const crashOps = 5

// TestKill9MidStepResumesOnAnotherProcess re-executes the test binary as a
// worker process on MariaDB, lets it claim every operation and do the
// step's remote write, then kill -9s it while it blocks inside the step.
// A second process resumes each operation once the dead leases expire.
// Each operation completes exactly once, and each remote object exists
// exactly once because the step reads the remote state before it writes.
func TestKill9MidStepResumesOnAnotherProcess(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewMigratedDatabase(t, store.DriverMySQL)
	s := storetest.OpenDSN(t, store.DriverMySQL, dsn)
	_, err := s.Migrate(t.Context())
	require.NoError(t, err)
	for i := range crashOps {
		submit(t, s, fmt.Sprintf("op-%d", i), "remote_write")
	}
	dir := t.TempDir()

	first := startCrashWorker(t, dsn, dir, true)
	enginetest.UntilLines(t, filepath.Join(dir, "blocked"), crashOps, "the first worker blocks inside every step")
	require.NoError(t, first.Process.Kill()) // SIGKILL: no deferred code, no release
	_ = first.Wait()

	second := startCrashWorker(t, dsn, dir, false)
	for i := range crashOps {
		o := waitOp(t, s, fmt.Sprintf("op-%d", i), finished)
		require.Equal(t, domain.StepCreateMRCreated.String(), domain.StepStatus(o.Step).String())
	}
	// The OnCommit hook runs after the commit the loop above observed:
	// killing the worker as soon as the rows say "finished" could cut it
	// off, so wait for its side effects before the kill.
	enginetest.UntilLines(t, filepath.Join(dir, "committed"), crashOps, "every after-commit side effect ran")
	require.NoError(t, second.Process.Kill())
	_ = second.Wait()

	for i := range crashOps {
		op := fmt.Sprintf("op-%d", i)
		remote, err := os.ReadFile(filepath.Join(dir, "remote-"+op))
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(first.Process.Pid), strings.TrimSpace(string(remote)),
			"%s: one remote object, written by the first process", op)
		steps, err := s.OperationStepList(t.Context(), op)
		require.NoError(t, err)
		done := 0
		for _, st := range steps {
			if st.ToStep == int(domain.StepCreateMRCreated) {
				done++
			}
		}
		require.Equal(t, 1, done, "%s completed once", op)
	}
	require.Equal(t, crashOps, enginetest.CountLines(t, filepath.Join(dir, "committed")), "one after-commit side effect per operation")
	require.Equal(t, 2*crashOps, enginetest.CountLines(t, filepath.Join(dir, "runs")), "every step ran twice: killed, then resumed")
}

// startCrashWorker re-executes the test binary as a worker.
func startCrashWorker(t *testing.T, dsn, dir string, block bool) *osexec.Cmd {
	t.Helper()
	cmd := osexec.Command(os.Args[0], "-test.run=^TestCrashWorkerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDSN+"="+dsn, envCrashDir+"="+dir, envCrashBlock+"="+map[bool]string{true: "1", false: "0"}[block])
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// TestCrashWorkerProcess is the worker: an engine whose remote_write step
// reads the "remote system" (a file per operation) before writing it.
func TestCrashWorkerProcess(t *testing.T) {
	dsn := os.Getenv(envCrashDSN)
	if dsn == "" {
		t.Skip("worker mode of TestKill9MidStepResumesOnAnotherProcess")
	}
	dir, block := os.Getenv(envCrashDir), os.Getenv(envCrashBlock) == "1"
	ctx := context.Background()
	s, err := store.Open(ctx, store.DriverMySQL, dsn)
	require.NoError(t, err)
	defer s.Close()
	pid := strconv.Itoa(os.Getpid())
	step := engine.StepFunc{Decl: createDecl, Fn: func(ctx context.Context, w engine.Work) (engine.Outcome, error) {
		op := w.Operation.OperationID
		enginetest.AppendLine(filepath.Join(dir, "runs"), op)
		// Read before write: the remote object may exist from a run that
		// died after writing it.
		f, err := os.OpenFile(filepath.Join(dir, "remote-"+op), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		switch {
		case errors.Is(err, os.ErrExist):
		case err != nil:
			return engine.Outcome{}, err
		default:
			_, _ = f.WriteString(pid + "\n")
			_ = f.Close()
		}
		if block {
			enginetest.AppendLine(filepath.Join(dir, "blocked"), op)
			<-ctx.Done() // killed long before the lease-bounded deadline
			return engine.Outcome{}, ctx.Err()
		}
		return engine.Done("", engine.Transition{Step: domain.StepCreateMRCreated}), nil
	}}
	// The first worker is killed within milliseconds of blocking, long
	// before its steps' deadline (0.9 × lease); the survivor then waits at
	// most one lease for the dead claims to expire.
	lease := 3 * time.Second
	e, err := engine.New(engine.Options{Store: s, Owner: "pid-" + pid, Workers: crashOps, QueueSize: 1,
		Lease: lease, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	e.Register("remote_write", step)
	e.OnCommit(func(_ context.Context, c engine.Committed) {
		enginetest.AppendLine(filepath.Join(dir, "committed"), c.OperationID)
	})
	require.NoError(t, e.Start(ctx))
	<-time.After(time.Minute) // until killed
}
