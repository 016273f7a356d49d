package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestBindingApply(t *testing.T) {
	t.Parallel()
	past := time.Now().Add(-time.Hour)
	future := time.Date(2040, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name      string
		status    domain.BindingStatus // the existing row; "" for none
		expiresAt time.Time
		wantReset bool
		wantCode  domain.Code // the refusal's code when not applied
	}{
		{name: "no row: the first application inserts"},
		{name: "REJECTED is reset in place", status: domain.BindingRejected, wantReset: true},
		{name: "CLOSED is reset in place", status: domain.BindingClosed, wantReset: true},
		// Its entry is still on main until its revocation removes it: a
		// reset for a request that is then rejected would leave the entry
		// there with nothing to remove it.
		{name: "VALIDATED past its expiry awaits its removal", status: domain.BindingValidated, expiresAt: past, wantCode: domain.CodeRequestInProgress},
		{name: "VALIDATED and not expired is already in effect", status: domain.BindingValidated, expiresAt: future, wantCode: domain.CodeAlreadyInEffect},
		{name: "VALIDATED with no expiry is in effect for good", status: domain.BindingValidated, wantCode: domain.CodeAlreadyInEffect},
		{name: "APPROVAL_SENDING is in progress", status: domain.BindingApprovalSending, wantCode: domain.CodeRequestInProgress},
		{name: "APPROVAL_SENT is in progress", status: domain.BindingApprovalSent, wantCode: domain.CodeRequestInProgress},
		{name: "MR_CREATING is in progress", status: domain.BindingMRCreating, wantCode: domain.CodeRequestInProgress},
		{name: "MR_CREATED is in progress", status: domain.BindingMRCreated, wantCode: domain.CodeRequestInProgress},
		{name: "MERGING is in progress", status: domain.BindingMerging, wantCode: domain.CodeRequestInProgress},
		{name: "MERGED is in progress", status: domain.BindingMerged, wantCode: domain.CodeRequestInProgress},
		{name: "CREATE_FAILED awaits recovery", status: domain.BindingCreateFailed, wantCode: domain.CodeRequestInProgress},
		{name: "HANDLE_FAILED awaits recovery", status: domain.BindingHandleFailed, wantCode: domain.CodeRequestInProgress},
		{name: "REJECTED with an expiry in the past is still re-appliable", status: domain.BindingRejected, expiresAt: past, wantReset: true},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				subject, target := fmt.Sprintf("user-%d", i), "payments-db-readonly"
				var before store.Binding
				if tt.status != "" {
					mustSubmit(t, s, fmt.Sprintf("old-%d", i), subject, target, domain.BindingApprovalSending)
					mustSetBinding(t, s, subject, target, tt.status, tt.expiresAt)
					before = mustBinding(t, s, subject, target)
				}
				newExpiry := time.Date(2035, 6, 7, 8, 9, 10, 0, time.UTC)
				res, err := s.BindingApply(ctx, store.BindingApplyParams{
					Subject: subject, TargetKey: target, OperationID: fmt.Sprintf("new-%d", i),
					Status: domain.BindingApprovalSending, ExpiresAt: newExpiry,
				})
				hist, herr := s.BindingHistoryList(ctx, subject, target)
				require.NoError(t, herr)

				if tt.wantCode != "" {
					var refused *store.BindingRefusedError
					require.ErrorAs(t, err, &refused)
					require.Equal(t, tt.wantCode, refused.Code())
					require.Equal(t, before, refused.Current, "the refusal carries the row as read")
					require.Equal(t, before, mustBinding(t, s, subject, target), "nothing written")
					require.Len(t, hist, 1, "no history for a refusal")
					if tt.wantCode == domain.CodeAlreadyInEffect {
						require.True(t, tt.expiresAt.Truncate(time.Millisecond).Equal(refused.Current.ExpiresAt), "until when")
						require.Contains(t, refused.Error(), "in effect")
					}
					return
				}
				require.NoError(t, err)
				b := res.Binding
				require.Equal(t, domain.BindingApprovalSending, b.Status)
				require.Equal(t, fmt.Sprintf("new-%d", i), b.OperationID)
				require.True(t, newExpiry.Equal(b.ExpiresAt))
				require.False(t, b.Expired)
				require.Equal(t, b, mustBinding(t, s, subject, target))
				require.Equal(t, 1, count(t, s.DB(), "SELECT COUNT(*) FROM binding WHERE subject_id = ? AND target_key = ?", subject, target), "one row per relationship")
				if tt.wantReset {
					require.False(t, res.First)
					require.Equal(t, before, res.Previous)
					require.Equal(t, before.ID, b.ID, "reset in place")
					require.Equal(t, before.Version+1, b.Version)
					require.Len(t, hist, 2)
				} else {
					require.True(t, res.First)
					require.Equal(t, int64(1), b.Version)
					require.Len(t, hist, 1)
				}
				last := hist[len(hist)-1]
				require.Equal(t, b.OperationID, last.OperationID)
				require.Equal(t, b.Status, last.Status)
				require.True(t, newExpiry.Equal(last.ExpiresAt))
			})
		}
	})
}

