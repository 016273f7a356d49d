package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/engine/enginetest"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestDueWorkRunsOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		c := newCounter()
		var mu sync.Mutex
		var commits []engine.Committed
		e := newEngine(t, s, "i1", engine.Options{}, map[string]engine.Step{"ok": okStep(c, "")})
		e.OnCommit(func(_ context.Context, cm engine.Committed) {
			mu.Lock()
			commits = append(commits, cm)
			mu.Unlock()
		})
		for i := range 20 {
			submit(t, s, fmt.Sprintf("op-%d", i), "ok")
		}
		require.NoError(t, e.Start(t.Context()))
		for i := range 20 {
			o := waitOp(t, s, fmt.Sprintf("op-%d", i), finished)
			require.Equal(t, int(domain.StepCreateMRCreated), o.Step)
		}
		e.Stop()
		for i := range 20 {
			require.Equal(t, 1, c.get(fmt.Sprintf("op-%d", i)))
		}
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, commits, 20)
		for _, cm := range commits {
			require.Nil(t, cm.Flip, "no binding moved, nothing to count")
			require.Equal(t, domain.StepCreateStarted, cm.FromStep)
		}
	})
}

// TestTwoEnginesRunEachOperationExactlyOnce races two engines (two store
// handles on one database, different owners) over 200 due operations.
func TestTwoEnginesRunEachOperationExactlyOnce(t *testing.T) {
	t.Parallel()
	storetest.EachDSN(t, func(t *testing.T, driver, dsn string) {
		a := storetest.OpenDSN(t, driver, dsn)
		_, err := a.Migrate(t.Context())
		require.NoError(t, err)
		b := storetest.OpenDSN(t, driver, dsn)
		const n = 200
		for i := range n {
			submit(t, a, fmt.Sprintf("op-%03d", i), "ok")
		}
		c := newCounter()
		var mu sync.Mutex
		ran := map[string]string{}
		engines := []*engine.Engine{}
		for i, s := range []*store.Store{a, b} {
			owner := fmt.Sprintf("instance-%d", i)
			// Warnings and errors (a completion the database refused, say)
			// go to the test's output, so a failure says why.
			logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			e := newEngine(t, s, owner, engine.Options{Workers: 8, QueueSize: 8, Logger: logger}, map[string]engine.Step{"ok": okStep(c, "")})
			e.OnCommit(func(_ context.Context, cm engine.Committed) {
				mu.Lock()
				defer mu.Unlock()
				if prev, dup := ran[cm.OperationID]; dup {
					t.Errorf("%s committed by %s and %s", cm.OperationID, prev, owner)
				}
				ran[cm.OperationID] = owner
			})
			engines = append(engines, e)
		}
		for _, e := range engines {
			require.NoError(t, e.Start(t.Context()))
		}
		for range n {
			select {
			case <-c.ch:
			case <-time.After(20 * time.Second):
				t.Fatal("not every operation ran")
			}
		}
		// Every step has run; its commit follows. The bound only guards a
		// hang: 10 s was outlasted at a load average of 30 on SQLite,
		// where 200 commits of two engines queue for one write lock.
		committed := func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(ran) == n
		}
		if !assert.Eventually(t, committed, 2*time.Minute, 10*time.Millisecond) {
			rows, err := a.DB().Query("SELECT operation_id, COALESCE(next_action, ''), COALESCE(lease_owner, ''), COALESCE(last_error, '') FROM operation WHERE next_action IS NOT NULL OR lease_owner IS NOT NULL")
			require.NoError(t, err)
			for rows.Next() {
				var id, next, owner, lastErr string
				require.NoError(t, rows.Scan(&id, &next, &owner, &lastErr))
				t.Logf("not committed: %s next %q lease %q last error %q", id, next, owner, lastErr)
			}
			require.NoError(t, rows.Close())
			t.FailNow()
		}
		for _, e := range engines {
			e.Stop()
		}
		per := map[string]int{}
		for i := range n {
			op := fmt.Sprintf("op-%03d", i)
			require.Equal(t, 1, c.get(op), "%s ran once", op)
			per[ran[op]]++
		}
		t.Logf("%s: %v", driver, per)
		var left int
		require.NoError(t, a.DB().QueryRow("SELECT COUNT(*) FROM operation WHERE next_action IS NOT NULL OR lease_owner IS NOT NULL").Scan(&left))
		require.Zero(t, left)
	})
}

