package store

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/go-sql-driver/mysql"
)

// On a Galera cluster two nodes execute conflicting transactions without
// seeing each other; the cluster orders their write sets and the one that
// certifies second is aborted, at COMMIT or at its next statement, with
// InnoDB's deadlock error 1213 ("certification failure" / "brute-force
// abort" in wsrep's counters) — never the 1062 a single server would give
// at the INSERT. Like an InnoDB deadlock, the transaction is gone and the
// fix is to run it again; unlike one, the winner's write may not yet be
// applied on the loser's node, so an immediate re-run can read the old
// state and lose a second time. Hence a jittered, growing pause between
// attempts: by the second or third the winner is applied (measured on
// loopback: well under 10 ms) and the re-run reads it — a duplicate key
// becomes the same answer a single node gives, a guarded write sees the
// row moved and is pre-empted.

// conflictAttempts bounds every re-run after 1213: one conflict is
// routine, several in a row mean something keeps colliding, and the
// caller hears domain.ErrBusy (503 RETRY_LATER at the HTTP edge).
const conflictAttempts = 5

// Pause before re-run n (n ≥ 1): uniform in [0, base·2^(n-1)], capped,
// so that two losers of the same conflict do not collide again in step.
const (
	conflictBackoffBase = 5 * time.Millisecond
	conflictBackoffMax  = 200 * time.Millisecond
)

// retryConflict runs fn, and again while it fails with a conflict the
// database resolved by rolling fn's transaction back (isConflict), at most
// conflictAttempts times in all, pausing with jitter between attempts. fn
// must be safe to run again: it starts its own transaction (or is one
// autocommit statement) and only assigns, never accumulates, results it
// shares with the caller. The last error is returned as is (translate maps
// 1213 to domain.ErrBusy); a done ctx ends the retries with the error
// that was current.
func retryConflict(ctx context.Context, fn func() error) error {
	var err error
	for attempt := range conflictAttempts {
		if attempt > 0 {
			t := time.NewTimer(conflictPause(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
		if err = fn(); !isConflict(err) {
			return err
		}
	}
	return err
}

// conflictPause is the jittered pause before re-run n.
func conflictPause(n int) time.Duration {
	ceil := min(conflictBackoffBase<<(n-1), conflictBackoffMax)
	return rand.N(ceil + 1)
}

// isConflict reports whether err is InnoDB's deadlock error 1213, which
// is also how Galera reports a lost certification. translate maps it to
// domain.ErrBusy together with the lock wait timeout; only here does the
// difference matter: a 1205 is not re-run, because the lock holder is slow
// and waiting again would only double the wait.
func isConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == mysqlErrLockDeadlock
}
