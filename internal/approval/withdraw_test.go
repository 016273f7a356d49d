package approval_test

import (
	"net/http"
	"testing"

	"changeflow/internal/approval"
	simap "changeflow/internal/sim/approval"
)

// TestWithdraw: the client's withdraw call against the simulator — a
// pending approval ends WITHDRAWN and can no longer be decided; a second
// withdraw answers it again; a decided one is a typed 409; an unknown id a
// typed 404; a failing system is a transient *Error that a retry gets past.
func TestWithdraw(t *testing.T) {
	e := newEnv(t)
	c := ctx(t)
	a, err := e.c.Submit(c, form("op-w1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a pending approval is withdrawn and can no longer be decided", func(t *testing.T) {
		got, err := e.c.Withdraw(c, a.ApprovalID, "changed my mind")
		if err != nil || got.Status != approval.Withdrawn || got.ApprovalID != a.ApprovalID || got.DecidedAt == nil {
			t.Fatalf("withdraw: %+v %v", got, err)
		}
		if _, err := e.sim.Decide(a.ApprovalID, simap.Approved, "too late"); err != simap.ErrNotPending {
			t.Fatalf("approving a withdrawn approval: %v, want ErrNotPending", err)
		}
		read, err := e.c.Get(c, a.ApprovalID)
		if err != nil || read.Status != approval.Withdrawn {
			t.Fatalf("read back: %+v %v", read, err)
		}
	})
	t.Run("withdrawing again answers the withdrawn approval", func(t *testing.T) {
		got, err := e.c.Withdraw(c, a.ApprovalID, "")
		if err != nil || got.Status != approval.Withdrawn {
			t.Fatalf("second withdraw: %+v %v", got, err)
		}
	})
	t.Run("an approval decided first is a typed 409", func(t *testing.T) {
		b, err := e.c.Submit(c, form("op-w2"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.sim.Decide(b.ApprovalID, simap.Approved, ""); err != nil {
			t.Fatal(err)
		}
		_, err = e.c.Withdraw(c, b.ApprovalID, "")
		wantErr(t, err, "Withdraw", http.StatusConflict)
		if !approval.IsAlreadyDecided(err) || approval.IsTransient(err) {
			t.Fatalf("409 is 'already decided', not transient: %v", err)
		}
		if got, _ := e.c.Get(c, b.ApprovalID); got.Status != approval.Approved {
			t.Fatalf("the decision was overwritten: %+v", got)
		}
	})
	t.Run("an unknown approval is a typed 404", func(t *testing.T) {
		_, err := e.c.Withdraw(c, "APR-999999", "")
		wantErr(t, err, "Withdraw", http.StatusNotFound)
	})
	t.Run("a failing system is transient and withdraws nothing", func(t *testing.T) {
		b, err := e.c.Submit(c, form("op-w3"))
		if err != nil {
			t.Fatal(err)
		}
		e.faults(simap.Faults{FailWithdrawsNext: simap.FailNext{Status: 503, Count: 1}})
		_, err = e.c.Withdraw(c, b.ApprovalID, "")
		wantErr(t, err, "Withdraw", http.StatusServiceUnavailable)
		if !approval.IsTransient(err) {
			t.Fatalf("503 must be transient: %v", err)
		}
		if got, _ := e.c.Get(c, b.ApprovalID); got.Status != approval.Pending {
			t.Fatalf("a failed withdraw changed the approval: %+v", got)
		}
		if got, err := e.c.Withdraw(c, b.ApprovalID, ""); err != nil || got.Status != approval.Withdrawn {
			t.Fatalf("retry: %+v %v", got, err)
		}
	})
}
