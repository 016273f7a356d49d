package main

import (
	"log/slog"

	"changeflow/internal/config"
	"changeflow/internal/gitlab"
	"changeflow/internal/repoaccess"
	"changeflow/internal/store"
)

// defaultBranch is the branch every binding file is read from (the
// workflow merges into it; docs/workflow.md).
const defaultBranch = "main"

// newRepoAccess builds the reader of the binding files' history
// (docs/api.md, "Access history"): every access.repoScanInterval, over
// the first entry of gitlab.projects and every configured target, read
// again before every pass. It reads through the preview's GitLab client,
// whose breaker is its own, so a slow history read can never open the
// workflow's. The checker is GET /ops/access's comparison of the
// records with the files on the default branch, over the same settings.
func newRepoAccess(cfg *config.Manager, st *store.Store, gl gitlab.History, logger *slog.Logger) (*repoaccess.Reader, repoaccess.Checker) {
	settings := func() repoaccess.Settings {
		snap := cfg.Current()
		s := repoaccess.Settings{Interval: snap.AccessRepoScanInterval(), Ref: defaultBranch}
		if ps, _ := snap.List(config.KeyGitLabProjects); len(ps) > 0 {
			s.Project = ps[0]
		}
		for _, t := range snap.Targets() {
			s.Targets = append(s.Targets, repoaccess.Target{Key: t.Key, File: t.File})
		}
		return s
	}
	return repoaccess.New(repoaccess.Options{Store: st, History: gl, Logger: logger, Settings: settings}),
		repoaccess.Checker{Store: st, History: gl, Settings: settings}
}
