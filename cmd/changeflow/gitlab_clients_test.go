package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"changeflow/internal/gitlab"
)

// TestPreviewTrafficCannotOpenTheWorkflowsGitLabBreaker performs the
// attack of issue 13 finding 14 on the wiring: users asking for previews
// while GitLab answers them 500 (or while they make it slow). The
// preview's client opens its own breaker; the workflow's client still
// reaches GitLab.
func TestPreviewTrafficCannotOpenTheWorkflowsGitLabBreaker(t *testing.T) {
	var workflowCalls, previewCalls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The preview asks for the file a user named; the workflow for
		// another. Both fail, as GitLab does when it is struggling.
		if strings.Contains(r.URL.EscapedPath(), "preview-target") {
			previewCalls.Add(1)
		} else {
			workflowCalls.Add(1)
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(ts.Close)
	settings := func() gitlab.Settings {
		return gitlab.Settings{BaseURL: ts.URL + "/", Tokens: gitlab.Bots{Committer: "t"}, Timeout: 5 * time.Second,
			BreakerFailures: 3, BreakerOpenFor: time.Hour}
	}
	wf, preview := gitlabClients(settings, slog.New(slog.DiscardHandler), nil)
	ctx := context.Background()
	for range 10 {
		_, _ = preview.GetFile(ctx, "1", "bindings/preview-target.yaml", "main")
	}
	if n := previewCalls.Load(); n != 3 {
		t.Fatalf("preview reached GitLab %d times; its own breaker should have opened after 3", n)
	}
	_, err := preview.GetFile(ctx, "1", "bindings/preview-target.yaml", "main")
	var ge *gitlab.Error
	if !errors.As(err, &ge) || !ge.BreakerOpen {
		t.Fatalf("preview after 10 failures: %v, want its breaker open", err)
	}
	_, err = wf.GetFile(ctx, "1", "bindings/workflow-target.yaml", "main")
	if errors.As(err, &ge) && ge.BreakerOpen {
		t.Fatal("the workflow's breaker is open after preview traffic alone")
	}
	if workflowCalls.Load() != 1 {
		t.Fatalf("the workflow's call did not reach GitLab (%d calls)", workflowCalls.Load())
	}
}
