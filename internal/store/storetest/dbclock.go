package storetest

import (
	"strings"
	"testing"
	"time"

	"changeflow/internal/store"
)

// The database clock, not the test's, decides what a claim takes and what a
// round resumes: store.BatchClaim takes requests admitted strictly before
// the database's "now", and store.BatchResumable batches created before
// "now − minAge". SQLite's clock has millisecond precision, so a claim in
// the admission's millisecond rightly finds nothing, and a sleep of a few
// milliseconds only makes that unlikely on a loaded machine. These helpers
// wait on that state instead (the rows stay as production wrote them).

// DBClockWait is how long the helpers wait for the database clock.
const DBClockWait = 10 * time.Second

// UntilAdmittedBeforeNow waits until no admission of ids (each already
// admitted) is at or after the database clock's "now": a claim issued
// afterwards sees every one of them as admitted before its "now". A row
// already claimed (or gone, its batch settled) no longer matters; only the
// clock is waited on.
func UntilAdmittedBeforeNow(t testing.TB, st *store.Store, ids ...string) {
	t.Helper()
	q := "SELECT COUNT(*) FROM merge_batch_request WHERE operation_id IN (?" + strings.Repeat(", ?", len(ids)-1) +
		") AND created_at >= " + st.Dialect().Now()
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	UntilCount(t, st, "admissions before the database clock's now", q, 0, args...)
}

// UntilBatchOlder waits until batch id's created_at is older than age by
// the database clock (what BatchResumable compares against).
func UntilBatchOlder(t testing.TB, st *store.Store, id int64, age time.Duration) {
	t.Helper()
	before, arg := st.Dialect().NowMinus(age)
	q := "SELECT COUNT(*) FROM merge_batch WHERE id = ? AND created_at < " + before
	UntilCount(t, st, "batch older than "+age.String(), q, 1, id, arg)
}

// UntilCount polls the COUNT(*) query q (args bound to its "?") until it
// answers want, failing t after DBClockWait; what names the wait.
func UntilCount(t testing.TB, st *store.Store, what, q string, want int, args ...any) {
	t.Helper()
	deadline := time.Now().Add(DBClockWait)
	for {
		var n int
		if err := st.DB().QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: COUNT(*) is %d, want %d after %s", what, n, want, DBClockWait)
		}
		time.Sleep(time.Millisecond)
	}
}
