package httpapi

import (
	"testing"
	"time"

	"changeflow/internal/domain"
	"changeflow/internal/store"
)

func TestBlockerFor(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	admitted := since.Add(-time.Minute)
	batchAt := since.Add(time.Minute)
	blocked := &store.Batch{ID: 7, Status: domain.BatchBlocked, UpdatedAt: batchAt}
	open := &store.Batch{ID: 7, Status: domain.BatchRunning, UpdatedAt: batchAt}
	for _, c := range []struct {
		name       string
		in         blockerInput
		kind       string
		detail     string
		wantSince  time.Time
		wantNoneAt bool
	}{
		{name: "a member of a blocked batch waits for a person",
			in:   blockerInput{Step: domain.StepCreateMRCreated, Status: domain.BindingMRCreated, Since: since, Batch: blocked},
			kind: blockBlockedBatch, detail: "Its batch stopped and waits for a person; the operators see it. You can withdraw this request and ask again.", wantSince: batchAt},
		{name: "a member of a batch that moves waits for its pipeline",
			in:   blockerInput{Step: domain.StepCreateMRCreated, Status: domain.BindingMRCreated, Since: since, Batch: open},
			kind: blockPipeline, detail: "Waiting for the merge request's pipeline.", wantSince: since},
		{name: "sending to the approval system",
			in:   blockerInput{Step: domain.StepCreateApprovalSubmitting, Status: domain.BindingApprovalSending, Since: since},
			kind: blockApproval, detail: "Waiting for the approval decision.", wantSince: since},
		{name: "waiting for the approval decision",
			in:   blockerInput{Step: domain.StepCreateApprovalSubmitted, Status: domain.BindingApprovalSent, Since: since},
			kind: blockApproval, detail: "Waiting for the approval decision.", wantSince: since},
		{name: "admitted and no longer queued joins the next round",
			in:   blockerInput{Step: domain.StepCreateAdmitted, Status: domain.BindingMRCreating, Since: since},
			kind: blockBatch, detail: "Waiting to join the next batch round.", wantSince: since},
		{name: "admitted and claimed by a batch",
			in: blockerInput{Step: domain.StepCreateAdmitted, Status: domain.BindingMRCreating, Since: since,
				Queue: &store.QueuePosition{BatchID: 9, AdmittedAt: admitted}},
			kind: blockBatch, detail: "Claimed by batch 9; its merge request is being prepared.", wantSince: since},
		{name: "admitted and queued counts from its admission",
			in: blockerInput{Step: domain.StepCreateAdmitted, Status: domain.BindingMRCreating, Since: since,
				Queue: &store.QueuePosition{Position: 3, AdmittedAt: admitted}},
			kind: blockBatch, detail: "Position 3 in the queue for the next batch round.", wantSince: admitted},
		{name: "pipeline running",
			in:   blockerInput{Step: domain.StepHandlePipelineRunning, Status: domain.BindingMRCreated, Since: since},
			kind: blockPipeline, detail: "Waiting for the merge request's pipeline.", wantSince: since},
		{name: "pipeline outcome pending",
			in:   blockerInput{Step: domain.StepCreatePipelinePending, Status: domain.BindingMRCreated, Since: since},
			kind: blockPipeline, detail: "Waiting for the merge request's pipeline.", wantSince: since},
		{name: "rebasing",
			in:   blockerInput{Step: domain.StepHandleRebasing, Status: domain.BindingMerging, Since: since},
			kind: blockRebase, detail: "Waiting for the merge request to be rebased.", wantSince: since},
		{name: "rebase pending",
			in:   blockerInput{Step: domain.StepHandleRebasePending, Status: domain.BindingMerging, Since: since},
			kind: blockRebase, detail: "Waiting for the merge request to be rebased.", wantSince: since},
		{name: "merged waits for the deployment",
			in:   blockerInput{Step: domain.StepHandleMerged, Status: domain.BindingMerged, Since: since},
			kind: blockDeployment, detail: "Merged; waiting for the deployment to report the change in effect.", wantSince: since},
		{name: "a merged removal waits for the deployment",
			in:   blockerInput{Step: domain.StepHandleMerged, Status: domain.BindingRevoking, Since: since},
			kind: blockDeployment, detail: "Merged; waiting for the deployment to report the change in effect.", wantSince: since},
		{name: "in effect waits on nothing",
			in: blockerInput{Step: domain.StepCalledBack, Status: domain.BindingValidated, Since: since}, wantNoneAt: true},
		{name: "a failure waits on nothing it can tell",
			in: blockerInput{Step: domain.StepHandleMergeFailed, Status: domain.BindingHandleFailed, Since: since}, wantNoneAt: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := blockerFor(c.in)
			if c.wantNoneAt {
				if got != nil {
					t.Fatalf("blocker %+v, want none", got)
				}
				return
			}
			if got == nil || got.Kind != c.kind || got.Detail != c.detail || !got.Since.Equal(c.wantSince) {
				t.Fatalf("blocker %+v, want %s %q since %s", got, c.kind, c.detail, c.wantSince)
			}
		})
	}
}

func TestBlockerReads(t *testing.T) {
	for _, c := range []struct {
		name             string
		batchID          int64
		in               blockerInput
		readBatch, queue bool
	}{
		{"a claimed member reads its batch", 7, blockerInput{Step: domain.StepCreateMRCreated, Status: domain.BindingMRCreated}, true, false},
		{"a merging member reads its batch", 7, blockerInput{Step: domain.StepHandleApproved, Status: domain.BindingMerging}, true, false},
		{"a single request reads no batch", 0, blockerInput{Step: domain.StepCreateMRCreated, Status: domain.BindingMRCreated}, false, false},
		{"an admitted request reads its queue place", 7, blockerInput{Step: domain.StepCreateAdmitted, Status: domain.BindingMRCreating}, false, true},
		{"waiting for approval reads nothing", 0, blockerInput{Step: domain.StepCreateApprovalSubmitted, Status: domain.BindingApprovalSent}, false, false},
		{"in effect reads nothing", 7, blockerInput{Step: domain.StepCalledBack, Status: domain.BindingValidated}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := followsBatch(c.batchID, c.in); got != c.readBatch {
				t.Fatalf("followsBatch = %v, want %v", got, c.readBatch)
			}
			if got := waitsInQueue(c.in); got != c.queue {
				t.Fatalf("waitsInQueue = %v, want %v", got, c.queue)
			}
		})
	}
}
