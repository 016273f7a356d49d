package store

import (
	"testing"

	"changeflow/internal/domain"
)

// TestBatchApplyParamsValidate is the plan check BatchApply makes before
// it opens a transaction: no database, so it names only what the params
// say on their own.
func TestBatchApplyParamsValidate(t *testing.T) {
	move := TransitionManyParams{FromStep: 1, ToStep: 2, Rows: []TransitionRow{{OperationID: "op-1"}}}
	tests := []struct {
		name    string
		p       BatchApplyParams
		wantErr string
	}{
		{"nothing to write is a plan", BatchApplyParams{BatchID: 1}, ""},
		{"settling to FAILED is a settlement", BatchApplyParams{SettleTo: domain.BatchFailed}, ""},
		{"settling to SUCCEEDED is a settlement", BatchApplyParams{SettleTo: domain.BatchSucceeded}, ""},
		{"settling to BLOCKED is not", BatchApplyParams{SettleTo: domain.BatchBlocked}, "settle to BLOCKED: not a settlement"},
		{"settling to RUNNING is not", BatchApplyParams{SettleTo: domain.BatchRunning}, "settle to RUNNING: not a settlement"},
		{"a valid move passes", BatchApplyParams{Moves: []TransitionManyParams{move}}, ""},
		{"a move without rows is refused", BatchApplyParams{Moves: []TransitionManyParams{move, {FromStep: 1, ToStep: 2}}}, "no operations to move"},
		{"a bad move is named before a bad settlement", BatchApplyParams{SettleTo: domain.BatchBlocked, Moves: []TransitionManyParams{{FromStep: 1, ToStep: 2}}}, "no operations to move"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Fatalf("validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