func TestBindingReappliableIsOneDefinition(t *testing.T) {
	t.Parallel()
	for _, st := range domain.BindingStatuses {
		for _, expired := range []bool{false, true} {
			b := store.Binding{Status: st, Expired: expired}
			require.Equal(t, st.Reappliable(), b.Reappliable(), "%s expired=%v", st, expired)
			require.Equal(t, st == domain.BindingValidated && expired, b.ExpiredAwaitingRemoval(), "%s expired=%v", st, expired)
			require.Equal(t, st == domain.BindingValidated && !expired, b.InEffect(), "%s expired=%v", st, expired)
		}
	}
}

func TestBindingResetIfVersion(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		reset := func(subject string, from domain.BindingStatus, version int64, op string) (store.Binding, error) {
			return s.BindingResetIfVersion(ctx, store.BindingResetParams{
				Subject: subject, TargetKey: "t", FromStatus: from, FromVersion: version,
				OperationID: op, Status: domain.BindingApprovalSending,
			})
		}
		arrange := func(subject string, status domain.BindingStatus, expiresAt time.Time) store.Binding {
			mustSubmit(t, s, subject+"-old", subject, "t", domain.BindingApprovalSending)
			mustSetBinding(t, s, subject, "t", status, expiresAt)
			return mustBinding(t, s, subject, "t")
		}
		t.Run("the exact status and version reset the row", func(t *testing.T) {
			b := arrange("u1", domain.BindingClosed, time.Time{})
			got, err := reset("u1", domain.BindingClosed, b.Version, "u1-new")
			require.NoError(t, err)
			require.Equal(t, b.Version+1, got.Version)
			require.Equal(t, "u1-new", got.OperationID)
		})
		t.Run("a stale version is preempted", func(t *testing.T) {
			b := arrange("u2", domain.BindingRejected, time.Time{})
			_, err := reset("u2", domain.BindingRejected, b.Version-1, "u2-new")
			require.ErrorIs(t, err, domain.ErrPreempted)
			require.Equal(t, b, mustBinding(t, s, "u2", "t"))
		})
		t.Run("another status at the same version is preempted", func(t *testing.T) {
			b := arrange("u3", domain.BindingRejected, time.Time{})
			_, err := reset("u3", domain.BindingClosed, b.Version, "u3-new")
			require.ErrorIs(t, err, domain.ErrPreempted)
		})
		t.Run("a status that is never re-appliable is refused before any write", func(t *testing.T) {
			b := arrange("u4", domain.BindingHandleFailed, time.Time{})
			_, err := reset("u4", domain.BindingHandleFailed, b.Version, "u4-new")
			require.Error(t, err)
			require.NotErrorIs(t, err, domain.ErrPreempted)
			require.Equal(t, b, mustBinding(t, s, "u4", "t"))
		})
		t.Run("VALIDATED is never reset, before or after its expiry", func(t *testing.T) {
			for i, exp := range []time.Time{time.Now().Add(time.Hour), time.Now().Add(-time.Hour)} {
				subject := fmt.Sprintf("u5-%d", i)
				b := arrange(subject, domain.BindingValidated, exp)
				_, err := reset(subject, domain.BindingValidated, b.Version, subject+"-new")
				require.Error(t, err)
				require.NotErrorIs(t, err, domain.ErrPreempted, "refused before any write")
				require.Equal(t, b, mustBinding(t, s, subject, "t"))
			}
		})
	})
}

