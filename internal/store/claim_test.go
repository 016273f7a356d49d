package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

func TestBatchClaimNothingWaiting(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		c, err := s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		require.NoError(t, err)
		require.Equal(t, store.Claim{Outcome: store.ClaimNothingWaiting}, c)
		require.Equal(t, 0, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch"))

		_, err = s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 1})
		require.ErrorContains(t, err, "MaxRequests must be positive")
	})
}

func TestBatchClaimEmptyReadRollsBackTheSlot(t *testing.T) {
	t.Parallel()
	// The pre-check sees a waiting request, but it was created after the
	// database clock of the read: the claim must not leave a member-less
	// batch holding the slot.
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		future, arg := s.Dialect().NowAdd(time.Hour)
		mustExec(t, s.DB(), "INSERT INTO merge_batch_request (operation_id, project_id, created_at) VALUES (?, ?, "+future+")",
			"op-future", 1, arg)
		c, err := s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		require.NoError(t, err)
		require.Equal(t, store.ClaimNothingWaiting, c.Outcome)
		require.Equal(t, 0, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch"), "slot insert rolled back")
		require.Equal(t, 0, activeBatches(t, s, 1))
	})
}

func TestBatchClaimTakesTheOldestRequests(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx, db := t.Context(), s.DB()
		// e has the largest id but is the oldest: created_at decides, id only breaks ties.
		for i, op := range []string{"a", "b", "c", "d", "e"} {
			age := time.Duration(10-i) * time.Second
			if op == "e" {
				age = time.Minute
			}
			past, arg := s.Dialect().NowMinus(age)
			mustExec(t, db, "INSERT INTO merge_batch_request (operation_id, project_id, created_at) VALUES (?, ?, "+past+")", op, 1, arg)
		}

		c := mustClaim(t, s, 1, 3)
		require.Equal(t, []string{"e", "a", "b"}, memberOpIDs(c.Members), "created_at, then id")
		for _, m := range c.Members {
			require.NotZero(t, m.ID)
			require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE id = ? AND operation_id = ? AND batch_id = ?",
				m.ID, m.OperationID, c.BatchID))
			require.Equal(t, 1, count(t, db, "SELECT COUNT(*) FROM merge_batch_history WHERE request_id = ? AND operation_id = ? AND batch_id = ?",
				m.ID, m.OperationID, c.BatchID))
		}
		b := mustBatch(t, s, c.BatchID)
		require.Equal(t, domain.BatchRunning, b.Status)
		require.Equal(t, int64(1), b.Version)

		again, err := s.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 3})
		require.NoError(t, err)
		require.Equal(t, store.Claim{Outcome: store.ClaimSlotOccupied}, again)

		mustSucceed(t, s, c.BatchID)
		next := mustClaim(t, s, 1, 3)
		require.Equal(t, []string{"c", "d"}, memberOpIDs(next.Members))

		mustSucceed(t, s, next.BatchID)
		none, err := s.BatchClaim(ctx, store.BatchClaimParams{ProjectID: 1, MaxRequests: 3})
		require.NoError(t, err)
		require.Equal(t, store.ClaimNothingWaiting, none.Outcome)
	})
}

func TestBatchClaimSlotsArePerProject(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		admitWaiting(t, s, 1, "p1", 2)
		admitWaiting(t, s, 2, "p2", 2)
		c1 := mustClaim(t, s, 1, 10)
		c2 := mustClaim(t, s, 2, 10)
		require.Equal(t, []string{"p1-0", "p1-1"}, memberOpIDs(c1.Members))
		require.Equal(t, []string{"p2-0", "p2-1"}, memberOpIDs(c2.Members))
		require.Equal(t, 1, activeBatches(t, s, 1))
		require.Equal(t, 1, activeBatches(t, s, 2))
	})
}

func TestBatchClaimChunksThousandsOfRequests(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const n = 2*store.InChunkSize + 234
		admitWaiting(t, s, 1, "op", n)
		c := mustClaim(t, s, 1, n+10)
		require.Len(t, c.Members, n)
		db := s.DB()
		require.Equal(t, n, count(t, db, "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id = ?", c.BatchID))
		require.Equal(t, n, count(t, db, "SELECT COUNT(*) FROM merge_batch_history WHERE batch_id = ?", c.BatchID))
		require.Equal(t, n, count(t, db, "SELECT COUNT(DISTINCT request_id) FROM merge_batch_history"))
		members, err := s.BatchMembers(t.Context(), c.BatchID)
		require.NoError(t, err)
		require.Equal(t, c.Members, members)
	})
}

