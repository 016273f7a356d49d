package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// TestExhaustedRetriesAreAnsweredByTheStepThatDeclaresHow: a step that
// declares OnExhausted is asked, once, what a run whose retries ran out
// (MaxRetries of RetryAfter, or MaxClaims of claims) comes to, and its
// answer is recorded instead of OnError; an answer that fails, or that
// would retry again, leaves the declared failure as before.
func TestExhaustedRetriesAreAnsweredByTheStepThatDeclaresHow(t *testing.T) {
	t.Parallel()
	storetest.RaceOnSQLite(t, func(t *testing.T, s *store.Store) {
		asked := newCounter()
		retrying := func(answer func(w engine.Work, reason string) (engine.Outcome, error)) engine.Step {
			d := createDecl
			d.OnExhausted = func(_ context.Context, w engine.Work, reason string) (engine.Outcome, error) {
				asked.add(w.Operation.OperationID)
				return answer(w, reason)
			}
			return engine.StepFunc{Decl: d, Fn: func(_ context.Context, w engine.Work) (engine.Outcome, error) {
				return engine.RetryAfter(0, "still down"), nil
			}}
		}
		// The answer moves the row on (its own state, no next action); the
		// reason it was asked for is kept as the row's last error.
		answered := retrying(func(_ engine.Work, reason string) (engine.Outcome, error) {
			return engine.Done("", engine.Transition{Step: domain.StepCreateMRCreated, Note: "answered"}), nil
		})
		e := newEngine(t, s, "i1", engine.Options{MaxRetries: 3, MaxClaims: 50}, map[string]engine.Step{
			"answered": answered,
			"claims":   answered,
			"broken": retrying(func(engine.Work, string) (engine.Outcome, error) {
				return engine.Outcome{}, errors.New("no idea")
			}),
			"again": retrying(func(engine.Work, string) (engine.Outcome, error) {
				return engine.RetryAfter(0, "one more"), nil
			}),
		})
		for _, a := range []string{"answered", "claims", "broken", "again"} {
			submit(t, s, "op-"+a, a)
		}
		// Fifty earlier owners of op-claims died mid-step.
		_, err := s.DB().Exec("UPDATE operation SET attempts = 50 WHERE operation_id = 'op-claims'")
		require.NoError(t, err)
		require.NoError(t, e.Start(t.Context()))
		for _, tt := range []struct {
			action  string
			step    domain.StepStatus
			errPart string
		}{
			{"answered", domain.StepCreateMRCreated, "gave up after 4 attempts: still down"},
			{"claims", domain.StepCreateMRCreated, "gave up after 51 claims of claims"},
			{"broken", domain.StepCreateFailed, "answering it: no idea"},
			{"again", domain.StepCreateFailed, "gave up after 4 attempts: still down"},
		} {
			t.Run(tt.action, func(t *testing.T) {
				op := "op-" + tt.action
				o := waitOp(t, s, op, stopped)
				if tt.step == domain.StepCreateMRCreated {
					require.Empty(t, o.NextAction, "the answer's next action, not the stopped one")
				}
				require.Equal(t, tt.step.String(), domain.StepStatus(o.Step).String())
				require.Contains(t, o.LastError, tt.errPart)
				require.Equal(t, 1, asked.get(op), "asked once, when the bound was passed")
			})
		}
	})
}
