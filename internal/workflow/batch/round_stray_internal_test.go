package batch

import (
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// TestStrayOf: an open MR on a batch branch is a stray when its batch
// ended or records another MR; the batch's own MR, one an active batch
// may still record, and another project's batch are left alone.
func TestStrayOf(t *testing.T) {
	const project, mr = 1, 7
	for _, c := range []struct {
		name string
		b    store.Batch
		want bool
	}{
		{"the active batch's own MR", store.Batch{ProjectID: project, Status: domain.BatchRunning, MRIID: mr}, false},
		{"an active batch with no MR yet may still record it", store.Batch{ProjectID: project, Status: domain.BatchRunning}, false},
		{"a blocked batch's own MR", store.Batch{ProjectID: project, Status: domain.BatchBlocked, MRIID: mr}, false},
		{"an active batch that records another MR", store.Batch{ProjectID: project, Status: domain.BatchRunning, MRIID: 8}, true},
		{"a batch that succeeded with another MR", store.Batch{ProjectID: project, Status: domain.BatchSucceeded, MRIID: 8}, true},
		{"a batch that ended with this very MR recorded", store.Batch{ProjectID: project, Status: domain.BatchFailed, MRIID: mr}, true},
		{"a batch that ended without an MR", store.Batch{ProjectID: project, Status: domain.BatchSucceeded}, true},
		{"another project's batch", store.Batch{ProjectID: 2, Status: domain.BatchFailed, MRIID: 8}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := strayOf(c.b, project, mr); got != c.want {
				t.Fatalf("strayOf(%+v, %d, %d) = %v, want %v", c.b, project, mr, got, c.want)
			}
		})
	}
}
