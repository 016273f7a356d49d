package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestTransition(t *testing.T) {
	t.Parallel()
	type arranged struct {
		op      store.Operation
		binding store.Binding
	}
	// Every case starts at the approve-first entry (CREATE_APPROVAL_SUBMITTING,
	// APPROVAL_SENDING); the moves it tries are in the transition table
	// unless the case is about a move that is not.
	const (
		submitting = int(domain.StepCreateApprovalSubmitting)
		submitted  = int(domain.StepCreateApprovalSubmitted)
	)
	tests := []struct {
		name string
		// params builds the transition from what was read.
		params      func(a arranged) store.TransitionParams
		wantErr     error
		wantBinding domain.BindingStatus // after; the unchanged status on error
	}{
		{
			name: "step and binding move together and both versions grow",
			params: func(a arranged) store.TransitionParams {
				return store.TransitionParams{
					OperationID: a.op.OperationID, FromStep: a.op.Step, ToStep: submitted, Version: a.op.Version,
					Binding: &store.BindingMove{From: a.binding.Status, To: domain.BindingApprovalSent, Version: a.binding.Version},
					Actor:   "worker-1", Note: "approval submitted",
				}
			},
			wantBinding: domain.BindingApprovalSent,
		},
		{
			name: "the step alone moves when no binding move is given",
			params: func(a arranged) store.TransitionParams {
				return store.TransitionParams{OperationID: a.op.OperationID, FromStep: a.op.Step, ToStep: submitted, Version: a.op.Version}
			},
			wantBinding: domain.BindingApprovalSending,
		},
		{
			name: "a stale operation version is preempted and writes nothing",
			params: func(a arranged) store.TransitionParams {
				return store.TransitionParams{
					OperationID: a.op.OperationID, FromStep: a.op.Step, ToStep: submitted, Version: a.op.Version + 1,
					Binding: &store.BindingMove{From: a.binding.Status, To: domain.BindingApprovalSent, Version: a.binding.Version},
				}
			},
			wantErr:     domain.ErrPreempted,
			wantBinding: domain.BindingApprovalSending,
		},
		{
			name: "another step at the right version is preempted",
			params: func(a arranged) store.TransitionParams {
				return store.TransitionParams{OperationID: a.op.OperationID, FromStep: submitted, ToStep: int(domain.StepHandleStarted), Version: a.op.Version}
			},
			wantErr:     domain.ErrPreempted,
			wantBinding: domain.BindingApprovalSending,
		},
		{
			name: "a stale binding version rolls the operation write back too",
			params: func(a arranged) store.TransitionParams {
				return store.TransitionParams{
					OperationID: a.op.OperationID, FromStep: a.op.Step, ToStep: submitted, Version: a.op.Version,
					Binding: &store.BindingMove{From: a.binding.Status, To: domain.BindingApprovalSent, Version: a.binding.Version + 1},
				}
			},
			wantErr:     domain.ErrPreempted,
			wantBinding: domain.BindingApprovalSending,
		},
		{
			name: "a binding in another status is preempted",
			params: func(a arranged) store.TransitionParams {
				return store.TransitionParams{
					OperationID: a.op.OperationID, FromStep: a.op.Step, ToStep: int(domain.StepCreateStarted), Version: a.op.Version,
					Binding: &store.BindingMove{From: domain.BindingApprovalSent, To: domain.BindingMRCreating, Version: a.binding.Version},
				}
			},
			wantErr:     domain.ErrPreempted,
			wantBinding: domain.BindingApprovalSending,
		},
		{
			name: "an unknown operation is preempted",
			params: func(a arranged) store.TransitionParams {
				return store.TransitionParams{OperationID: "nope", FromStep: a.op.Step, ToStep: submitted, Version: 1}
			},
			wantErr:     domain.ErrPreempted,
			wantBinding: domain.BindingApprovalSending,
		},
		{
			name: "a step move the table does not list is refused and writes nothing",
			params: func(a arranged) store.TransitionParams {
				return store.TransitionParams{OperationID: a.op.OperationID, FromStep: a.op.Step, ToStep: int(domain.StepHandleMerged), Version: a.op.Version}
			},
			wantErr:     domain.ErrIllegalTransition,
			wantBinding: domain.BindingApprovalSending,
		},
		{
			name: "a binding move the table does not list is refused with its legal step move",
			params: func(a arranged) store.TransitionParams {
				return store.TransitionParams{
					OperationID: a.op.OperationID, FromStep: a.op.Step, ToStep: submitted, Version: a.op.Version,
					Binding: &store.BindingMove{From: a.binding.Status, To: domain.BindingValidated, Version: a.binding.Version},
				}
			},
			wantErr:     domain.ErrIllegalTransition,
			wantBinding: domain.BindingApprovalSending,
		},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				subject := fmt.Sprintf("u%d", i)
				res := mustSubmitApproval(t, s, subject+"-op", subject, "t")
				a := arranged{op: res.Operation, binding: res.Application.Binding}
				require.Equal(t, submitting, a.op.Step)
				p := tt.params(a)

				got, err := s.Transition(t.Context(), p)
				op := mustOperation(t, s, a.op.OperationID)
				b := mustBinding(t, s, subject, "t")
				steps := mustSteps(t, s, a.op.OperationID)
				require.Equal(t, tt.wantBinding, b.Status)
				if tt.wantErr != nil {
					require.ErrorIs(t, err, tt.wantErr)
					require.Equal(t, a.op.Version, op.Version)
					require.Equal(t, a.op.Step, op.Step)
					require.Equal(t, a.binding.Version, b.Version)
					require.Len(t, steps, 1, "no history for a refused write")
					return
				}
				require.NoError(t, err)
				require.Equal(t, a.op.Version+1, op.Version)
				require.Equal(t, got.OperationVersion, op.Version)
				require.Equal(t, p.ToStep, op.Step)
				require.Len(t, steps, 2)
				last := steps[1]
				require.Equal(t, p.FromStep, last.FromStep)
				require.Equal(t, p.ToStep, last.ToStep)
				require.Equal(t, p.Actor, last.Actor)
				require.Equal(t, p.Note, last.Note)
				if p.Binding != nil {
					require.Equal(t, a.binding.Version+1, b.Version)
					require.Equal(t, got.BindingVersion, b.Version)
					require.Equal(t, p.Binding.From, last.FromBinding)
					require.Equal(t, p.Binding.To, last.ToBinding)
				} else {
					require.Equal(t, a.binding.Version, b.Version)
					require.Zero(t, got.BindingVersion)
					require.Empty(t, last.FromBinding)
					require.Empty(t, last.ToBinding)
				}
			})
		}
	})
}