func TestBatchClaimPreemptedRollsBackEverything(t *testing.T) {
	t.Parallel()
	// The guarded UPDATE claims only rows that are still waiting; a row
	// changed between the read and the UPDATE makes the count short, and
	// the whole claim — slot included — rolls back. The change is made on
	// the claim's own transaction here, which works on both databases;
	// TestBatchClaimDetectsAConcurrentWriter does it from outside.
	changes := []struct {
		name   string
		change string
	}{
		{"a read row was claimed elsewhere", "UPDATE merge_batch_request SET batch_id = 999999 WHERE id = ?"},
		{"a read row was deleted", "DELETE FROM merge_batch_request WHERE id = ?"},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for i, tt := range changes {
			t.Run(tt.name, func(t *testing.T) {
				project := int64(10 + i)
				admitWaiting(t, s, project, fmt.Sprintf("p%d", project), store.InChunkSize+3)
				p := store.ClaimAfterRead(store.BatchClaimParams{ProjectID: project, MaxRequests: 1000},
					func(ctx context.Context, tx *sql.Tx, _ int64, read []store.BatchMember) error {
						_, err := tx.ExecContext(ctx, tt.change, read[len(read)-1].ID) // in the second chunk
						return err
					})
				c, err := s.BatchClaim(t.Context(), p)
				require.NoError(t, err)
				require.Equal(t, store.Claim{Outcome: store.ClaimPreempted}, c)

				db := s.DB()
				require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM merge_batch WHERE project_id = ?", project), "slot rolled back")
				require.Equal(t, 0, count(t, db, "SELECT COUNT(*) FROM merge_batch_history WHERE operation_id LIKE ?",
					fmt.Sprintf("p%d-%%", project)), "no history")
				require.Equal(t, store.InChunkSize+3, count(t, db,
					"SELECT COUNT(*) FROM merge_batch_request WHERE project_id = ? AND batch_id IS NULL", project),
					"the first chunk's claim rolled back too")
				mustClaim(t, s, project, 1000)
			})
		}
	})
}

func TestBatchClaimDetectsAConcurrentWriter(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "SQLite's single writer lock keeps every other writer out of the claim transaction")
		admitWaiting(t, s, 1, "op", 3)
		p := store.ClaimAfterRead(store.BatchClaimParams{ProjectID: 1, MaxRequests: 10},
			func(ctx context.Context, _ *sql.Tx, _ int64, read []store.BatchMember) error {
				// Another session commits a change to a row the claim read:
				// the plain read took no lock, so this does not wait.
				_, err := s.DB().ExecContext(ctx, "UPDATE merge_batch_request SET batch_id = 999999 WHERE id = ?", read[1].ID)
				return err
			})
		c, err := s.BatchClaim(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, store.ClaimPreempted, c.Outcome,
			"REPEATABLE READ's snapshot still shows the row waiting, but the UPDATE sees the committed change")
		require.Equal(t, 0, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch"))
		require.Equal(t, 2, count(t, s.DB(), "SELECT COUNT(*) FROM merge_batch_request WHERE batch_id IS NULL"))
	})
}

// holdClaim starts a claim of project whose transaction stays open after
// its read until release is called (at the latest when the test ends). It
// returns once the read is done; the claim's result arrives on result.
func holdClaim(t *testing.T, s *store.Store, p store.BatchClaimParams) (release func(), result <-chan claimResult) {
	t.Helper()
	read := make(chan struct{})
	rel := make(chan struct{})
	release = sync.OnceFunc(func() { close(rel) })
	t.Cleanup(release)
	res := make(chan claimResult, 1)
	p = store.ClaimAfterRead(p, func(ctx context.Context, _ *sql.Tx, _ int64, _ []store.BatchMember) error {
		close(read)
		select {
		case <-rel:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	go func() {
		c, err := s.BatchClaim(context.WithoutCancel(t.Context()), p)
		res <- claimResult{c, err}
	}()
	select {
	case <-read:
	case r := <-res:
		t.Fatalf("claim ended before its read: %+v", r)
	case <-time.After(10 * time.Second):
		t.Fatal("claim did not reach its read")
	}
	return release, res
}

type claimResult struct {
	claim store.Claim
	err   error
}

// waitForLockWait returns once some MariaDB transaction waits for a lock.
// It polls every 150 ms on purpose: InnoDB refreshes the cache behind
// information_schema.innodb_trx only when it was not read for 100 ms, so
// polling faster sees the first snapshot forever.
func waitForLockWait(t *testing.T, s *store.Store) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		time.Sleep(150 * time.Millisecond)
		if count(t, s.DB(), "SELECT COUNT(*) FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'") > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no transaction waits for a lock")
		}
	}
}