func TestAnExpiredLeaseIsResumedByAnotherEngine(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		submit(t, s, "op-1", "ok")
		// The first owner claims and dies without completing.
		dead, err := s.WorkClaimDue(t.Context(), "dead", 200*time.Millisecond, 10)
		require.NoError(t, err)
		require.Len(t, dead, 1)
		c := newCounter()
		e := newEngine(t, s, "alive", engine.Options{}, map[string]engine.Step{"ok": okStep(c, "")})
		require.NoError(t, e.Start(t.Context()))
		o := waitOp(t, s, "op-1", finished)
		require.Equal(t, int(domain.StepCreateMRCreated), o.Step)
		require.Equal(t, 1, c.get("op-1"))
		_, err = s.WorkComplete(t.Context(), store.WorkCompleteParams{OperationID: "op-1", Lease: dead[0].Lease,
			Step: int(domain.StepCreateFailed)})
		require.ErrorIs(t, err, domain.ErrPreempted, "the dead owner's late outcome is refused")
	})
}

func TestSafetyNet(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, s *store.Store) {
		e := newEngine(t, s, "i1", engine.Options{MaxRetries: 3}, map[string]engine.Step{
			"err": errStep, "panic": panicStep, "specific": specificStep, "illegal": illegalStep,
			"flaky": flakyStep(newCounter(), 100), "recovers": flakyStep(newCounter(), 3),
		})
		for _, a := range []string{"err", "panic", "specific", "illegal", "flaky", "recovers"} {
			submit(t, s, "op-"+a, a)
		}
		require.NoError(t, e.Start(t.Context()))
		for _, tt := range []struct {
			action  string
			step    domain.StepStatus
			binding domain.BindingStatus
			errPart string
		}{
			{"err", domain.StepCreateFailed, domain.BindingCreateFailed, "gitlab said no"},
			{"panic", domain.StepCreateFailed, domain.BindingCreateFailed, "panicked: nil map"},
			{"specific", domain.StepCreatePipelineFailed, domain.BindingCreateFailed, "after the specific state"},
			{"illegal", domain.StepCreateFailed, domain.BindingCreateFailed, "illegal"},
			{"flaky", domain.StepCreateFailed, domain.BindingCreateFailed, "gave up after 4 attempts"},
			{"recovers", domain.StepCreateMRCreated, domain.BindingMRCreating, ""},
		} {
			t.Run(tt.action, func(t *testing.T) {
				op := "op-" + tt.action
				o := waitOp(t, s, op, func(o store.Operation) bool {
					return o.LeaseOwner == "" && (o.DueAt.IsZero() || o.NextAction == "")
				})
				require.Equal(t, tt.step.String(), domain.StepStatus(o.Step).String())
				b, err := s.BindingGetByOperation(t.Context(), op)
				require.NoError(t, err)
				require.Equal(t, tt.binding, b.Status)
				require.Contains(t, o.LastError, tt.errPart)
				if tt.binding == domain.BindingCreateFailed {
					require.Equal(t, tt.action, o.NextAction, "a failure remembers where it stopped")
					require.Equal(t, domain.HintKeepWaiting != domain.HintFor(domain.StepStatus(o.Step), b.Status),
						domain.IsDeterministicFailure(domain.StepStatus(o.Step)))
				}
			})
		}
	})
}

func TestAFullPoolPersistsTheFailureAtOnce(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		started, release := make(chan string, 1), make(chan struct{})
		e := newEngine(t, s, "i1", engine.Options{Workers: 1, QueueSize: 0, PollInterval: time.Hour},
			map[string]engine.Step{"block": blockStep(started, release), "ok": okStep(newCounter(), "")})
		submit(t, s, "op-busy", "block")
		require.NoError(t, e.Start(t.Context()))
		require.Equal(t, "op-busy", <-started)

		submit(t, s, "op-refused", "ok")
		ok, err := e.Submit(t.Context(), "op-refused")
		require.True(t, ok)
		require.ErrorIs(t, err, engine.ErrPoolFull)
		// Visible to a poller the moment Submit returns.
		o, err := s.OperationGet(t.Context(), "op-refused")
		require.NoError(t, err)
		require.Equal(t, domain.StepCreatePoolRejected.String(), domain.StepStatus(o.Step).String())
		require.Equal(t, "ok", o.NextAction)
		require.True(t, stopped(o))
		b, err := s.BindingGetByOperation(t.Context(), "op-refused")
		require.NoError(t, err)
		require.Equal(t, domain.BindingCreateFailed, b.Status)
		require.Equal(t, domain.HintKeepWaiting, domain.HintFor(domain.StepStatus(o.Step), b.Status))
		close(release)
		waitOp(t, s, "op-busy", finished)
	})
}