// TestTransitionIllegalIsNotPreempted: a move the table refuses is a bug in
// the caller, told apart from a lost race — the error matches
// ErrIllegalTransition and not ErrPreempted, names both states, and the
// batched form refuses it before writing any row.
func TestTransitionIllegalIsNotPreempted(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rows := bulkSubmit(t, s, "ill", 3, domain.BindingMRCreating)
		err := s.TransitionMany(t.Context(), store.TransitionManyParams{
			FromStep: stepCreateStarted, ToStep: stepCalledBack,
			BindingFrom: domain.BindingMRCreating, BindingTo: domain.BindingValidated, Rows: rows,
		})
		require.ErrorIs(t, err, domain.ErrIllegalTransition)
		require.NotErrorIs(t, err, domain.ErrPreempted)
		var ill *domain.IllegalTransitionError
		require.ErrorAs(t, err, &ill)
		require.Equal(t, "step", ill.Layer)
		require.Contains(t, err.Error(), "CREATE_STARTED → CALLED_BACK")
		require.Equal(t, 3, count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE step_status = ? AND version = 1", stepCreateStarted))
		require.Equal(t, 3, count(t, s.DB(), "SELECT COUNT(*) FROM binding WHERE status = ? AND version = 1", "MR_CREATING"))
		require.Equal(t, 3, count(t, s.DB(), "SELECT COUNT(*) FROM operation_step"))

		// A legal step with an illegal binding move: refused the same way.
		err = s.TransitionMany(t.Context(), store.TransitionManyParams{
			FromStep: stepCreateStarted, ToStep: int(domain.StepCreateFailed),
			BindingFrom: domain.BindingMRCreating, BindingTo: domain.BindingMerging, Rows: rows,
		})
		require.ErrorIs(t, err, domain.ErrIllegalTransition)
		require.ErrorAs(t, err, &ill)
		require.Equal(t, "binding", ill.Layer)
		require.Equal(t, 3, count(t, s.DB(), "SELECT COUNT(*) FROM operation_step"))
	})
}

