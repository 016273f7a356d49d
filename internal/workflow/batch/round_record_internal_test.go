package batch

import (
	"testing"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

// TestMRClaimOf: a batch read again after the round's look-up went stale
// decides whether the round's MR is the one to record, already recorded,
// or nobody's.
func TestMRClaimOf(t *testing.T) {
	for _, c := range []struct {
		name string
		now  store.Batch
		iid  int64
		want mrClaim
	}{
		{"running, no MR yet, none opened: open one", store.Batch{Status: domain.BatchRunning}, 0, mrFree},
		{"running, no MR yet: record this one", store.Batch{Status: domain.BatchRunning}, 7, mrFree},
		{"blocked, no MR yet: still this round's", store.Batch{Status: domain.BatchBlocked}, 7, mrFree},
		{"another round recorded this same MR", store.Batch{Status: domain.BatchRunning, MRIID: 7}, 7, mrSame},
		{"the same MR on a batch that ended since", store.Batch{Status: domain.BatchSucceeded, MRIID: 7}, 7, mrSame},
		{"another MR recorded before this one was opened", store.Batch{Status: domain.BatchRunning, MRIID: 7}, 0, mrTaken},
		{"another MR recorded", store.Batch{Status: domain.BatchRunning, MRIID: 8}, 7, mrTaken},
		{"ended without an MR (nothing left to remove)", store.Batch{Status: domain.BatchSucceeded}, 7, mrTaken},
		{"settled failed before its MR was opened", store.Batch{Status: domain.BatchFailed}, 0, mrTaken},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := mrClaimOf(c.now, c.iid); got != c.want {
				t.Fatalf("mrClaimOf(%+v, %d) = %d, want %d", c.now, c.iid, got, c.want)
			}
		})
	}
}