func TestPollingIsRescheduledShortThenLongThenTimesOut(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		tier := engine.PollTier{ShortInterval: time.Second, ShortAttempts: 2, LongInterval: 10 * time.Second, Timeout: 25 * time.Second}
		clock := enginetest.NewClock()
		c := newCounter()
		commits := make(chan engine.Committed, 16)
		e := newEngine(t, s, "i1", engine.Options{Clock: clock, PollInterval: time.Hour},
			map[string]engine.Step{"ok": okStep(newCounter(), "poll"), "poll": pollStep(tier, c)})
		e.OnCommit(func(_ context.Context, cm engine.Committed) { commits <- cm })
		submit(t, s, "op-1", "ok")
		require.NoError(t, e.Start(t.Context()))
		require.Equal(t, "ok", (<-commits).Action)

		for i, want := range []time.Duration{time.Second, time.Second, 10 * time.Second, 10 * time.Second, 10 * time.Second} {
			e.Wake()
			cm := <-commits
			require.Equal(t, engine.OutcomeWait, cm.Kind, "poll %d", i+1)
			o, err := s.OperationGet(t.Context(), "op-1")
			require.NoError(t, err)
			require.Equal(t, i+1, o.Attempts)
			require.Equal(t, domain.StepCreatePipelineRunning.String(), domain.StepStatus(o.Step).String())
			require.InDelta(t, want.Seconds(), o.DueAt.Sub(o.UpdatedAt).Seconds(), 0.1, "poll %d waits %v", i+1, want)
			// Advance both clocks: the engine's and the row's due time.
			clock.Advance(want)
			_, err = s.DB().Exec("UPDATE operation SET due_at = updated_at WHERE operation_id = 'op-1'")
			require.NoError(t, err)
		}
		e.Wake()
		cm := <-commits
		require.Equal(t, engine.OutcomeTimedOut, cm.Kind)
		o := waitOp(t, s, "op-1", stopped)
		require.Equal(t, domain.StepCreatePipelinePending.String(), domain.StepStatus(o.Step).String())
		b, err := s.BindingGetByOperation(t.Context(), "op-1")
		require.NoError(t, err)
		require.Equal(t, domain.BindingMRCreating, b.Status, "timed out is not failed: the binding stays")
		require.Equal(t, domain.HintKeepWaiting, domain.HintFor(domain.StepStatus(o.Step), b.Status))
		require.Equal(t, 6, c.get("op-1"))
	})
}

func TestNextPollTiers(t *testing.T) {
	tier := engine.PollTier{ShortInterval: time.Second, ShortAttempts: 2, LongInterval: 10 * time.Second, Timeout: 25 * time.Second}
	var got []string
	for attempt := 1; attempt <= 6; attempt++ {
		d, out := engine.NextPoll(tier, attempt)
		if out {
			got = append(got, "timeout")
			continue
		}
		got = append(got, d.String())
	}
	require.Equal(t, []string{"1s", "1s", "10s", "10s", "10s", "timeout"}, got)
}

func TestStartStopAreSafeAndLeakNothing(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, s *store.Store) {
		started, release := make(chan string, 1), make(chan struct{})
		defer close(release)
		e := newEngine(t, s, "i1", engine.Options{}, map[string]engine.Step{"block": blockStep(started, release)})
		never := newEngine(t, s, "i2", engine.Options{}, nil)
		never.Stop()
		never.Stop()

		before := runtime.NumGoroutine()
		submit(t, s, "op-1", "block")
		require.NoError(t, e.Start(t.Context()))
		require.NoError(t, e.Start(t.Context()), "a second Start does nothing")
		<-started
		e.Stop()
		e.Stop()
		require.NoError(t, e.Start(t.Context()), "Start after Stop does nothing")
		o := waitOp(t, s, "op-1", func(o store.Operation) bool { return o.LeaseOwner == "" })
		require.Equal(t, "block", o.NextAction, "a step cancelled by Stop is given back, not failed")
		require.Equal(t, int(domain.StepCreateStarted), o.Step)
		require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before }, 5*time.Second, 10*time.Millisecond,
			"goroutines: before %d, now %d", before, runtime.NumGoroutine())
	})
}