func TestTransitionDoesNotMoveABindingReappliedForANewerRequest(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		old := mustSubmitApproval(t, s, "op-old", "alice", "t")
		mustSetBinding(t, s, "alice", "t", domain.BindingRejected, old.Operation.ExpiresAt)
		mustSubmitApproval(t, s, "op-new", "alice", "t")
		cur := mustBinding(t, s, "alice", "t")
		require.Equal(t, domain.BindingApprovalSending, cur.Status)

		// The old request's late step, a legal move naming the binding's
		// current status and version: only the operation_id in the guard
		// tells the newer request's row from the old one's.
		_, err := s.Transition(ctx, store.TransitionParams{
			OperationID: "op-old", FromStep: int(domain.StepCreateApprovalSubmitting), ToStep: int(domain.StepCreateApprovalSubmitted), Version: 1,
			Binding: &store.BindingMove{From: domain.BindingApprovalSending, To: domain.BindingApprovalSent, Version: cur.Version},
		})
		require.ErrorIs(t, err, domain.ErrPreempted)
		b := mustBinding(t, s, "alice", "t")
		require.Equal(t, "op-new", b.OperationID)
		require.Equal(t, cur, b)
		require.Equal(t, int64(1), mustOperation(t, s, "op-old").Version, "rolled back")
	})
}

// TestOperationSetStepIfVersionDefeatsABA: the operation leaves a step and
// comes back to it between a reader's read and its write. A status-only
// guard would pass; the version guard fails.
func TestOperationSetStepIfVersionDefeatsABA(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		_, err := s.OperationCreate(ctx, opParams("op-aba", "alice", "t"))
		require.NoError(t, err)
		// The stale writer's view: HANDLE_APPROVED at some version.
		read := storetest.WalkTo(t, s, "op-aba", storetest.LegacyPath, domain.StepHandleApproved)
		before := len(mustSteps(t, s, "op-aba"))

		// Meanwhile: A → B → A (a merge refused, rebased, approved again).
		v, err := s.OperationSetStepIfVersion(ctx, store.OperationSetStepIfVersionParams{
			OperationID: "op-aba", FromStep: stepHandleApproved, ToStep: int(domain.StepHandleRebasing), Version: read.Version})
		require.NoError(t, err)
		v, err = s.OperationSetStepIfVersion(ctx, store.OperationSetStepIfVersionParams{
			OperationID: "op-aba", FromStep: int(domain.StepHandleRebasing), ToStep: stepHandleApproved, Version: v})
		require.NoError(t, err)
		require.Equal(t, read.Version+2, v)

		tx, err := s.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, int64(1), mustExec(t, tx,
			"UPDATE operation SET step_status = ? WHERE operation_id = ? AND step_status = ?",
			int(domain.StepHandleMerged), "op-aba", read.Step), "a status-only guard passes")
		require.NoError(t, tx.Rollback())

		_, err = s.OperationSetStepIfVersion(ctx, store.OperationSetStepIfVersionParams{
			OperationID: "op-aba", FromStep: read.Step, ToStep: int(domain.StepHandleMerged), Version: read.Version})
		require.ErrorIs(t, err, domain.ErrPreempted)
		got := mustOperation(t, s, "op-aba")
		require.Equal(t, stepHandleApproved, got.Step)
		require.Equal(t, read.Version+2, got.Version)
		require.Len(t, mustSteps(t, s, "op-aba"), before+2)
	})
}

