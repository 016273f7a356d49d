package domain_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"changeflow/internal/domain"
)

func TestTransitionTablesPrint(t *testing.T) {
	t.Log("\n" + domain.BindingTable())
	t.Log("\n" + domain.StepTable())
}

func TestEveryBindingPairIsCheckedAgainstTheTable(t *testing.T) {
	from := append([]domain.BindingStatus{""}, domain.BindingStatuses...)
	for _, f := range from {
		for _, to := range domain.BindingStatuses {
			err := domain.CheckBinding(f, to)
			legal := slices.Contains(domain.BindingNext(f), to)
			if legal != (err == nil) {
				t.Fatalf("%q → %q: legal=%v err=%v", f, to, legal, err)
			}
			if err != nil {
				var ite *domain.IllegalTransitionError
				if !errors.As(err, &ite) || !errors.Is(err, domain.ErrIllegalTransition) || ite.Layer != "binding" {
					t.Fatalf("%q → %q: want *IllegalTransitionError, got %v", f, to, err)
				}
			}
		}
	}
	if domain.CheckBinding(domain.BindingMerged, "NOPE") == nil {
		t.Fatal("an unknown status is refused")
	}
}

func TestBatchTransitions(t *testing.T) {
	all := []domain.BatchStatus{domain.BatchRunning, domain.BatchSucceeded, domain.BatchFailed, domain.BatchBlocked}
	legal := map[[2]domain.BatchStatus]bool{
		{domain.BatchRunning, domain.BatchBlocked}:   true,
		{domain.BatchRunning, domain.BatchSucceeded}: true,
		{domain.BatchRunning, domain.BatchFailed}:    true,
		{domain.BatchBlocked, domain.BatchSucceeded}: true,
		{domain.BatchBlocked, domain.BatchFailed}:    true,
		{domain.BatchBlocked, domain.BatchRunning}:   true, // an operator's retrigger
	}
	for _, from := range all {
		for _, to := range all {
			want := legal[[2]domain.BatchStatus{from, to}]
			if got := domain.BatchTransitionLegal(from, to); got != want {
				t.Errorf("%s → %s: legal=%v, want %v", from, to, got, want)
			}
		}
	}
}

func TestEveryStepPairIsCheckedAgainstTheTable(t *testing.T) {
	from := append([]domain.StepStatus{domain.StepNone}, domain.Steps()...)
	illegal := 0
	for _, f := range from {
		for _, to := range domain.Steps() {
			err := domain.CheckStep(f, to)
			legal := f == to || slices.Contains(domain.StepNext(f), to)
			if legal != (err == nil) {
				t.Fatalf("%v → %v: legal=%v err=%v", f, to, legal, err)
			}
			if err != nil {
				illegal++
				if !errors.Is(err, domain.ErrIllegalTransition) {
					t.Fatalf("%v → %v: %v", f, to, err)
				}
			}
		}
	}
	if illegal == 0 {
		t.Fatal("the table refuses nothing")
	}
	if domain.CheckStep(domain.StepCreateStarted, 99999) == nil {
		t.Fatal("an unknown step is refused")
	}
}

func TestTableRowsNameOnlyKnownStates(t *testing.T) {
	for _, f := range domain.Steps() {
		for _, to := range domain.StepNext(f) {
			if !to.Valid() || to == f {
				t.Fatalf("step row %v lists %v", f, to)
			}
		}
	}
	for _, f := range domain.BindingStatuses {
		for _, to := range domain.BindingNext(f) {
			if !to.Valid() || to == f {
				t.Fatalf("binding row %v lists %v", f, to)
			}
		}
	}
}

func TestEveryStepIsReachableAndEveryStopHasAWayOut(t *testing.T) {
	reached := map[domain.StepStatus]bool{}
	queue := []domain.StepStatus{domain.StepNone}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, n := range domain.StepNext(s) {
			if !reached[n] {
				reached[n] = true
				queue = append(queue, n)
			}
		}
	}
	for _, s := range domain.Steps() {
		if !reached[s] {
			t.Errorf("%v is unreachable from a new request", s)
		}
		if s.Stopped() && len(domain.StepNext(s)) == 0 {
			t.Errorf("stopped step %v has no way out (retrigger)", s)
		}
	}
}

func TestEntryStates(t *testing.T) {
	if err := domain.CheckEntry(domain.StepCreateStarted, domain.BindingMRCreating); err != nil {
		t.Fatal(err)
	}
	if err := domain.CheckEntry(domain.StepCreateApprovalSubmitting, domain.BindingApprovalSending); err != nil {
		t.Fatal(err)
	}
	if err := domain.CheckEntry(domain.StepHandleMerged, domain.BindingMRCreating); err == nil {
		t.Fatal("a request cannot start merged")
	}
	if err := domain.CheckEntry(domain.StepCreateStarted, domain.BindingMerged); err == nil {
		t.Fatal("a binding cannot start merged")
	}
}

// TestDocsShowTheGeneratedTables keeps docs/workflow.md equal to the maps.
func TestDocsShowTheGeneratedTables(t *testing.T) {
	doc, err := os.ReadFile("../../docs/workflow.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, table := range map[string]string{
		"binding table": domain.BindingTable(), "step table": domain.StepTable(), "step list": domain.StepList(),
	} {
		if !strings.Contains(string(doc), table) {
			t.Errorf("docs/workflow.md does not contain the current %s; regenerate with\n"+
				"  go test ./internal/domain -run TestDocsShowTheGeneratedTables -v\nwant:\n%s", name, table)
		}
	}
}