func TestAnActionClaimedTooOftenEndsInItsDeclaredFailure(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, s *store.Store) {
		c := newCounter()
		e := newEngine(t, s, "i1", engine.Options{MaxClaims: 5}, map[string]engine.Step{"ok": okStep(c, "")})
		submit(t, s, "op-1", "ok")
		// Five earlier owners died mid-step (kill -9 each time).
		_, err := s.DB().Exec("UPDATE operation SET attempts = 5 WHERE operation_id = 'op-1'")
		require.NoError(t, err)
		require.NoError(t, e.Start(t.Context()))
		o := waitOp(t, s, "op-1", stopped)
		require.Equal(t, domain.StepCreateFailed.String(), domain.StepStatus(o.Step).String())
		require.Contains(t, o.LastError, "gave up after 6 claims")
		require.Zero(t, c.get("op-1"), "the step did not run again")
	})
}

// TestRetriesRefusedByAnOpenBreakerAreNotAttempts: a step whose client's
// breaker refused the call made no attempt. Twenty such retries with
// MaxRetries 3 do not stop the request, and Work.Attempt counts only the
// runs that tried: a step that then fails for real twice and succeeds
// finishes; one that keeps failing for real gives up after exactly
// MaxRetries+1 real attempts, as without the breaker.
func TestRetriesRefusedByAnOpenBreakerAreNotAttempts(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, s *store.Store) {
		breakerThen := func(realFailures int) engine.Step {
			var mu sync.Mutex
			refused := map[string]int{}
			return engine.StepFunc{Decl: createDecl, Fn: func(_ context.Context, w engine.Work) (engine.Outcome, error) {
				mu.Lock()
				defer mu.Unlock()
				op := w.Operation.OperationID
				if refused[op] < 20 {
					refused[op]++
					return engine.RetryAfter(0, "gitlab CreateMR: circuit open").Unattempted(), nil
				}
				if w.Attempt <= realFailures {
					return engine.RetryAfter(0, fmt.Sprintf("gitlab CreateMR: 502 (real attempt %d)", w.Attempt)), nil
				}
				return engine.Done("", engine.Transition{Step: domain.StepCreateMRCreated}), nil
			}}
		}
		o := recoversOrGivesUp(t, s, 3, breakerThen)
		require.Contains(t, o.LastError, "gave up after 4 attempts")
		require.Contains(t, o.LastError, "real attempt 4", "the budget counted only real attempts")
	})
}

// TestDatabaseBusyInsideAStepIsARetry: a step that fails because the
// database was busy or unavailable (domain.ErrBusy: a lock wait, a lost
// Galera node) is run again, not failed; one that never gets the database
// back still ends in its declared failure after MaxRetries.
func TestDatabaseBusyInsideAStepIsARetry(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		busyThen := func(busy int) engine.Step {
			return engine.StepFunc{Decl: createDecl, Fn: func(_ context.Context, w engine.Work) (engine.Outcome, error) {
				if w.Attempt <= busy {
					return engine.Outcome{}, fmt.Errorf("read batch: %w: invalid connection", domain.ErrBusy)
				}
				return engine.Done("", engine.Transition{Step: domain.StepCreateMRCreated}), nil
			}}
		}
		o := recoversOrGivesUp(t, s, 2, busyThen)
		require.Contains(t, o.LastError, "gave up after 3 attempts: database busy")
	})
}

// recoversOrGivesUp runs step(2), which fails twice and then succeeds,
// and step(1000), which never does, with maxRetries: the first must end
// MR_CREATED, the second in its declared failure, whose row it returns.
func recoversOrGivesUp(t *testing.T, s *store.Store, maxRetries int, step func(failures int) engine.Step) store.Operation {
	t.Helper()
	e := newEngine(t, s, "i1", engine.Options{MaxRetries: maxRetries}, map[string]engine.Step{
		"recovers": step(2), "stays-down": step(1000),
	})
	submit(t, s, "op-recovers", "recovers")
	submit(t, s, "op-stays-down", "stays-down")
	require.NoError(t, e.Start(t.Context()))
	stopped := func(o store.Operation) bool { return o.LeaseOwner == "" && (o.DueAt.IsZero() || o.NextAction == "") }

	o := waitOp(t, s, "op-recovers", stopped)
	require.Equal(t, domain.StepCreateMRCreated.String(), domain.StepStatus(o.Step).String(), o.LastError)

	o = waitOp(t, s, "op-stays-down", stopped)
	require.Equal(t, domain.StepCreateFailed.String(), domain.StepStatus(o.Step).String())
	return o
}
