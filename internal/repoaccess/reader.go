// Package repoaccess is the repository part of the access history
// (docs/api.md, "Access history"): a periodic reader that follows every
// target's binding file on the default branch, commit by commit, and
// gives the entries changeflow did not write periods of their own
// (source "repo"), from the commit that added each to the one that
// removed it. Changeflow's own entries are accounted for by its records
// (store.accessRecord); this reader only fills in what they cannot know.
//
// Each pass, per target: read the cursor (the last commit applied), list
// the file's first-parent commits since the cursor's time, read the file
// at each new commit (and at the first one's parent), diff consecutive
// versions (domain.RepoAccessChanges, ownership by
// domain.EntryIsChangeflows) and apply the changes with the cursor move
// in one guarded transaction (store.AccessRepoApply): several instances
// can run the reader, and each commit is applied once.
package repoaccess

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"changeflow/internal/bindingfile"
	"changeflow/internal/domain"
	"changeflow/internal/gitlab"
	"changeflow/internal/periodic"
	"changeflow/internal/store"
)

// Store is what the reader needs of the store.
type Store interface {
	AccessRepoCursor(ctx context.Context, target, file string) (store.RepoCursor, error)
	AccessRepoApply(ctx context.Context, target, file string, from, to store.RepoCursor, writes []store.RepoAccessWrite) error
	OperationOwnersOf(ctx context.Context, ids []string) ([]store.OperationOwner, error)
}

// Target is one binding file to follow.
type Target struct {
	Key  string
	File string
}

// Settings are read before every pass, so a configuration reload
// applies without a restart.
type Settings struct {
	// Interval between passes; 0 turns the reader off (no pass runs, the
	// loop only looks again after Fallback).
	Interval time.Duration
	// Project is the config repo (gitlab.projects' first entry); "" for
	// none: no pass.
	Project string
	// Ref is the default branch.
	Ref     string
	Targets []Target
}

// Bounds of one pass, per file. The list of commits since the cursor is
// paged (100 a page) up to MaxPages; more than that in one file is
// refused rather than applied in part, because the list is newest first
// and a cut list would miss the oldest commits — the ones to apply
// first. Of the commits listed, at most MaxCommits are applied (two file
// reads each at most), oldest first; the rest wait for the next pass,
// which lists again from the moved cursor. So a first pass over a long
// history spreads over several passes, each of bounded cost.
const (
	DefaultMaxPages   = 50
	DefaultMaxCommits = 200
	fallbackInterval  = 5 * time.Minute
)

// Options configure a Reader.
type Options struct {
	Store    Store
	History  gitlab.History
	Logger   *slog.Logger
	Settings func() Settings
	// MaxPages and MaxCommits bound a pass (0: the defaults).
	MaxPages, MaxCommits int
}

// Reader is the periodic reader; Start and Stop are its lifecycle.
type Reader struct {
	opts Options
	svc  periodic.Service
}

// New returns a reader.
func New(o Options) *Reader {
	if o.MaxPages <= 0 {
		o.MaxPages = DefaultMaxPages
	}
	if o.MaxCommits <= 0 {
		o.MaxCommits = DefaultMaxCommits
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reader{opts: o}
}

// Start runs a pass at once and then every Settings.Interval.
func (r *Reader) Start(ctx context.Context) error {
	r.svc.Start(ctx, periodic.Every{
		Interval: func() time.Duration { return r.opts.Settings().Interval },
		Fallback: fallbackInterval, Now: true,
		Pass: func(ctx context.Context) {
			if r.opts.Settings().Interval <= 0 {
				return // off
			}
			n, err := r.ReadAll(ctx)
			periodic.LogPass(ctx, r.opts.Logger, err, "access history: reading the binding files' history failed; tried again next pass",
				n > 0, "access history: binding files' history read", "commits", n)
		},
	}.Loop)
	return nil
}

// Stop stops the reader after its pass in progress.
func (r *Reader) Stop() { r.svc.Stop() }

// ReadAll runs one pass over every target and returns how many commits
// it applied. One file that fails does not stop the others; the errors
// are joined.
func (r *Reader) ReadAll(ctx context.Context) (int, error) {
	s := r.opts.Settings()
	if s.Project == "" {
		return 0, nil
	}
	var (
		total int
		errs  []error
	)
	for _, t := range s.Targets {
		n, err := r.ReadFile(ctx, s.Project, s.Ref, t)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): %w", t.Key, t.File, err))
		}
	}
	return total, errors.Join(errs...)
}