func TestBatchClaimSecondClaimWaitsForTheFirst(t *testing.T) {
	t.Parallel()
	// Two overlapping rounds (scheduler + operator) for one project: the
	// second passes the pre-check while the first is uncommitted, then its
	// slot INSERT waits (MariaDB: the uncommitted unique entry; SQLite: the
	// writer lock). It ends as the first one does.
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		waiting := func(t *testing.T) {
			if s.Dialect().IsMySQL() {
				waitForLockWait(t, s)
				return
			}
			// SQLite shows no lock waits; give the second claim time to
			// reach BEGIN IMMEDIATE. Were it slower, it would answer from
			// the pre-check instead — the same outcome, a weaker test.
			time.Sleep(200 * time.Millisecond)
		}
		t.Run("first commits: slot occupied", func(t *testing.T) {
			admitWaiting(t, s, 1, "p1", 2)
			release, first := holdClaim(t, s, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
			second := make(chan claimResult, 1)
			go func() {
				c, err := s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 1, MaxRequests: 10, LockWait: 5 * time.Second})
				second <- claimResult{c, err}
			}()
			waiting(t)
			release()
			r1, r2 := <-first, <-second
			require.NoError(t, r1.err)
			require.NoError(t, r2.err)
			require.Equal(t, store.ClaimClaimed, r1.claim.Outcome)
			require.Equal(t, store.ClaimSlotOccupied, r2.claim.Outcome)
			require.Equal(t, 1, activeBatches(t, s, 1))
		})
		t.Run("first rolls back: the second claims", func(t *testing.T) {
			admitWaiting(t, s, 2, "p2", 2)
			read := make(chan struct{})
			rel := make(chan struct{})
			release := sync.OnceFunc(func() { close(rel) })
			t.Cleanup(release)
			firstDone := make(chan error, 1)
			p := store.ClaimAfterRead(store.BatchClaimParams{ProjectID: 2, MaxRequests: 10},
				func(context.Context, *sql.Tx, int64, []store.BatchMember) error {
					close(read)
					<-rel
					return errors.New("round aborted")
				})
			go func() {
				_, err := s.BatchClaim(context.WithoutCancel(t.Context()), p)
				firstDone <- err
			}()
			<-read
			second := make(chan claimResult, 1)
			go func() {
				c, err := s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 2, MaxRequests: 10, LockWait: 5 * time.Second})
				second <- claimResult{c, err}
			}()
			waiting(t)
			release()
			require.ErrorContains(t, <-firstDone, "round aborted")
			r2 := <-second
			require.NoError(t, r2.err)
			require.Equal(t, store.ClaimClaimed, r2.claim.Outcome)
			require.Equal(t, []string{"p2-0", "p2-1"}, memberOpIDs(r2.claim.Members))
		})
	})
}

func TestBatchClaimGivesUpAfterItsLockWait(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "SQLite waits busy_timeout; TestBatchClaimBusyOnSQLite covers it")
		s.DB().SetMaxOpenConns(4)
		admitWaiting(t, s, 1, "op", 2)
		release, first := holdClaim(t, s, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
		start := time.Now()
		c, err := s.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 1, MaxRequests: 10, LockWait: time.Second})
		waited := time.Since(start)
		release()
		require.NoError(t, err, "1205 is an answer")
		require.Equal(t, store.Claim{Outcome: store.ClaimBusy}, c)
		require.GreaterOrEqual(t, waited, 900*time.Millisecond)
		require.Less(t, waited, 5*time.Second, "the claim's own wait, not the store's 10 s")
		r := <-first
		require.NoError(t, r.err)
		require.Equal(t, store.ClaimClaimed, r.claim.Outcome)

		// Every connection is back at the store's lock wait.
		ctx := t.Context()
		var conns []*sql.Conn
		for range 4 {
			conn, err := s.DB().Conn(ctx)
			require.NoError(t, err)
			conns = append(conns, conn)
			require.Equal(t, 10, count(t, conn, "SELECT @@SESSION.innodb_lock_wait_timeout"))
		}
		for _, c := range conns {
			require.NoError(t, c.Close())
		}
	})
}

func TestBatchClaimSessionLockWait(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "innodb_lock_wait_timeout is MariaDB's")
		s.DB().SetMaxOpenConns(1) // the claim's connection is the one we check afterwards
		admitWaiting(t, s, 1, "op", 1)
		var during int
		p := store.ClaimAfterRead(store.BatchClaimParams{ProjectID: 1, MaxRequests: 10, LockWait: 3 * time.Second},
			func(ctx context.Context, tx *sql.Tx, _ int64, _ []store.BatchMember) error {
				return tx.QueryRowContext(ctx, "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&during)
			})
		c, err := s.BatchClaim(t.Context(), p)
		require.NoError(t, err)
		require.Equal(t, store.ClaimClaimed, c.Outcome)
		require.Equal(t, 3, during)
		require.Equal(t, 10, count(t, s.DB(), "SELECT @@SESSION.innodb_lock_wait_timeout"), "restored")
	})
}

func TestBatchClaimBusyOnSQLite(t *testing.T) {
	t.Parallel()
	dsn := storetest.NewMigratedDatabase(t, store.DriverSQLite)
	s := storetest.OpenDSN(t, store.DriverSQLite, dsn)
	_, err := s.Migrate(t.Context())
	require.NoError(t, err)
	impatient := storetest.OpenDSN(t, store.DriverSQLite, dsn+"?_busy_timeout=100")

	admitWaiting(t, s, 1, "op", 2)
	release, first := holdClaim(t, s, store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
	c, err := impatient.BatchClaim(t.Context(), store.BatchClaimParams{ProjectID: 1, MaxRequests: 10})
	release()
	require.NoError(t, err, "SQLITE_BUSY is an answer")
	require.Equal(t, store.Claim{Outcome: store.ClaimBusy}, c)
	r := <-first
	require.NoError(t, r.err)
	require.Equal(t, store.ClaimClaimed, r.claim.Outcome)
}