// TestTransitionMany moves more operations than one IN chunk holds, and
// shows that one stale row anywhere rolls back every chunk — including
// chunks whose guarded write had already succeeded.
func TestTransitionMany(t *testing.T) {
	t.Parallel()
	const n = 2*store.InChunkSize + 3
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		// A batch's members whose check pipeline runs: submitted, then
		// walked there with TransitionMany itself (two hops, bindings
		// untouched).
		rows := bulkWalk(t, s, bulkSubmit(t, s, "bulk", n, domain.BindingMRCreating),
			stepCreateStarted, stepCreateMRCreated, stepCreatePipelineRunning)
		v := rows[0].Version
		require.Equal(t, int64(3), v)
		hist := 3 * n

		t.Run("one stale row anywhere rolls back every chunk", func(t *testing.T) {
			stale := append([]store.TransitionRow(nil), rows...)
			stale[n-1].BindingVersion++ // in the last chunk, bindings: after every operation was moved
			err := s.TransitionMany(ctx, store.TransitionManyParams{
				FromStep: stepCreatePipelineRunning, ToStep: stepCreateSucceeded,
				BindingFrom: domain.BindingMRCreating, BindingTo: domain.BindingMRCreated, Rows: stale,
			})
			require.ErrorIs(t, err, domain.ErrPreempted)
			require.Equal(t, n, count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE step_status = ? AND version = ?", stepCreatePipelineRunning, v))
			require.Equal(t, n, count(t, s.DB(), "SELECT COUNT(*) FROM binding WHERE status = ? AND version = 1", "MR_CREATING"))
			require.Equal(t, hist, count(t, s.DB(), "SELECT COUNT(*) FROM operation_step"))
		})
		t.Run("every row moves, in a few statements per chunk", func(t *testing.T) {
			err := s.TransitionMany(ctx, store.TransitionManyParams{
				FromStep: stepCreatePipelineRunning, ToStep: stepCreateSucceeded,
				BindingFrom: domain.BindingMRCreating, BindingTo: domain.BindingMRCreated, Rows: rows,
				Actor: "round", Note: "pipeline passed",
			})
			require.NoError(t, err)
			require.Equal(t, n, count(t, s.DB(), "SELECT COUNT(*) FROM operation WHERE step_status = ? AND version = ?", stepCreateSucceeded, v+1))
			require.Equal(t, n, count(t, s.DB(), "SELECT COUNT(*) FROM binding WHERE status = ? AND version = 2", "MR_CREATED"))
			require.Equal(t, n, count(t, s.DB(),
				"SELECT COUNT(*) FROM operation_step WHERE from_step = ? AND to_step = ? AND from_binding_status = ? AND to_binding_status = ? AND note = ?",
				stepCreatePipelineRunning, stepCreateSucceeded, "MR_CREATING", "MR_CREATED", "pipeline passed"))
		})
		t.Run("a second settlement of the same rows fails at its first write", func(t *testing.T) {
			err := s.TransitionMany(ctx, store.TransitionManyParams{
				FromStep: stepCreatePipelineRunning, ToStep: stepCreateSucceeded,
				BindingFrom: domain.BindingMRCreating, BindingTo: domain.BindingMRCreated, Rows: rows,
			})
			require.ErrorIs(t, err, domain.ErrPreempted)
			require.Contains(t, err.Error(), "move operations", "the operation guard, the first statement, refused")
			require.Equal(t, hist+n, count(t, s.DB(), "SELECT COUNT(*) FROM operation_step"))
		})
	})
}

// TestTransitionManyLocksOnlyTheListedRows holds a transition of 400 of
// 500 operations open and moves one of the other 100 meanwhile: it must
// not wait. Without the index hint MariaDB plans this UPDATE as a full scan
// of the primary key and locks all 500 rows. SQLite has one writer by
// design, so this is MariaDB's property.
func TestTransitionManyLocksOnlyTheListedRows(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "SQLite serializes all writers")
		rows := bulkWalk(t, s, bulkSubmit(t, s, "lock", 500, domain.BindingMRCreating),
			stepCreateStarted, stepCreateMRCreated, stepCreatePipelineRunning)
		other := rows[450]
		var (
			elapsed time.Duration
			err     error
		)
		p := store.TransitionManyBeforeCommit(store.TransitionManyParams{
			FromStep: stepCreatePipelineRunning, ToStep: stepCreateSucceeded,
			BindingFrom: domain.BindingMRCreating, BindingTo: domain.BindingMRCreated, Rows: rows[:400],
		}, func() {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			start := time.Now()
			_, err = s.Transition(ctx, store.TransitionParams{
				OperationID: other.OperationID, FromStep: stepCreatePipelineRunning, ToStep: int(domain.StepCreateFailed), Version: other.Version,
				Binding: &store.BindingMove{From: domain.BindingMRCreating, To: domain.BindingCreateFailed, Version: other.BindingVersion},
			})
			elapsed = time.Since(start)
		})
		require.NoError(t, s.TransitionMany(t.Context(), p))
		require.NoError(t, err, "an unlisted operation moves while the big transition is open")
		require.Less(t, elapsed, time.Second)
		require.Equal(t, 400, count(t, s.DB(), "SELECT COUNT(*) FROM binding WHERE status = ?", "MR_CREATED"))
	})
}