// ReadFile applies the commits of t's file after its cursor, at most
// MaxCommits of them. Another instance applying the same commits first
// is not an error: 0, nil.
func (r *Reader) ReadFile(ctx context.Context, project, ref string, t Target) (int, error) {
	cur, err := r.opts.Store.AccessRepoCursor(ctx, t.Key, t.File)
	if err != nil {
		return 0, err
	}
	commits, err := r.newCommits(ctx, project, ref, t.File, cur)
	if err != nil || len(commits) == 0 {
		return 0, err
	}
	commits = commits[:min(len(commits), r.opts.MaxCommits)]
	versions, err := r.versions(ctx, project, t.File, commits)
	if err != nil {
		return 0, err
	}
	owned, err := r.ownership(ctx, t.Key, versions)
	if err != nil {
		return 0, err
	}
	var writes []store.RepoAccessWrite
	for i, c := range commits {
		for _, ch := range domain.RepoAccessChanges(versions[i], versions[i+1], owned) {
			writes = append(writes, store.RepoAccessWrite{Subject: ch.Subject, OperationID: ch.OperationID, Opens: ch.Opens, SHA: c.ID, At: c.CommittedDate})
		}
	}
	last := commits[len(commits)-1]
	err = r.opts.Store.AccessRepoApply(ctx, t.Key, t.File, cur, store.RepoCursor{SHA: last.ID, At: last.CommittedDate}, writes)
	if errors.Is(err, domain.ErrPreempted) {
		r.opts.Logger.Debug("access history: another instance applied these commits", "target", t.Key, "file", t.File)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return len(commits), nil
}

// newCommits lists the file's commits after cur, oldest first: every
// page since cur's time (GitLab's since is "on or after", so the cursor's
// own commit and any of the same second are listed again and dropped up
// to the cursor). A cursor commit no longer in the list (the branch was
// rewritten) keeps every commit after cur's second.
func (r *Reader) newCommits(ctx context.Context, project, ref, file string, cur store.RepoCursor) ([]gitlab.Commit, error) {
	var all []gitlab.Commit
	page := 1
	for n := 0; ; n++ {
		if n == r.opts.MaxPages {
			return nil, fmt.Errorf("more than %d pages of commits since %s: not applied in part", r.opts.MaxPages, cur.At)
		}
		got, next, err := r.opts.History.ListFileCommits(ctx, project, ref, file, cur.At, page)
		if err != nil {
			return nil, fmt.Errorf("list commits: %w", err)
		}
		all = append(all, got...)
		if next == 0 {
			break
		}
		page = next
	}
	slices.Reverse(all)
	if cur.SHA == "" {
		return all, nil
	}
	if i := slices.IndexFunc(all, func(c gitlab.Commit) bool { return c.ID == cur.SHA }); i >= 0 {
		return all[i+1:], nil
	}
	r.opts.Logger.Warn("access history: the last commit read is no longer on the branch; reading on from its time", "file", file, "sha", cur.SHA)
	return slices.DeleteFunc(all, func(c gitlab.Commit) bool { return !c.CommittedDate.After(cur.At) }), nil
}

// versions reads the file's entries before the first commit (at its
// first parent) and at each commit: len(commits)+1 versions. A version
// that does not parse (a broken hand edit) stands for the one before it,
// so its changes show at the commit that repairs it.
func (r *Reader) versions(ctx context.Context, project, file string, commits []gitlab.Commit) ([][]domain.RepoEntry, error) {
	out := make([][]domain.RepoEntry, 0, len(commits)+1)
	var before []domain.RepoEntry
	if p := commits[0].ParentIDs; len(p) > 0 {
		var err error
		if before, err = r.entriesAt(ctx, project, file, p[0], nil); err != nil {
			return nil, err
		}
	}
	out = append(out, before)
	for _, c := range commits {
		v, err := r.entriesAt(ctx, project, file, c.ID, out[len(out)-1])
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// entriesAt reads the file's entries at sha (none where it does not
// exist; prev where it does not parse).
func (r *Reader) entriesAt(ctx context.Context, project, file, sha string, prev []domain.RepoEntry) ([]domain.RepoEntry, error) {
	f, err := r.opts.History.GetFile(ctx, project, file, sha)
	var ge *gitlab.Error
	if errors.As(err, &ge) && ge.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the file at %s: %w", sha, err)
	}
	parsed, err := bindingfile.Parse(f.Content)
	if err != nil {
		r.opts.Logger.Warn("access history: the binding file does not parse at a commit; its changes count from the next one that does", "file", file, "sha", sha, "err", err)
		return prev, nil
	}
	out := make([]domain.RepoEntry, 0, len(parsed.Entries))
	for _, e := range parsed.Entries {
		out = append(out, domain.RepoEntry{Subject: e.Subject, OperationID: e.OperationID})
	}
	return out, nil
}

// ownership reads, in one store call, the owners of every operationId
// the versions name, and returns the rule telling changeflow's entries
// of target's file.
func (r *Reader) ownership(ctx context.Context, target string, versions [][]domain.RepoEntry) (func(domain.RepoEntry) bool, error) {
	seen := map[string]bool{}
	var ids []string
	for _, v := range versions {
		for _, e := range v {
			if e.OperationID != "" && !seen[e.OperationID] {
				seen[e.OperationID] = true
				ids = append(ids, e.OperationID)
			}
		}
	}
	owners, err := r.opts.Store.OperationOwnersOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]domain.EntryOwner, len(owners))
	for _, o := range owners {
		byID[o.OperationID] = domain.EntryOwner{Subject: o.Subject, TargetKey: o.TargetKey, Kind: o.Kind}
	}
	return func(e domain.RepoEntry) bool {
		o, ok := byID[e.OperationID]
		return domain.EntryIsChangeflows(e, target, o, ok)
	}, nil
}
