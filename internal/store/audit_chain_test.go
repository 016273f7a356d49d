package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/auditchain"
	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
)

// chainParams chains at once (no grace) with the production lookback.
var chainParams = store.AuditChainParams{Grace: 0, Lookback: 15 * time.Minute, Limit: 7}

// addSteps writes n step-history rows of operation op, created ago
// before the database clock.
func addSteps(t *testing.T, s *store.Store, op string, n int, ago time.Duration) {
	t.Helper()
	at, arg := s.Dialect().NowMinus(ago)
	for i := range n {
		mustExec(t, s.DB(), "INSERT INTO operation_step (operation_id, from_step, to_step, to_binding_status, actor, created_at) VALUES (?, ?, ?, 'MR_CREATED', 'bot', "+at+")",
			op, nilIfZero(i), 10000+i, arg)
	}
}

func nilIfZero(i int) any {
	if i == 0 {
		return nil
	}
	return 10000 + i - 1
}

// addAudits writes n audit records with keys prefix-0.., created ago
// before the database clock.
func addAudits(t *testing.T, s *store.Store, prefix string, n int, ago time.Duration) {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("%s-%d", prefix, i)
		_, err := s.AuditInsert(t.Context(), store.AuditInsertParams{Key: key, Actor: "olivia", Action: "ops.read", Resource: "r", Outcome: "OK"})
		require.NoError(t, err)
		at, arg := s.Dialect().NowMinus(ago)
		mustExec(t, s.DB(), "UPDATE audit_log SET created_at = "+at+" WHERE audit_key = ?", arg, key)
	}
}

// addApprovals records n approval decisions received ago before the
// database clock.
func addApprovals(t *testing.T, s *store.Store, n int, ago time.Duration) {
	t.Helper()
	at, arg := s.Dialect().NowMinus(ago)
	for i := range n {
		mustExec(t, s.DB(), "INSERT INTO approval_callback (delivery_key, operation_id, approval_id, result, received_at) VALUES (?, 'op-1', 'AP-1', 'APPROVED', "+at+")",
			fmt.Sprintf("d-%d", i), arg)
	}
}

// chainAll chains until nothing is left, trying again when preempted.
func chainAll(t *testing.T, s *store.Store) int {
	t.Helper()
	total := 0
	for range 10000 {
		n, err := s.AuditChainAppend(t.Context(), chainParams)
		if errors.Is(err, domain.ErrPreempted) {
			continue
		}
		require.NoError(t, err)
		if n == 0 {
			return total
		}
		total += n
	}
	t.Fatal("chaining never ended")
	return 0
}

// requireChainVerifies reads the stored chain and checks that its seqs
// run from the anchor + 1 to the head without a gap, every hash is the
// hash of its record and prevHash the one before, and every source row
// appears once; it returns the records' sources in seq order.
func requireChainVerifies(t *testing.T, s *store.Store) []string {
	t.Helper()
	st, err := s.AuditChainState(t.Context())
	require.NoError(t, err)
	entries, err := s.AuditChainPage(t.Context(), st.AnchorSeq+1, st.HeadSeq, 100000)
	require.NoError(t, err)
	require.Len(t, entries, int(st.HeadSeq-st.AnchorSeq), "no gap between the anchor and the head")
	prev := st.AnchorHash
	var sources []string
	for i, e := range entries {
		require.Equal(t, st.AnchorSeq+int64(i)+1, e.Seq)
		require.Equal(t, prev, e.PrevHash, "seq %d links to the one before", e.Seq)
		require.Equal(t, auditchain.Hash(e.PrevHash, e.Seq, e.Record), e.Hash, "seq %d's hash covers its record", e.Seq)
		prev = e.Hash
		var src string
		var id int64
		require.NoError(t, s.DB().QueryRowContext(t.Context(), "SELECT source, source_id FROM audit_chain WHERE seq = ?", e.Seq).Scan(&src, &id))
		sources = append(sources, fmt.Sprintf("%s:%d", src, id))
	}
	if len(entries) > 0 {
		require.Equal(t, st.HeadHash, prev, "the head holds the last hash")
	}
	return sources
}

func TestAuditChainChainsEveryRecordOnceWhileChainersRace(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		addSteps(t, s, "op-1", 40, time.Minute)
		addAudits(t, s, "a", 35, time.Minute)
		addApprovals(t, s, 10, time.Minute)

		// Four chainers at once, each until it finds nothing new: every
		// round has one winner, the others are preempted and try again.
		var wg sync.WaitGroup
		counts := make([]int, 4)
		for i := range counts {
			wg.Go(func() { counts[i] = chainAll(t, s) })
		}
		wg.Wait()
		require.Equal(t, 85, counts[0]+counts[1]+counts[2]+counts[3], "85 records chained in all: none twice, none lost")
		sources := requireChainVerifies(t, s)
		require.Len(t, sources, 85)
		seen, bySource := map[string]bool{}, map[string]int{}
		for _, src := range sources {
			require.False(t, seen[src], "%s chained once", src)
			seen[src] = true
			name, _, _ := strings.Cut(src, ":")
			bySource[name]++
		}
		require.Equal(t, map[string]int{"step": 40, "audit": 35, "approval": 10}, bySource)
		require.Zero(t, chainAll(t, s), "nothing is chained twice")
	})
}