func TestTransitionManyRefusesMalformedMoves(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		row := store.TransitionRow{OperationID: "op", Version: 1, BindingVersion: 1}
		for _, tt := range []struct {
			name string
			p    store.TransitionManyParams
		}{
			{"no rows", store.TransitionManyParams{FromStep: 1, ToStep: 2}},
			{"the same operation twice", store.TransitionManyParams{FromStep: 1, ToStep: 2, Rows: []store.TransitionRow{row, row}}},
			{"a binding move without its target", store.TransitionManyParams{FromStep: 1, ToStep: 2, BindingFrom: domain.BindingMerged, Rows: []store.TransitionRow{row}}},
			{"an unknown binding status", store.TransitionManyParams{FromStep: 1, ToStep: 2, BindingFrom: "X", BindingTo: domain.BindingMerged, Rows: []store.TransitionRow{row}}},
			{"a zero step", store.TransitionManyParams{FromStep: 1, Rows: []store.TransitionRow{row}}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				err := s.TransitionMany(t.Context(), tt.p)
				require.Error(t, err)
				require.NotErrorIs(t, err, domain.ErrPreempted)
			})
		}
	})
}

// bulkSubmit inserts n operations in CREATE_STARTED with their bindings in
// status through multi-row INSERTs (arranging, not under test) and returns
// them as transition rows at version 1.
func bulkSubmit(t *testing.T, s *store.Store, prefix string, n int, status domain.BindingStatus) []store.TransitionRow {
	t.Helper()
	rows := make([]store.TransitionRow, 0, n)
	for start := 0; start < n; start += store.InChunkSize {
		m := min(store.InChunkSize, n-start)
		var ops, binds, steps []any
		for i := start; i < start+m; i++ {
			id := fmt.Sprintf("%s-%05d", prefix, i)
			ops = append(ops, id, "user-"+id, "t", 1, "APPROVE_FIRST", stepCreateStarted)
			binds = append(binds, "user-"+id, "t", string(status), id)
			steps = append(steps, id, stepCreateStarted)
			rows = append(rows, store.TransitionRow{OperationID: id, Version: 1, BindingVersion: 1})
		}
		mustExec(t, s.DB(), "INSERT INTO operation (operation_id, subject, target_key, project_id, flow, step_status) VALUES "+
			valuesList(m, 6), ops...)
		mustExec(t, s.DB(), "INSERT INTO binding (subject_id, target_key, status, operation_id) VALUES "+valuesList(m, 4), binds...)
		mustExec(t, s.DB(), "INSERT INTO operation_step (operation_id, to_step) VALUES "+valuesList(m, 2), steps...)
	}
	return rows
}

// bulkWalk moves rows along the legal step path steps (rows start at
// steps[0]) with one TransitionMany per hop, bindings untouched, and
// returns them at their new versions.
func bulkWalk(t *testing.T, s *store.Store, rows []store.TransitionRow, steps ...int) []store.TransitionRow {
	t.Helper()
	out := append([]store.TransitionRow(nil), rows...)
	for i := 1; i < len(steps); i++ {
		require.NoError(t, s.TransitionMany(t.Context(), store.TransitionManyParams{
			FromStep: steps[i-1], ToStep: steps[i], Rows: out, Actor: "test", Note: "arrange",
		}))
		for j := range out {
			out[j].Version++
		}
	}
	return out
}

// valuesList returns rows copies of "(?, …, ?)" with cols placeholders.
func valuesList(rows, cols int) string {
	row := "(?" + repeatString(", ?", cols-1) + ")"
	return row + repeatString(", "+row, rows-1)
}

func repeatString(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