// TestBindingResetDefeatsABA is the ABA problem, fixed: between
// a re-application's read and its reset the row leaves REJECTED and comes
// back to it. A status-only guard would let the stale reset
// through; the version guard refuses it.
func TestBindingResetDefeatsABA(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		mustSubmitApproval(t, s, "op-1", "alice", "t")
		mustSetBinding(t, s, "alice", "t", domain.BindingRejected, time.Time{})
		read := mustBinding(t, s, "alice", "t") // the stale reader's view: REJECTED @ v2

		// Meanwhile: another re-application (REJECTED → APPROVAL_SENDING),
		// rejected again (→ REJECTED). Same status, two versions later.
		b2 := mustSubmitApproval(t, s, "op-2", "alice", "t").Application.Binding
		_, err := s.Transition(ctx, store.TransitionParams{
			OperationID: "op-2", FromStep: int(domain.StepCreateApprovalSubmitting), ToStep: int(domain.StepCloseRejected), Version: 1,
			Binding: &store.BindingMove{From: domain.BindingApprovalSending, To: domain.BindingRejected, Version: b2.Version},
		})
		require.NoError(t, err)
		now := mustBinding(t, s, "alice", "t")
		require.Equal(t, read.Status, now.Status, "A → B → A")
		require.Equal(t, read.Version+2, now.Version)

		// A status-only guard would match the row.
		tx, err := s.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		require.Equal(t, int64(1), mustExec(t, tx,
			"UPDATE binding SET status = ?, operation_id = ? WHERE subject_id = ? AND target_key = ? AND status = ?",
			"APPROVAL_SENDING", "op-stale", "alice", "t", "REJECTED"), "status-only guard passes")
		require.NoError(t, tx.Rollback())

		// The version guard does not.
		_, err = s.BindingResetIfVersion(ctx, store.BindingResetParams{
			Subject: "alice", TargetKey: "t", FromStatus: read.Status, FromVersion: read.Version,
			OperationID: "op-stale", Status: domain.BindingApprovalSending,
		})
		require.ErrorIs(t, err, domain.ErrPreempted)
		require.Equal(t, now, mustBinding(t, s, "alice", "t"))
	})
}

// TestBindingApplyLosingARaceAnswersWithTheWinnersState makes a concurrent
// application win between an application's read and its write. The loser
// re-reads in a new transaction and answers with the refusal the winner's
// row calls for, instead of an error. MariaDB only: on SQLite the
// application holds the single write lock from its read to its commit, so
// no other writer can get in between (the hook's write would wait for it).
// Run with innodb_snapshot_isolation off and on (on is the default from
// MariaDB 11.6.2), which may report the stale write as error 1020 instead
// of a short row count; the loser must answer the same either way. (On
// 10.11.19 the reset through the unique key still reports a short count.)
func TestBindingApplyLosingARaceAnswersWithTheWinnersState(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "SQLite serializes the read and the write")
		for _, snapshot := range []bool{false, true} {
			t.Run(fmt.Sprintf("innodb_snapshot_isolation=%v", snapshot), func(t *testing.T) {
				s := s
				if snapshot {
					s = openWithSnapshotIsolation(t)
				}
				ctx := t.Context()
				for _, tt := range []struct {
					name  string
					start domain.BindingStatus // "" for no row
				}{
					{"a concurrent first application inserts first", ""},
					{"a concurrent re-application resets first", domain.BindingRejected},
				} {
					t.Run(tt.name, func(t *testing.T) {
						subject := fmt.Sprintf("u-%v-%s", snapshot, tt.start)
						if tt.start != "" {
							mustSubmit(t, s, subject+"-old", subject, "t", domain.BindingApprovalSending)
							mustSetBinding(t, s, subject, "t", tt.start, time.Time{})
						}
						var once sync.Once
						p := store.BindingApplyAfterRead(store.BindingApplyParams{
							Subject: subject, TargetKey: "t", OperationID: subject + "-loser", Status: domain.BindingApprovalSending,
						}, func() {
							once.Do(func() { mustSubmit(t, s, subject+"-winner", subject, "t", domain.BindingApprovalSending) })
						})
						_, err := s.BindingApply(ctx, p)
						var refused *store.BindingRefusedError
						require.ErrorAs(t, err, &refused)
						require.Equal(t, domain.CodeRequestInProgress, refused.Code())
						require.Equal(t, subject+"-winner", refused.Current.OperationID)
						require.Equal(t, subject+"-winner", mustBinding(t, s, subject, "t").OperationID)
					})
				}
			})
		}
	})
}

// openWithSnapshotIsolation opens a MariaDB store on a fresh database whose
// sessions run with innodb_snapshot_isolation=ON (the default from MariaDB
// 11.6.2), or skips when the server does not know the variable.
func openWithSnapshotIsolation(t *testing.T) *store.Store {
	t.Helper()
	cfg, err := mysql.ParseDSN(storetest.NewDatabase(t, store.DriverMySQL))
	require.NoError(t, err)
	probe, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	defer probe.Close()
	if _, err := probe.ExecContext(t.Context(), "SET SESSION innodb_snapshot_isolation = ON"); err != nil {
		t.Skipf("server lacks innodb_snapshot_isolation: %v", err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["innodb_snapshot_isolation"] = "ON"
	s := storetest.OpenDSN(t, store.DriverMySQL, cfg.FormatDSN())
	_, err = s.Migrate(t.Context())
	require.NoError(t, err)
	var on int
	require.NoError(t, s.DB().QueryRowContext(context.Background(), "SELECT @@SESSION.innodb_snapshot_isolation").Scan(&on))
	require.Equal(t, 1, on)
	return s
}