func TestAuditChainChainsALateCommittedRecordLaterAndNotTwice(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		addSteps(t, s, "op-1", 3, time.Minute)
		require.Equal(t, 3, chainAll(t, s))

		// A record written two minutes ago whose transaction commits only
		// now: older than everything chained, but inside the lookback.
		addAudits(t, s, "late", 1, 2*time.Minute)
		// One written before the lookback window is out of reach (the
		// documented bound: docs/audit.md).
		addAudits(t, s, "too-late", 1, time.Hour)
		// The grace leaves out what is younger than it.
		young := chainParams
		young.Grace = time.Hour
		n, err := s.AuditChainAppend(t.Context(), young)
		require.NoError(t, err)
		require.Zero(t, n, "records younger than the grace wait")

		require.Equal(t, 1, chainAll(t, s))
		sources := requireChainVerifies(t, s)
		require.Len(t, sources, 4)
		var lateID int64
		require.NoError(t, s.DB().QueryRowContext(t.Context(), "SELECT id FROM audit_log WHERE audit_key = 'late-0'").Scan(&lateID))
		require.Equal(t, fmt.Sprintf("audit:%d", lateID), sources[3], "the late record is chained after the newer ones")
		require.Zero(t, chainAll(t, s))
	})
}

// TestAuditChainChainsARecordWhoseTransactionCommitsLate: a transaction
// writes an audit record and stays open while the chainer chains records
// written after it; once it commits, the next pass chains it. MariaDB
// only: SQLite has one writer, so there the open transaction would hold
// the chainer back instead, and a record can never commit behind one
// chained after it.
func TestAuditChainChainsARecordWhoseTransactionCommitsLate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		onlyMySQL(t, s, "SQLite serializes writers: no record can commit behind a chaining transaction")
		ctx := t.Context()
		tx, err := s.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		at, arg := s.Dialect().NowMinus(time.Minute)
		_, err = tx.ExecContext(ctx, "INSERT INTO audit_log (audit_key, actor, action, outcome, created_at) VALUES ('slow', 'olivia', 'ops.read', 'OK', "+at+")", arg)
		require.NoError(t, err)
		addAudits(t, s, "fast", 3, 30*time.Second)

		require.Equal(t, 3, chainAll(t, s), "the open transaction's record is not visible yet")
		require.NoError(t, tx.Commit())
		require.Equal(t, 1, chainAll(t, s), "chained once it committed, though it is older than what was chained")
		sources := requireChainVerifies(t, s)
		var slowID int64
		require.NoError(t, s.DB().QueryRowContext(ctx, "SELECT id FROM audit_log WHERE audit_key = 'slow'").Scan(&slowID))
		require.Equal(t, fmt.Sprintf("audit:%d", slowID), sources[3])
	})
}

func TestAuditChainRetentionMovesTheAnchorAndTheRestStillVerifies(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		addSteps(t, s, "op-1", 12, time.Minute)
		require.Equal(t, 12, chainAll(t, s))
		// seq 1..5 and 7 are old; 6 is not: retention stops at 6, so what
		// remains is one run right after the anchor. (The step rows are
		// chained in id order, so seq n copies step n; both are aged, as
		// a record 500 days old is far outside the chainer's lookback.)
		old, arg := s.Dialect().NowMinus(500 * 24 * time.Hour)
		mustExec(t, s.DB(), "UPDATE audit_chain SET occurred_at = "+old+" WHERE seq <= 5 OR seq = 7", arg)
		mustExec(t, s.DB(), "UPDATE operation_step SET created_at = "+old+" WHERE id <= 5 OR id = 7", arg)
		var hash5 string
		require.NoError(t, s.DB().QueryRowContext(t.Context(), "SELECT hash FROM audit_chain WHERE seq = 5").Scan(&hash5))

		n, err := s.AuditChainRetain(t.Context(), 400*24*time.Hour, 2)
		require.NoError(t, err)
		require.Equal(t, 2, n, "one chunk")
		n, err = s.AuditChainRetain(t.Context(), 400*24*time.Hour, 500)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		n, err = s.AuditChainRetain(t.Context(), 400*24*time.Hour, 500)
		require.NoError(t, err)
		require.Zero(t, n, "seq 6 is young and holds seq 7 back")

		st, err := s.AuditChainState(t.Context())
		require.NoError(t, err)
		require.Equal(t, int64(5), st.AnchorSeq)
		require.Equal(t, hash5, st.AnchorHash)
		require.Equal(t, 7, count(t, s.DB(), "SELECT COUNT(*) FROM audit_chain"))
		requireChainVerifies(t, s)

		// The chain goes on after retention, still verifying.
		addSteps(t, s, "op-2", 2, time.Second)
		require.Equal(t, 2, chainAll(t, s))
		require.Len(t, requireChainVerifies(t, s), 9)

		first, last, err := s.AuditChainRange(t.Context(), time.Now().Add(-1000*24*time.Hour), time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, []int64{6, 14}, []int64{first, last})
	})
}
