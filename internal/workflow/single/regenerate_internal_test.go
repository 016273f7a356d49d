package single

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"changeflow/internal/bindingfile"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/engine"
	"changeflow/internal/gitlab"
	simgl "changeflow/internal/sim/gitlab"
	"changeflow/internal/store"
	"changeflow/internal/workflow/flow"
)

// commitCounter counts the commit POSTs that leave the adapter.
type commitCounter struct{ n *atomic.Int32 }

func (c commitCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/repository/commits") {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRegenerateRunTwiceCommitsOnce: regenerate run twice from
// HANDLE_REBASING — as after a crash between GitLab's commit and the
// step's own write (the progress write is dropped here) — commits once:
// the second run finds the branch's head is already this request's edit
// on main's current head. Then, once the MR's pipeline is known, the
// polling half hands over to approve. Against the GitLab simulator over
// HTTP through the real adapter.
func TestRegenerateRunTwiceCommitsOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sim, err := simgl.New(simgl.Options{MergeabilityDelay: time.Millisecond, PipelineStartDelay: time.Millisecond,
		PipelineDuration: 5 * time.Millisecond, RebaseDuration: time.Millisecond})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/gitlab/", http.StripPrefix("/gitlab", sim))
	ts := httptest.NewServer(mux)
	t.Cleanup(func() { ts.Close(); _ = sim.Close() })

	mgr, err := config.Load(ctx, config.Options{Overlay: map[string]any{
		"gitlab.baseURL": ts.URL + "/gitlab/", "gitlab.projects": []any{"1"},
		"gitlab.tokens.committer":        "local-committer-token",
		"polling.pipeline.shortInterval": "10ms", "polling.pipeline.timeout": "5s",
		"targets": map[string]any{"payments-db": map[string]any{"accessMode": "OPEN", "batching": false, "maxDays": 30}},
	}})
	require.NoError(t, err)
	snap := mgr.Current()
	_ = mgr.Close()
	var commits atomic.Int32
	gl := gitlab.New(gitlab.Options{Settings: func() gitlab.Settings { return gitlab.SettingsFromConfig(snap) },
		Transport: commitCounter{&commits}})
	d := Steps{Env: flow.Env{GitLab: gl, Config: func() *config.Snapshot { return snap }}}

	const path = "bindings/payments-db.yaml"
	expires := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	op := store.Operation{OperationID: "op-twice", Subject: "bea", TargetKey: "payments-db", ProjectID: 1,
		Flow: flow.FlowLegacy, Step: int(domain.StepHandleRebasing), ExpiresAt: expires}
	entry := func(subject, id string) bindingfile.File {
		return bindingfile.File{}.With(bindingfile.Entry{Subject: subject, ExpiresAt: expires, OperationID: id})
	}
	// The request's MR, then main takes another request's entry in the
	// same new file: the MR conflicts (add/add).
	branch := flow.BranchName(op.OperationID)
	_, err = gl.CreateCommit(ctx, "1", gitlab.CommitRequest{Branch: branch, StartBranch: "main", Message: "bea\n\n" + flow.Trailer(op.OperationID),
		Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: path, Content: string(entry("bea", op.OperationID).Marshal())}}})
	require.NoError(t, err)
	mr, err := gl.CreateMR(ctx, "1", gitlab.CreateMRRequest{SourceBranch: branch, TargetBranch: "main", Title: "bea"})
	require.NoError(t, err)
	op.MRIID = mr.IID
	_, err = gl.CreateCommit(ctx, "1", gitlab.CommitRequest{Branch: "main", Message: "amy",
		Actions: []gitlab.FileAction{{Action: gitlab.ActionCreate, Path: path, Content: string(entry("amy", "op-amy").Marshal())}}})
	require.NoError(t, err)
	main, err := gl.GetBranch(ctx, "1", "main")
	require.NoError(t, err)

	var progress []engine.Transition
	run := func(o store.Operation) engine.Outcome {
		t.Helper()
		w := engine.Work{Operation: o, Action: flow.ActionRegenerate, Attempt: 1, Now: time.Now()}.
			WithProgress(func(_ context.Context, tr engine.Transition) error { progress = append(progress, tr); return nil })
		out, err := d.regenerate(ctx, w)
		require.NoError(t, err)
		return out
	}

	before := commits.Load()
	for i := range 2 {
		out := run(op)
		require.Equal(t, engine.OutcomeWait, out.Kind(), "run %d: %s", i+1, out.Reason())
		require.Equal(t, before+1, commits.Load(), "run %d: exactly one commit in all", i+1)
		require.Len(t, progress, i+1)
		require.Equal(t, domain.StepHandlePipelineRunning, progress[i].Step)
		require.True(t, strings.HasPrefix(progress[i].Note, regeneratedNote), progress[i].Note)
	}

	head, err := gl.GetBranch(ctx, "1", branch)
	require.NoError(t, err)
	c, err := gl.GetCommit(ctx, "1", head.CommitID)
	require.NoError(t, err)
	require.Equal(t, []string{main.CommitID}, c.ParentIDs, "one commit on main's head")
	require.True(t, flow.HasTrailer(c.Message, op.OperationID))
	f, err := gl.GetFile(ctx, "1", path, head.CommitID)
	require.NoError(t, err)
	parsed, err := bindingfile.Parse(f.Content)
	require.NoError(t, err)
	require.Len(t, parsed.Entries, 2, "both entries: %s", f.Content)

	// The polling half: the same action, now in HANDLE_PIPELINE_RUNNING.
	op.Step = int(domain.StepHandlePipelineRunning)
	var out engine.Outcome
	require.Eventually(t, func() bool { out = run(op); return out.Kind() == engine.OutcomeDone }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, flow.ActionApprove, out.Next())
	require.Equal(t, domain.StepHandleStarted, out.Transition().Step)
	require.Equal(t, before+1, commits.Load(), "polling never commits")
}
