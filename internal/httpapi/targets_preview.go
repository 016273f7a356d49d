package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/identity"
)

// previewRef is the branch the preview reads: the config repo's default
// branch in every deployment we know (the simulator's is main). A
// configurable ref can come with the workflow, which needs the same.
const previewRef = "main"

// previewData is the change a request would make to the target's binding
// file, and the line diff. With scope "own" (everyone) Before and After
// hold only the caller's own entry — as it is on previewRef (none: "") and
// as the request would write it — and OtherHolders counts everyone else's
// entries: the file names every holder, their expiry and operationId,
// which is nobody else's business. With scope "file" (asked for with
// ?scope=file by a caller holding the ops read rules) they are the whole
// file before and after.
type previewData struct {
	TargetKey    string             `json:"targetKey"`
	Project      string             `json:"project"`
	File         string             `json:"file"`
	Ref          string             `json:"ref"`
	Scope        string             `json:"scope"`
	Entry        previewEntry       `json:"entry"`
	OtherHolders int                `json:"otherHolders"`
	Before       string             `json:"before"`
	After        string             `json:"after"`
	Diff         []bindingfile.Line `json:"diff"`
}

// Preview scopes.
const (
	previewScopeOwn  = "own"
	previewScopeFile = "file"
)

// previewEntry is the caller's entry as the request would write it (the
// operationId is not known before submission).
type previewEntry struct {
	Subject   string    `json:"subject"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// handlePreview is GET /api/targets/{key}/preview[?days=N]: a read-only
// preview of the change a request would make. A target that is not
// configured is 404 NOT_FOUND, as everywhere else in the API: it is not a
// failure to make a preview but a wrong address, and "{}" for it let a
// client mistake a typo for GitLab being down. Otherwise it is advisory,
// so on any failure — bad days, GitLab down or slow, no project
// configured, a binding file that does not parse — it answers 200 OK with
// empty data ({}) and logs why: a preview never blocks a user
// from submitting, and the submission itself validates properly.
func (s *Server) handlePreview() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := identity.FromContext(r.Context())
		key := r.PathValue("key")
		if cfg := s.deps.Business.Config; cfg != nil {
			if _, ok := cfg.Current().Target(key); !ok {
				writeError(w, r, s.deps.Logger, domain.Errorf(domain.CodeNotFound, "There is no target with this name.",
					"preview: target %q is not configured", key))
				return
			}
		}
		// The whole file only for operators who ask for it: the permission
		// check costs a round trip, so callers who do not ask do not pay it.
		// A caller without the rules gets their own view, not a 403 — a
		// preview degrades, it never refuses.
		full := false
		if r.URL.Query().Get("scope") == previewScopeFile {
			_, err := s.checkRules(r.Context(), config.RouteOpsRequestGet, res.Identity.Account)
			full = err == nil
		}
		data, err := s.preview(r.Context(), key, r.URL.Query().Get("days"), res.Identity.Account, full)
		if err != nil {
			s.deps.Logger.Warn("preview degraded to empty data", "target", key, "subject", res.Identity.Account, "err", err)
			respond(w, s.deps.Logger, domain.CodeOK, struct{}{})
			return
		}
		respond(w, s.deps.Logger, domain.CodeOK, data)
	})
}

func (s *Server) preview(ctx context.Context, key, daysParam, subject string, full bool) (previewData, error) {
	b := s.deps.Business
	if b.Config == nil || b.Files == nil {
		return previewData{}, errors.New("no configuration source or file reader wired")
	}
	snap := b.Config.Current()
	t, ok := snap.Target(key)
	if !ok {
		return previewData{}, fmt.Errorf("unknown target %q", key)
	}
	days := t.MaxDays
	if daysParam != "" {
		n, err := strconv.Atoi(daysParam)
		if err != nil || n < 1 || n > t.MaxDays {
			return previewData{}, fmt.Errorf("days %q not in 1..%d", daysParam, t.MaxDays)
		}
		days = n
	}
	project := previewProject(snap)
	if project == "" {
		return previewData{}, errors.New("gitlab.projects is empty")
	}
	var before []byte
	f, err := b.Files.GetFile(ctx, project, t.File, previewRef)
	var ge *gitlab.Error
	switch {
	case err == nil:
		before = f.Content
	case errors.As(err, &ge) && ge.Status == http.StatusNotFound:
		// The first request for a target creates its file.
	default:
		return previewData{}, fmt.Errorf("read %s: %w", t.File, err)
	}
	cur, err := bindingfile.Parse(before)
	if err != nil {
		return previewData{}, fmt.Errorf("parse %s: %w", t.File, err)
	}
	// The entry the request would write: a renewal of the access the file
	// holds extends its end (domain.RenewalExpiry, as the submission
	// decides), a new grant counts from now — on the approve-first flow
	// "if approved now", its days counting from the approval.
	var current time.Time
	if own, ok := cur.Entry(subject); ok {
		current = own.ExpiresAt
	}
	entry := bindingfile.Entry{Subject: subject, ExpiresAt: domain.RenewalExpiry(s.now(), current, days, t.MaxDays)}
	next := cur.With(entry)
	e, _ := next.Entry(subject)
	scope, after := previewScopeFile, next.Marshal()
	if !full {
		scope, before, after = previewScopeOwn, nil, bindingfile.File{}.With(e).Marshal()
		if own, ok := cur.Entry(subject); ok {
			before = bindingfile.File{}.With(own).Marshal()
		}
	}
	return previewData{
		TargetKey: t.Key, Project: project, File: t.File, Ref: previewRef, Scope: scope,
		Entry:        previewEntry{Subject: subject, ExpiresAt: e.ExpiresAt},
		OtherHolders: len(cur.Without(subject).Entries),
		Before:       string(before), After: string(after),
		Diff: bindingfile.Diff(before, after),
	}, nil
}

// previewProject is the first entry of gitlab.projects, as GitLab's :id
// (a numeric id or a path).
func previewProject(snap *config.Snapshot) string {
	ps, _ := snap.List(config.KeyGitLabProjects)
	if len(ps) == 0 {
		return ""
	}
	return ps[0]
}
