package workflow_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"changeflow/internal/domain"
	"changeflow/internal/store"
	"changeflow/internal/store/storetest"
	"changeflow/internal/workflow/flow"
)

// developerToken is the simulator's person with push rights to the config
// repository (docs/simulators.md): the actor of the foreign-head attacks.
const developerToken = "local-developer-token"

// asDeveloper calls the GitLab simulator's REST API as the developer
// account and decodes the answer into out (may be nil).
func (w *world) asDeveloper(method, path string, body any, out any) int {
	w.t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(w.t.Context(), method, w.simTS.URL+"/gitlab/api/v4/projects/1"+path, bytes.NewReader(raw))
	require.NoError(w.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("PRIVATE-TOKEN", developerToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		require.NoError(w.t, json.Unmarshal(b, out), "%s %s: %s", method, path, b)
	}
	return resp.StatusCode
}

// sneak commits bindings/sneak.yaml (and, with extra, a mallory entry in
// file) as the developer on branch — from main when fromMain, else on the
// branch's head — through the commits API, as a person with push rights
// would.
func (w *world) sneak(branch string, fromMain bool) string {
	w.t.Helper()
	body := map[string]any{
		"branch": branch, "commit_message": "add a file nobody reviews",
		"actions": []map[string]any{{"action": "create", "file_path": "bindings/sneak.yaml",
			"content": "- subject: \"mallory\"\n  expiresAt: \"2099-01-01T00:00:00Z\"\n  operationId: \"forged\"\n"}},
	}
	if fromMain {
		body["start_branch"] = "main"
	}
	var c struct {
		ID string `json:"id"`
	}
	code := w.asDeveloper(http.MethodPost, "/repository/commits", body, &c)
	require.Equal(w.t, http.StatusCreated, code, "the developer's commit on %s", branch)
	return c.ID
}

// nothingForeignOnMain: main has no sneak.yaml and no mallory entry in any
// binding file, and every file holds exactly the VALIDATED requests of ids.
func (w *world) nothingForeignOnMain(ids ...string) {
	w.t.Helper()
	code := w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/repository/files/bindings%2Fsneak.yaml?ref=main", nil, nil)
	require.Equal(w.t, http.StatusNotFound, code, "bindings/sneak.yaml must never reach main")
	for _, target := range []string{tSingle, tBatched, tOther} {
		require.NotContains(w.t, w.fileOnMain(target), "mallory", "no foreign entry in %s", target)
	}
	w.filesExact(ids...)
}

// securityEvents are the security events recorded for resource.
func (w *world) securityEvents(resource string) []store.AuditRecord {
	w.t.Helper()
	recs, err := w.st.AuditListByResource(w.t.Context(), resource, 100)
	require.NoError(w.t, err)
	var out []store.AuditRecord
	for _, r := range recs {
		if strings.HasPrefix(r.Action, "security.") {
			out = append(out, r)
		}
	}
	return out
}

// mrsOn lists the MRs of a branch, any state.
func (w *world) mrsOn(branch string) []map[string]any {
	w.t.Helper()
	var out []map[string]any
	w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests?state=all&source_branch="+urlQuery(branch), nil, &out)
	return out
}

// TestForeignPreMadeSingleBranchIsNotBuiltOn: a person with push rights
// commits bindings/sneak.yaml to changeflow/op-<id> before anyone asks;
// then the request with that operationId is submitted. changeflow does not
// build on that branch: a security event foreign_branch, the request built
// on changeflow/r2/op-<id> from main and in effect, nothing of the
// person's on main. Before the check, create_mr pinned to the branch's
// head and the merged MR carried sneak.yaml.
func TestForeignPreMadeSingleBranchIsNotBuiltOn(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		const id = "op-foreign-branch"
		first := flow.BranchName(id)
		w.sneak(first, true)

		w.submit(id, "alice", tSingle, true)
		w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide(id, "approve")
		o, _ := w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.nothingForeignOnMain(id)

		fresh := flow.FreshBranchName(first, 2)
		require.Equal(t, fresh, o.Branch, "built on a fresh branch of changeflow's own")
		require.Empty(t, w.mrsOn(first), "no MR on the person's branch")
		mrs := w.mrsOn(fresh)
		require.Len(t, mrs, 1)
		require.Equal(t, "merged", mrs[0]["state"])
		evs := w.securityEvents(id)
		require.Len(t, evs, 1, "one security event")
		require.Equal(t, "security.foreign_branch", evs[0].Action)
		require.Contains(t, evs[0].Params, "Dev Eloper")
		w.validatedOnce(id)
	})
}

