package storetest_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestEachRunsEveryDriverOnAMigratedDatabase(t *testing.T) {
	var ran []string
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ran = append(ran, s.Dialect().Name())
		_, _, pending, err := s.MigrationStatus(t.Context())
		require.NoError(t, err)
		require.False(t, pending)
	})
	// Under -run filters only some subtests run; whatever ran is one of ours.
	for _, d := range ran {
		require.Contains(t, storetest.Drivers(), d)
	}
}

func TestDatabasesAreIsolated(t *testing.T) {
	for _, driver := range storetest.Drivers() {
		t.Run(driver, func(t *testing.T) {
			a := storetest.Open(t, driver)
			b := storetest.Open(t, driver)
			_, err := a.DB().ExecContext(t.Context(), "INSERT INTO gitlab_event (event_uuid, kind) VALUES ('u', 'k')")
			require.NoError(t, err)
			var n int
			require.NoError(t, b.DB().QueryRowContext(t.Context(), "SELECT COUNT(*) FROM gitlab_event").Scan(&n))
			require.Zero(t, n)
		})
	}
}

// TestRequireServicesFailsInsteadOfSkipping runs this test binary again
// without a MariaDB DSN and with CHANGEFLOW_TEST_REQUIRE_SERVICES=1: the
// MariaDB subtest must fail, not skip.
func TestRequireServicesFailsInsteadOfSkipping(t *testing.T) {
	if os.Getenv("STORETEST_CHILD") == "1" {
		storetest.Each(t, func(*testing.T, *store.Store) {})
		return
	}
	for _, tt := range []struct {
		name    string
		require string
		wantErr bool
	}{
		{"required services fail", "1", true},
		{"optional services skip", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestRequireServicesFailsInsteadOfSkipping$", "-test.v")
			cmd.Env = append(os.Environ(),
				"STORETEST_CHILD=1",
				storetest.EnvMySQLDSN+"=",
				storetest.EnvRequireServices+"="+tt.require)
			out, err := cmd.CombinedOutput()
			if tt.wantErr {
				require.Error(t, err, "%s", out)
				require.Contains(t, string(out), "--- FAIL: TestRequireServicesFailsInsteadOfSkipping/mysql")
			} else {
				require.NoError(t, err, "%s", out)
				require.Contains(t, string(out), "--- SKIP: TestRequireServicesFailsInsteadOfSkipping/mysql")
			}
		})
	}
}

func TestNamedPathsAreLegal(t *testing.T) {
	for name, path := range map[string][]domain.StepStatus{"legacy": storetest.LegacyPath, "approve-first": storetest.ApproveFirstPath} {
		require.NoError(t, domain.CheckStep(domain.StepNone, path[0]), "%s starts at a first step", name)
		for i := 1; i < len(path); i++ {
			require.NoError(t, domain.CheckStep(path[i-1], path[i]), "%s hop %d", name, i)
		}
	}
}

func TestWalkToMovesHopByHop(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		_, err := s.OperationCreate(t.Context(), store.OperationCreateParams{
			OperationID: "op-walk", Subject: "alice", TargetKey: "t", ProjectID: 1, Flow: "LEGACY",
			Step: int(domain.StepCreateStarted), Reason: "r", Days: 1, RequestHash: "h", Actor: "test",
		})
		require.NoError(t, err)
		op := storetest.WalkTo(t, s, "op-walk", storetest.LegacyPath, domain.StepHandleApproved)
		require.Equal(t, int(domain.StepHandleApproved), op.Step)
		steps, err := s.OperationStepList(t.Context(), "op-walk")
		require.NoError(t, err)
		require.Len(t, steps, 8, "the first step and one row per hop")
		require.Equal(t, int64(len(steps)), op.Version)
		for i := 1; i < len(steps); i++ {
			require.Equal(t, steps[i-1].ToStep, steps[i].FromStep)
			require.Equal(t, int(storetest.LegacyPath[i]), steps[i].ToStep)
		}
	})
}

// journeyPackages are the packages whose tests may run journeys
// (OnSQLite). make test's journeys run takes every package that calls
// OnSQLite and runs all its top-level tests with -run '/^sqlite-journey$':
// the journeys whole, every other test with none of its subtests. In a
// package of journeys that costs little; in any other it runs the
// package twice, and a test that checks something after its subtests
// (TestPanicsNeverLeak did, when an httpapi test used OnSQLite) fails
// there. A journey belongs in one of these; adding a package here is a
// decision to make with the Makefile's JOURNEY_PKGS in mind.
var journeyPackages = []string{"internal/engine", "internal/workflow"}

func TestJourneysStayInTheirPackages(t *testing.T) {
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	call := []byte("storetest." + "OnSQLite(")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b, call) {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		if !slices.Contains(journeyPackages, filepath.ToSlash(rel)) {
			t.Errorf("%s calls OnSQLite outside the journey packages %v: use storetest.Open or Each there (see journeyPackages)", filepath.ToSlash(filepath.Join(rel, d.Name())), journeyPackages)
		}
		return nil
	})
	require.NoError(t, err)
}
