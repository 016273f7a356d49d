package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/config"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
)

// Expired entries changeflow does not own (docs/api.md, "Operations
// endpoints"): changeflow removes only the entries it wrote (an entry
// names the operation that wrote it, docs/flows/lifecycle.md "Revocation (access
// ends)"), so an entry added by hand or by an older release stays in its
// binding file after its expiry, still granting the access. GET
// /ops/targets/unowned-expired lists those per file, so a person can
// decide; changeflow itself never acts on them.

// Why an expired entry is not changeflow's.
const (
	// unownedNoOperation: no request of changeflow's has the entry's
	// operationId (a hand edit, an older release, or none at all).
	unownedNoOperation = "NO_OPERATION"
	// unownedOtherBinding: the operationId is changeflow's, but for
	// another subject or target, or a revocation's — copied by hand; the
	// removal matches subject and operationId, so it is never removed.
	unownedOtherBinding = "OTHER_BINDING"
)

// unownedData is GET /ops/targets/unowned-expired's data.
type unownedData struct {
	// CheckedAt is the database clock the expiries were compared with,
	// the clock of the expiry scan.
	CheckedAt time.Time `json:"checkedAt"`
	// Ref is the branch read, the default branch.
	Ref   string        `json:"ref"`
	Files []unownedFile `json:"files"`
}

// unownedFile is one target's binding file.
type unownedFile struct {
	TargetKey string `json:"targetKey"`
	Title     string `json:"title"`
	Project   string `json:"project"`
	File      string `json:"file"`
	// Problem says, in words, why the file could not be checked (GitLab
	// unreachable, a file that does not parse); Entries is then empty.
	Problem string `json:"problem,omitempty"`
	// Entries are the expired entries changeflow did not write, oldest
	// expiry first.
	Entries []unownedEntry `json:"entries"`
	// OwnedExpired counts the expired entries changeflow wrote: the
	// expiry scan removes those by itself.
	OwnedExpired int `json:"ownedExpired"`
}

// unownedEntry is one expired entry changeflow did not write.
type unownedEntry struct {
	Subject     string    `json:"subject"`
	OperationID string    `json:"operationId"`
	ExpiresAt   time.Time `json:"expiresAt"`
	// Why is NO_OPERATION or OTHER_BINDING.
	Why string `json:"why"`
}

// Problems of a file, in words (the cause is logged; no upstream body).
const (
	unownedUnreadable = "The file could not be read from GitLab just now; try again in a moment."
	unownedInvalid    = "The file is not a valid binding file; it needs fixing by hand before anything can be checked (batches meeting it are blocked)."
)

// handleOpsUnownedExpired is GET /ops/targets/unowned-expired: every
// configured target's binding file on the default branch, read through
// the preview's GitLab reader (Business.Files: its own client and
// breaker, so these reads can never open the workflow's), with its
// expired entries that no operation of changeflow's wrote. One file that
// cannot be read or parsed is reported as such, and the others are still
// checked. The ownership of a file's entries is one store read
// (OperationOwnersOf), the expiry the database clock's.
func (s *Server) handleOpsUnownedExpired() http.Handler {
	return s.opsCall(config.RouteOpsRequestGet, nil, func(r *http.Request) (string, any, error) {
		b := s.deps.Business
		if b.Ops == nil || b.Config == nil || b.Files == nil {
			return "targets", nil, domain.Internal("ops unowned expired: no store, configuration or file reader wired", nil)
		}
		ctx := r.Context()
		now, err := b.Ops.DatabaseNow(ctx)
		if err != nil {
			return "targets", nil, domain.Internal("ops unowned expired: clock", err)
		}
		snap := b.Config.Current()
		project := previewProject(snap)
		out := unownedData{CheckedAt: now, Ref: previewRef, Files: []unownedFile{}}
		for _, t := range snap.Targets() {
			f := unownedFile{TargetKey: t.Key, Title: t.Title, Project: project, File: t.File, Entries: []unownedEntry{}}
			if project == "" {
				f.Problem = "No GitLab project is configured (gitlab.projects), so the file cannot be read."
			} else if err := s.unownedOf(ctx, &f, now); err != nil {
				return "targets", nil, domain.Internal("ops unowned expired", err)
			}
			out.Files = append(out.Files, f)
		}
		return "targets", out, nil
	})
}

// unownedOf fills f from its file on the default branch. A file GitLab
// will not give or that does not parse is f.Problem (logged); only a
// failing store is an error.
func (s *Server) unownedOf(ctx context.Context, f *unownedFile, now time.Time) error {
	var content []byte
	got, err := s.deps.Business.Files.GetFile(ctx, f.Project, f.File, previewRef)
	var ge *gitlab.Error
	switch {
	case err == nil:
		content = got.Content
	case errors.As(err, &ge) && ge.Status == http.StatusNotFound:
		return nil // no file yet: nothing in it
	default:
		s.deps.Logger.Warn("unowned expired entries: read failed", "target", f.TargetKey, "file", f.File, "err", err)
		f.Problem = unownedUnreadable
		return nil
	}
	file, err := bindingfile.Parse(content)
	if err != nil {
		s.deps.Logger.Warn("unowned expired entries: file does not parse", "target", f.TargetKey, "file", f.File, "err", err)
		f.Problem = unownedInvalid
		return nil
	}
	var expired []bindingfile.Entry
	var ids []string
	for _, e := range file.Entries {
		if e.ExpiresAt.After(now) {
			continue
		}
		expired = append(expired, e)
		if e.OperationID != "" {
			ids = append(ids, e.OperationID)
		}
	}
	if len(expired) == 0 {
		return nil
	}
	owners, err := s.deps.Business.Ops.OperationOwnersOf(ctx, ids)
	if err != nil {
		return err
	}
	byID := make(map[string]int, len(owners))
	for i, o := range owners {
		byID[o.OperationID] = i
	}
	for _, e := range expired {
		i, known := byID[e.OperationID]
		switch {
		case !known:
			f.Entries = append(f.Entries, unownedEntry{Subject: e.Subject, OperationID: e.OperationID, ExpiresAt: e.ExpiresAt.UTC(), Why: unownedNoOperation})
		case owners[i].Subject != e.Subject || owners[i].TargetKey != f.TargetKey || owners[i].Kind == domain.OperationRevoke:
			f.Entries = append(f.Entries, unownedEntry{Subject: e.Subject, OperationID: e.OperationID, ExpiresAt: e.ExpiresAt.UTC(), Why: unownedOtherBinding})
		default:
			f.OwnedExpired++
		}
	}
	slices.SortStableFunc(f.Entries, func(a, b unownedEntry) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	return nil
}