// TestForeignPreMadeSingleMRIsNotAdopted: the person also opens an MR from
// that branch. create_mr finds it by the branch name but does not adopt an
// MR the committer bot did not open (security event foreign_mr), builds on
// a fresh branch, and leaves the person's MR alone.
func TestForeignPreMadeSingleMRIsNotAdopted(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		const id = "op-foreign-mr"
		first := flow.BranchName(id)
		w.sneak(first, true)
		code := w.asDeveloper(http.MethodPost, "/merge_requests", map[string]any{
			"source_branch": first, "target_branch": "main", "title": "changeflow: bind alice to payments-db",
		}, nil)
		require.Equal(t, http.StatusCreated, code)

		w.submit(id, "alice", tSingle, false)
		w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		w.decide(id, "approve")
		o, _ := w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.nothingForeignOnMain(id)

		require.Equal(t, flow.FreshBranchName(first, 2), o.Branch)
		theirs := w.mrsOn(first)
		require.Len(t, theirs, 1)
		require.Equal(t, "opened", theirs[0]["state"], "the person's MR is left alone")
		evs := w.securityEvents(id)
		require.NotEmpty(t, evs)
		require.Equal(t, "security.foreign_mr", evs[0].Action)
		w.validatedOnce(id)
	})
}

// TestForeignPushOntoAnOpenMRIsNeverApproved: in the legacy flow the MR is
// open while the request waits for its approval; the person pushes
// sneak.yaml onto its source branch meanwhile. The head check before the
// bots' approval finds the person's commit: not approved, not merged, the
// MR closed, a security event foreign_head, and the request rebuilt from
// a fresh read on changeflow/r2/op-<id>, in effect without the file.
// Before the check, both bots approved the pushed head and it merged.
func TestForeignPushOntoAnOpenMRIsNeverApproved(t *testing.T) {
	t.Parallel()
	storetest.OnSQLite(t, func(t *testing.T, st *store.Store) {
		w := newWorld(t, st)
		const id = "op-foreign-push"
		w.submit(id, "alice", tSingle, false)
		o, _ := w.until(id, "approval sent", at(domain.StepCreateApprovalSubmitted, domain.BindingApprovalSent))
		first := flow.BranchName(id)
		require.Equal(t, first, o.Branch)
		pushed := w.sneak(first, false)

		w.decide(id, "approve")
		o, _ = w.until(id, "validated", at(domain.StepCalledBack, domain.BindingValidated))
		w.nothingForeignOnMain(id)

		fresh := flow.FreshBranchName(first, 2)
		require.Equal(t, fresh, o.Branch)
		old := w.mrsOn(first)
		require.Len(t, old, 1)
		require.Equal(t, "closed", old[0]["state"], "the MR with the pushed head is closed, not merged")
		var approvals struct {
			ApprovedBy []any `json:"approved_by"`
		}
		w.simJSON(http.MethodGet, "/gitlab/api/v4/projects/1/merge_requests/"+jsonNumber(old[0]["iid"])+"/approvals", nil, &approvals)
		require.Empty(t, approvals.ApprovedBy, "no bot approved the pushed head")
		evs := w.securityEvents(id)
		require.Len(t, evs, 1)
		require.Equal(t, "security.foreign_head", evs[0].Action)
		require.Contains(t, evs[0].Params, pushed)
		w.validatedOnce(id)
	})
}

// jsonNumber is a decoded JSON number as a path segment.
func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
