package gitlab

import (
	"context"
	"testing"
)

// TestCheckRuleOutlivesACanceledRequest: the check pipeline's verdict does
// not depend on the API call that triggered it. A client that cancels its
// request (deadline, shutdown) while the simulator checks the MR used to
// fail a valid MR's pipeline with "target branch missing" / "no merge base".
func TestCheckRuleOutlivesACanceledRequest(t *testing.T) {
	e := newEnv(t)
	iid := e.openMR("valid", map[string]string{"bindings/app.yaml": binding("amy")})
	p, err := e.sim.project("1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.mu.Lock()
	reason := e.sim.checkRule(ctx, p, p.mr(iid))
	p.mu.Unlock()
	if reason != "" {
		t.Fatalf("a valid MR's check failed under a canceled request: %q", reason)
	}
}
